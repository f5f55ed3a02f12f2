"""Dialogue styled as dialogue (issue 29) in the browser, at desktop and phone sizes: quoted speech in
the speaker's colour (the character's, chosen in its form; the persona's for the user), set apart from
the narration around it, *actions* in italics, in the dark theme and the light one; a message holding
HTML or CSS in quotes shows it as text and runs nothing."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from app.platform.core.speech import PALETTE_DARK, SURFACES_LIGHT, auto_slots, readable
from tests.support.model_server import Reply

CHARACTER_COLOUR = "#ff8800"  # reads on the dark theme as is; the light theme gets a darker shade
PERSONA_COLOUR = "#5fa8ff"
PAYLOAD = '"<img src=x onerror=window.__pwned=1>" and "<style>body{display:none}</style>" and `"code"`'

COLOURS = """(el) => {
  const speech = el.querySelector('.dialogue'), em = el.querySelector('em');
  return {speech: getComputedStyle(speech).color, text: getComputedStyle(el).color,
          weight: getComputedStyle(speech).fontWeight,
          em: em ? getComputedStyle(em).fontStyle : null};
}"""


def _rgb(colour: str) -> str:
    return f"rgb({int(colour[1:3], 16)}, {int(colour[3:5], 16)}, {int(colour[5:7], 16)})"


def test_speech_is_in_each_speakers_colour_and_markup_in_quotes_stays_text(
    page: Page, live, shot, no_script_runs
):
    with live.client() as c:
        char = c.post(
            "/api/characters",
            json={"name": "Vex", "first_mes": '*she smiles* "Hello," she says. It\'s late.'},
        ).json()
        persona = c.post("/api/personas", json={"name": "Rowan", "colour": PERSONA_COLOUR}).json()
        chat = c.post("/api/chats", json={"character_ids": [char["id"]], "persona_id": persona["id"]}).json()
        for content in ('"Good evening," I say, and *bow*.', PAYLOAD):
            assert c.post(f"/api/chats/{chat['id']}/messages", json={"content": content}).status_code == 201

    # The colour is chosen in the character's form: picking one unticks "Automatic".
    page.goto(f"{live.url}/characters/{char['id']}")
    auto = page.locator('.speech-colour input[name="colour_auto"]')
    expect(auto).to_be_checked()
    page.locator('.speech-colour input[type="color"]').fill(CHARACTER_COLOUR)
    expect(auto).not_to_be_checked()
    page.locator(".speech-colour").scroll_into_view_if_needed()
    shot("character-form")
    page.get_by_role("button", name="Save").first.click()
    expect(page.locator(".notice-ok, .form-status").first).to_be_visible()

    page.goto(f"{live.url}/chats/{chat['id']}")
    reply = page.locator("article.msg-assistant .msg-text").first
    mine = page.locator("article.msg-user .msg-text")
    expect(reply.locator("span.dialogue")).to_have_text('"Hello,"')
    seen = reply.evaluate(COLOURS)
    assert seen["speech"] == _rgb(CHARACTER_COLOUR) != seen["text"], seen
    assert seen["em"] == "italic" and int(seen["weight"]) >= 600, seen
    user = mine.first.evaluate(COLOURS)
    assert user["speech"] == _rgb(PERSONA_COLOUR) != user["text"] and user["em"] == "italic", user

    payload = mine.nth(1)
    expect(payload.locator("span.dialogue")).to_have_count(2)
    expect(payload.locator("span.dialogue").first).to_have_text('"<img src=x onerror=window.__pwned=1>"')
    expect(payload.locator("span.dialogue").nth(1)).to_have_text('"<style>body{display:none}</style>"')
    expect(payload.locator("code")).to_have_text('"code"')
    expect(payload.locator("img, style, script, code span")).to_have_count(0)
    expect(page.locator("#composer-input")).to_be_visible()  # the quoted <style> styled nothing
    code = payload.evaluate("(el) => getComputedStyle(el.querySelector('code')).color")
    assert code != _rgb(PERSONA_COLOUR)
    shot("dark")

    page.evaluate("localStorage.setItem('sugo-theme', 'light')")
    page.reload()
    expect(page.locator("html")).to_have_attribute("data-theme", "light")
    seen = page.locator("article.msg-assistant .msg-text").first.evaluate(COLOURS)
    assert seen["speech"] == _rgb(readable(CHARACTER_COLOUR, SURFACES_LIGHT, toward="#000000")), seen
    assert seen["speech"] != seen["text"] and seen["speech"] != _rgb(CHARACTER_COLOUR)
    user = page.locator("article.msg-user .msg-text").first.evaluate(COLOURS)
    assert user["speech"] == _rgb(readable(PERSONA_COLOUR, SURFACES_LIGHT, toward="#000000")), user
    shot("light")

    page.wait_for_timeout(200)
    assert page.evaluate("window.__pwned") is None and no_script_runs == []


def test_a_character_without_a_colour_gets_one_of_its_own(page: Page, live, shot):
    with live.client() as c:
        ids = [
            c.post("/api/characters", json={"name": name, "first_mes": f'"I am {name}."'}).json()["id"]
            for name in ("Aria", "Bard")
        ]
        chat = c.post("/api/chats", json={"character_ids": ids}).json()
        c.post(f"/api/chats/{chat['id']}/messages", json={"content": '"Hi, both."'})
    page.goto(f"{live.url}/chats/{chat['id']}")
    speech = page.locator("article.msg-assistant .dialogue")
    expect(speech.first).to_be_visible()
    colours = {speech.nth(i).evaluate("(el) => getComputedStyle(el).color") for i in range(speech.count())}
    narration = page.locator("article.msg-assistant .msg-text").first.evaluate(
        "(el) => getComputedStyle(el).color"
    )
    # Greetings: the first member's, plus the second's if the chat shows it; each differs from narration.
    assert narration not in colours and len(colours) == speech.count(), colours


def test_a_streamed_reply_takes_its_speakers_colour_when_it_is_rendered(page: Page, live, models):
    with live.client() as c:
        c.post("/api/connections", json={"name": "Local", "base_url": models.base_url, "model": "test-model"})
        char = c.post("/api/characters", json={"name": "Vex", "first_mes": "*Vex waits.*"}).json()
        chat = c.post("/api/chats", json={"character_ids": [char["id"]]}).json()
    page.goto(f"{live.url}/chats/{chat['id']}")
    models.script(Reply(text='*she nods* "Sure, *why* not." It\'s done.', chunk_size=5, delay_s=0.01))
    page.fill("#composer-input", '"Will you?" I ask.')
    page.click("#send-button")
    reply = page.locator("article.msg-assistant").last
    expect(page.locator("article.msg-assistant")).to_have_count(2)
    expect(reply.locator(".msg-text span.dialogue")).to_have_text('"Sure, why not."')  # the server's render
    seen = reply.locator(".msg-text").evaluate(COLOURS)
    assert seen["speech"] == _rgb(PALETTE_DARK[auto_slots([char["id"]])[char["id"]]]) != seen["text"], seen
    assert seen["em"] == "italic"
    # Emphasis inside speech stays speech; the user's speech (no persona colour) takes the theme's own.
    inner = reply.locator(".dialogue em").evaluate("(el) => getComputedStyle(el).color")
    assert inner == seen["speech"]
    mine = page.locator("article.msg-user .msg-text").evaluate(COLOURS)
    assert mine["speech"] == "rgb(233, 181, 255)" != mine["text"], mine  # --dialogue, dark theme


def test_a_merged_reply_colours_each_speakers_part(page: Page, live, models, shot):
    with live.client() as c:
        c.post("/api/connections", json={"name": "T", "base_url": models.base_url, "model": "test-model"})
        colours = {"Aria": "#ff8800", "Bram": "#33cc99"}
        ids = [
            c.post("/api/characters", json={"name": name, "first_mes": "", "colour": colour}).json()["id"]
            for name, colour in colours.items()
        ]
        chat = c.post("/api/chats", json={"character_ids": ids}).json()
        c.put(
            f"/api/chats/{chat['id']}/options", json={"settings": {**chat["settings"], "group_merged": True}}
        )
    page.goto(f"{live.url}/chats/{chat['id']}")
    models.script(
        '<speaker="Aria">*tunes her lute* "A song?"\n\n<speaker="Bram">"Not *that* one," he groans.'
    )
    page.fill("#composer-input", "Play something!")
    page.click("#send-button")
    reply = page.locator("article.msg-assistant .msg-text")
    expect(reply.locator(".speaker-mark")).to_have_text(["Aria", "Bram"])
    speech = reply.locator(".dialogue")
    expect(speech).to_have_text(['"A song?"', '"Not that one,"'])
    seen = speech.evaluate_all("els => els.map(e => getComputedStyle(e).color)")
    marks = reply.locator(".speaker-mark").evaluate_all("els => els.map(e => getComputedStyle(e).color)")
    assert seen == marks == [_rgb(colours["Aria"]), _rgb(colours["Bram"])], (seen, marks)
    shot("merged")


def test_a_persona_chosen_in_chat_settings_brings_its_colour_without_a_reload(page: Page, live):
    with live.client() as c:
        char = c.post("/api/characters", json={"name": "Vex", "first_mes": "*waits*"}).json()
        c.post("/api/personas", json={"name": "Plain"})
        other = c.post("/api/personas", json={"name": "Rowan", "colour": "#5fa8ff"}).json()
        chat = c.post("/api/chats", json={"character_ids": [char["id"]]}).json()
        c.post(f"/api/chats/{chat['id']}/messages", json={"content": '"Hello."'})
    page.goto(f"{live.url}/chats/{chat['id']}")
    speech = page.locator("article.msg-user .dialogue")
    expect(speech).to_have_css("color", "rgb(233, 181, 255)")  # the theme's own
    page.get_by_role("button", name="Chat Settings").click()
    page.locator('select[name="persona_id"]').select_option(str(other["id"]))
    page.locator("#settings-panel").get_by_role("button", name="Save settings").click()
    expect(speech).to_have_css("color", _rgb("#5fa8ff"))
