"""Retake the README's screenshots (docs/screens/) from a live Sugo and the scripted test model.

Run it with `make screens` after changing a page the README shows. It imports the Seraphina card
and the Eldoria World Info book from tests/fixtures, chats a little through the real pages, and
photographs them at desktop (1280×800) and phone (390×844) sizes in the dark theme. Nothing here is
a test: the browser tests own the behaviour; this only keeps the tour's pictures true.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import Page, expect, sync_playwright

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.live import LiveSugo  # noqa: E402
from tests.support.model_server import ModelServer, Reply  # noqa: E402
from tests.support.waiting import wait_for  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures"
OUT = ROOT / "docs" / "screens"
CHROMIUM = "/usr/bin/chromium"
DESKTOP = {"viewport": {"width": 1280, "height": 800}, "device_scale_factor": 1}
PHONE = {
    "viewport": {"width": 390, "height": 844},
    "device_scale_factor": 1,
    "is_mobile": True,
    "has_touch": True,
}

REPLY = (
    "*Seraphina sets a cup of steaming tea beside you.* \"You're in my glade, deep in the Eldoria "
    'forest. The shadowfangs won\'t come past the wards." *She smiles.* "Drink. You\'ll feel better."'
)
SWIPE = (
    '*Seraphina brushes the hair from your forehead.* "The forest is quiet tonight, and you are safe here."'
)


def prepare(live: LiveSugo, models: ModelServer) -> int:
    """A connection, the card (its book comes along), Eldoria imported by hand, one chat with a reply."""
    with live.client() as c:
        c.post(
            "/api/connections",
            json={
                "name": "Local llama.cpp",
                "base_url": models.base_url,
                "model": "test-model",
                "context_size": 8192,
                "max_tokens": 300,
                "price_input_per_m": 3,
                "price_output_per_m": 15,
            },
        )
        with open(FIXTURES / "default_Seraphina.png", "rb") as card:
            char = c.post(
                "/api/characters/import", files={"file": ("Seraphina.png", card, "image/png")}
            ).json()
        with open(FIXTURES / "Eldoria.json", "rb") as book:
            c.post("/api/lorebooks/import", files={"file": ("Eldoria.json", book, "application/json")})
        chat = c.post("/api/chats", json={"character_ids": [char["id"]]}).json()
        # The roleplay view: a shipped scene behind the messages (the card's picture stands beside them).
        c.put(
            f"/api/chats/{chat['id']}/options", json={"settings": {"background": "builtin:forest"}}
        ).raise_for_status()
    return chat["id"]


def chat_with_reply(page: Page, live: LiveSugo, models: ModelServer, chat_id: int) -> None:
    page.goto(f"{live.url}/chats/{chat_id}")
    if page.locator("article.msg-user").count() == 0:
        models.script(Reply(text=REPLY), Reply(text=SWIPE))
        page.fill("#composer-input", "Where am I? What were those beasts?")
        page.click("#send-button")
        expect(page.locator("article.msg-assistant").nth(1).locator(".msg-text")).to_contain_text("Drink")
        page.locator("article.msg-assistant").nth(1).locator(".swipe-right").click()
        expect(page.locator("article.msg-assistant").nth(1).locator(".swipe-counter")).to_have_text("2/2")
        page.locator("article.msg-assistant").nth(1).locator(".swipe-left").click()
        expect(page.locator("article.msg-assistant").nth(1).locator(".swipe-counter")).to_have_text("1/2")
    page.mouse.move(0, 0)


def desktop_shots(page: Page, live: LiveSugo, models: ModelServer, chat_id: int) -> None:
    chat_with_reply(page, live, models, chat_id)
    page.screenshot(path=str(OUT / "chat-desktop.png"))

    page.click("#more-button")
    expect(page.locator("#composer-menu")).to_be_visible()
    page.screenshot(path=str(OUT / "chat-actions-desktop.png"))
    page.keyboard.press("Escape")

    page.click("#peek-button")
    expect(page.locator("#peek-dialog .prompt-blocks")).to_be_visible()
    page.screenshot(path=str(OUT / "peek-prompt.png"))
    page.get_by_role("button", name="Close Peek Prompt").click()

    page.click("#context-button")
    expect(page.locator("#context-dialog .ctx-grid .cell").first).to_be_visible()
    page.screenshot(path=str(OUT / "context-grid.png"))

    page.goto(f"{live.url}/lorebooks")
    page.locator("a", has_text=re.compile("Eldoria")).first.click()
    expect(page.locator(".lore-entry").first).to_be_visible()
    page.screenshot(path=str(OUT / "lorebook-desktop.png"))

    # A preset imported from Marinara, open in the editor at its sections.
    page.goto(f"{live.url}/presets")
    page.set_input_files(
        "#preset-import-form input[type=file]", str(FIXTURES / "presets" / "marinara_universal.marinara.json")
    )
    page.get_by_role("button", name="Import", exact=True).click()
    expect(page.locator("#preset-sections > li").first).to_be_visible()
    page.locator("#preset-sections").scroll_into_view_if_needed()
    page.screenshot(path=str(OUT / "preset-desktop.png"))


def phone_shots(page: Page, live: LiveSugo, models: ModelServer, chat_id: int) -> None:
    chat_with_reply(page, live, models, chat_id)
    page.screenshot(path=str(OUT / "chat-phone.png"))

    page.click("#settings-button")
    panel = page.locator("#settings-panel")
    expect(panel.locator("#chat-connection")).to_be_visible()
    panel.locator("h3, h2, legend", has_text=re.compile("Lorebooks", re.I)).first.scroll_into_view_if_needed()
    page.screenshot(path=str(OUT / "settings-phone.png"))

    active = panel.locator("#active-context")
    if active.get_attribute("open") is None:
        active.locator("summary").click()
    active.locator("li").last.scroll_into_view_if_needed()
    page.screenshot(path=str(OUT / "active-context-phone.png"))
    page.get_by_role("button", name="Close Chat Settings").click()

    # The memory of this chat: built by rules after the reply (in the background), and a note.
    with live.client() as c:
        wait_for(lambda: c.get(f"/api/chats/{chat_id}/memory").json()["requests"], what="the chat's memory")
    if not page.locator(".local-notice").count():
        page.fill("#composer-input", "/remember The glade is warded; the shadows cannot enter it.")
        page.click("#send-button")
        expect(page.locator(".local-notice")).to_be_visible()
    page.click("#chat-memory-button")
    expect(page.locator("#memory-panel #chat-notes")).to_be_visible()
    # The sheet slides up: the picture waits for the slide to end.
    page.wait_for_function("() => document.getElementById('memory-panel').getAnimations().length === 0")
    page.screenshot(path=str(OUT / "chat-memory-phone.png"))


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, ModelServer() as models, LiveSugo(Path(tmp) / "data") as live:
        chat_id = prepare(live, models)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            for size, take in ((DESKTOP, desktop_shots), (PHONE, phone_shots)):
                context = browser.new_context(**size, color_scheme="dark")
                take(context.new_page(), live, models, chat_id)
                context.close()
            browser.close()
    for path in sorted(OUT.glob("*.png")):
        print(path.relative_to(ROOT))


if __name__ == "__main__":
    main()
