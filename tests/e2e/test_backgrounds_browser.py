"""Backgrounds in the browser (issue 29), desktop and phone: a shipped background picked in Chat Settings
by keyboard shows behind the messages without a reload (its box covers the message list, which lies
above it); an uploaded picture is chosen at once; a refused upload says why beside the control, in
view; axe finds nothing on the chat page with a background on, in the dark theme and the light one."""

from __future__ import annotations

import io
import json

from axe_playwright_python.sync_playwright import Axe
from PIL import Image as PILImage
from playwright.sync_api import Page, expect

AXE = Axe().axe_script
LINES = [
    ("Aria", False, "*Aria sets down her lute.* The road was long, but the fire is warm. Sit, traveller."),
    ("Rowan", True, "Thanks. What is this place?"),
    (
        "Aria",
        False,
        '"The Gilded Boar," she says. *She pours two cups.* "Best cider this side of the hills."',
    ),
    ("Rowan", True, "Then I'll take a cup, and a story."),
    ("Aria", False, "*She smiles and tunes a string.* A story it is."),
]


def _chat(live) -> int:
    header = {
        "user_name": "Rowan",
        "character_name": "Aria",
        "create_date": "2024-05-01@21h13m05s",
        "chat_metadata": {},
    }
    lines = [header] + [
        {"name": n, "is_user": u, "is_system": False, "send_date": "2024-05-01T21:13:05.000Z", "mes": m}
        for n, u, m in LINES
    ]
    raw = ("\n".join(json.dumps(line) for line in lines) + "\n").encode()
    with live.client() as c:
        c.post("/api/characters", json={"name": "Aria", "first_mes": "Aria waves."})
        r = c.post("/api/chats/import", files={"file": ("Tavern.jsonl", raw)})
        assert r.status_code == 201, r.text
        return r.json()["id"]


def _open_settings(page: Page):
    page.click("#settings-button")
    panel = page.locator("#settings-panel")
    expect(panel.locator("#background-section")).to_be_visible()
    page.wait_for_function(
        "() => getComputedStyle(document.getElementById('settings-panel')).transform === 'none'"
    )
    return panel


def _behind_the_messages(page: Page, src: str) -> None:
    img = page.locator("#chat-backdrop img")
    expect(img).to_be_visible()
    expect(img).to_have_attribute("src", src)
    page.wait_for_function("() => document.querySelector('#chat-backdrop img').complete")
    pic, messages = img.bounding_box(), page.locator("#message-list").bounding_box()
    assert pic["x"] <= messages["x"] and pic["y"] <= messages["y"]
    assert pic["x"] + pic["width"] >= messages["x"] + messages["width"] - 1
    assert pic["y"] + pic["height"] >= messages["y"] + messages["height"] - 1
    # Under the messages: what is at the list's centre and at a message's text belongs to the list.
    on_top = page.evaluate(
        """() => { const list = document.getElementById('message-list'); const r = list.getBoundingClientRect();
                   const t = [...list.querySelectorAll('article.msg .msg-text')].pop().getBoundingClientRect();
                   return [document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2),
                           document.elementFromPoint(t.x + 4, t.y + 4)].map((el) => list.contains(el)); }"""
    )
    assert on_top == [True, True]


# axe cannot measure text over a picture (it reports it "incomplete"), so the worst case is worked out
# here: every text in the message list over the whitest and the blackest picture, under the scrim and
# each translucent surface between the picture and the text, must keep 4.5:1.
WORST_CONTRAST = """() => {
  const rgba = (css) => {
    const m = css.match(/^(rgba?|color)\\((.*)\\)$/);
    if (!m) return null;
    const srgb = m[1] === "color";
    const parts = m[2].replace("srgb", "").split(/[\\s,/]+/).filter(Boolean).map(Number);
    const k = srgb ? 255 : 1;
    return [parts[0] * k, parts[1] * k, parts[2] * k, parts.length > 3 ? parts[3] : 1];
  };
  const over = (top, under) => top.slice(0, 3).map((v, i) => v * top[3] + under[i] * (1 - top[3]));
  const lum = (c) => { const f = c.map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
                       return 0.2126 * f[0] + 0.7152 * f[1] + 0.0722 * f[2]; };
  const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
  const list = document.getElementById("message-list");
  const scrim = rgba(getComputedStyle(document.getElementById("chat-backdrop"), "::after").backgroundColor);
  const worst = []; let texts = 0;
  for (const el of list.querySelectorAll("*")) {
    const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
    if (!own || !el.getClientRects().length || getComputedStyle(el).visibility === "hidden") continue;
    const layers = [];
    for (let a = el; a && a !== list; a = a.parentElement) {
      const bg = rgba(getComputedStyle(a).backgroundColor);
      if (bg && bg[3] > 0) layers.unshift(bg);
    }
    const text = rgba(getComputedStyle(el).color);
    texts++;
    for (const picture of [[255, 255, 255], [0, 0, 0]]) {
      let under = over(scrim, picture);
      for (const layer of layers) under = over(layer, under);
      const r = ratio(over(text, under), under);
      if (r < 4.5) worst.push(`${el.className || el.tagName} "${el.textContent.trim().slice(0, 30)}": ${r.toFixed(2)}`);
    }
  }
  return [texts, worst];
}"""


def _contrast_over_any_picture(page: Page) -> None:
    texts, worst = page.evaluate(WORST_CONTRAST)
    assert texts >= len(LINES) * 2 and worst == []


def _violations(page: Page) -> list[str]:
    if not page.evaluate("() => typeof axe !== 'undefined'"):
        page.evaluate(AXE)
    found = page.evaluate("() => axe.run(document, {resultTypes: ['violations']})")["violations"]
    return [f"{v['id']}: {[n['target'] for n in v['nodes']]}" for v in found]


def _picture(tmp_path, name: str) -> str:
    path = tmp_path / name
    img = PILImage.new("RGB", (320, 200), (250, 250, 245))  # a light picture: the worst case for light text
    for x in range(0, 320, 40):
        img.paste((200, 80, 60), (x, 0, x + 20, 200))
    out = io.BytesIO()
    img.save(out, format="PNG")
    path.write_bytes(out.getvalue())
    return str(path)


def test_a_shipped_background_by_keyboard_then_an_upload_behind_the_messages(
    page: Page, live, shot, tmp_path
):
    chat_id = _chat(live)
    page.goto(f"{live.url}/chats/{chat_id}")
    expect(page.locator("article.msg")).to_have_count(len(LINES))
    expect(page.locator("#chat-backdrop")).to_be_hidden()

    panel = _open_settings(page)
    dusk = panel.get_by_role("radio", name="Dusk hills")
    dusk.focus()
    page.keyboard.press("ArrowRight")  # a radio group: the arrow moves to the next shipped scene
    expect(panel.get_by_role("radio", name="Forest at night")).to_be_checked()
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    night = panel.get_by_role("radio", name="Night city")
    expect(night).to_be_checked()
    panel.get_by_role("button", name="Save settings").click()
    expect(panel.get_by_text("Saved.")).to_be_visible()
    panel.get_by_role("button", name="Close Chat Settings").click()
    _behind_the_messages(page, "/static/backgrounds/night-city.svg")  # swapped in without a reload
    shot("shipped-dark")
    assert _violations(page) == []
    _contrast_over_any_picture(page)

    panel = _open_settings(page)
    bad = tmp_path / "notes.png"
    bad.write_text("Not a picture at all.")
    panel.locator("#background-file").scroll_into_view_if_needed()  # where the user's click is
    panel.locator("#background-file").set_input_files(str(bad))
    error = panel.locator("#background-error")
    expect(error).to_contain_text("not a picture Sugo can read")
    expect(error).to_be_in_viewport()
    expect(panel.get_by_role("radio", name="Night city")).to_be_checked()  # the choice stays
    shot("refused")

    panel.locator("#background-file").set_input_files(_picture(tmp_path, "Striped wall.png"))
    expect(panel.locator("#background-status")).to_contain_text("“Striped wall.png” added and chosen")
    expect(panel.get_by_role("radio", name="Striped wall.png")).to_be_checked()
    expect(panel.locator("#background-error")).to_have_count(0)
    shot("uploaded-settings")
    assert _violations(page) == []  # the thumbnails, their labels and the delete buttons, over the chat
    # Saving the form now keeps the upload chosen (the radios were swapped in with it).
    panel.get_by_role("button", name="Save settings").click()
    expect(panel.get_by_text("Saved.")).to_be_visible()
    panel.get_by_role("button", name="Close Chat Settings").click()
    src = page.locator("#chat-backdrop img").get_attribute("src")
    assert src.startswith("/images/")
    _behind_the_messages(page, src)
    shot("uploaded-dark")
    assert _violations(page) == []

    page.add_init_script("localStorage.setItem('sugo-theme', 'light')")
    page.reload()
    expect(page.locator("html")).to_have_attribute("data-theme", "light")
    _behind_the_messages(page, src)
    shot("uploaded-light")
    assert _violations(page) == []
    _contrast_over_any_picture(page)

    # The per-device switch (html[data-scenery="off"]) hides every background.
    page.evaluate("() => document.documentElement.dataset.scenery = 'off'")
    expect(page.locator("#chat-backdrop")).to_be_hidden()


def test_a_characters_default_background_shows_in_its_chat(page: Page, live, shot):
    chat_id = _chat(live)
    with live.client() as c:
        aria = c.get(f"/api/chats/{chat_id}").json()["character_ids"][0]
    page.goto(f"{live.url}/characters/{aria}")
    page.locator("details").first.evaluate("d => d.open = true")
    select = page.get_by_label("Default background")
    select.select_option("builtin:tavern")
    select.scroll_into_view_if_needed()
    shot("character-default")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.get_by_text("Saved.")).to_be_visible()
    expect(page.get_by_label("Default background")).to_have_value("builtin:tavern")
    page.goto(f"{live.url}/chats/{chat_id}")
    _behind_the_messages(page, "/static/backgrounds/tavern.svg")
    shot("character-default-chat")
