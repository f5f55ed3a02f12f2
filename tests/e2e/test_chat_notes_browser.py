"""The memory of this chat in a real browser, at desktop and phone sizes: /lembrar, /memoria and
/esquecer answer with notices and never reach the model; the panel lists the notes, saves and deletes
one, and refuses one too long; `@` brings another chat's memory into a message, chosen by keyboard; a
reply's excerpt, taken with Alt+R (or the Reply button on a phone), goes with the next message as a quote."""

from __future__ import annotations

import json
from typing import Any

from playwright.sync_api import Page, expect

from tests.conftest import add_character, add_connection, new_chat
from tests.e2e.test_accessibility_browser import _violations
from tests.support.sight import expect_in_sight
from tests.support.waiting import wait_for


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def _chat_requests(models) -> list[str]:
    """The text of each chat request the test model server received (every message, one string)."""
    texts = []
    for request in list(models.requests):
        body = request.json if isinstance(request.json, dict) else {}
        if "messages" in body:
            system = _text_of(body.get("system", ""))
            texts.append("\n".join([system, *(_text_of(m.get("content")) for m in body["messages"])]))
    return texts


def _send(page: Page, text: str) -> None:
    """Type a message and send it with the Send button (on a phone, Enter makes a new line)."""
    page.fill("#composer-input", text)
    page.click("#send-button")


def _chat_with_reply(api, character_id: int, name: str, request: str) -> dict:
    """A chat that has had one exchange with the test model, so it has a memory."""
    chat = new_chat(api, [character_id], name=name)
    r = api.post(f"/api/chats/{chat['id']}/generate", json={"action": "send", "content": request})
    assert r.status_code == 200, r.text
    assert "event: done" in r.text, r.text
    return chat


def test_memory_commands_are_notices_only(page: Page, live, models, shot, screen):
    with live.client() as api:
        add_connection(api, models)
        chat = new_chat(api, [add_character(api, "Aria")["id"]])
        before = api.get(f"/api/chats/{chat['id']}/messages").json()
    asked = len(models.requests)
    page.goto(f"{live.url}/chats/{chat['id']}")
    expect_in_sight(page, "#composer-input")

    notices = page.locator("#message-list .local-notice")
    _send(page, "/lembrar a luz do farol é verde")
    expect(notices).to_have_count(1)
    expect(notices.last).to_contain_text("note 1 of 30")
    expect(page.locator("#composer-input")).to_have_value("")

    _send(page, "/memoria")
    expect(notices).to_have_count(2)
    expect(notices.last).to_contain_text("a luz do farol é verde")
    expect_in_sight(page, "#message-list .local-notice:last-child")
    shot("memory")

    _send(page, "/ESQUECER 1")
    expect(notices).to_have_count(3)
    expect(notices.last).to_contain_text("Forgot note 1")
    expect_in_sight(page, "#message-list .local-notice:last-child")
    assert _violations(page) == set()

    # A note over the limit is refused with the limit named, in sight; what was typed stays to be shortened.
    long_note = "/lembrar " + "x" * 501
    _send(page, long_note)
    expect(page.locator("#toasts .toast", has_text="500")).to_be_visible()
    expect_in_sight(page, "#toasts .toast")
    expect(page.locator("#composer-input")).to_have_value(long_note)
    expect(notices).to_have_count(3)
    page.fill("#composer-input", "")

    # Dismiss takes a notice away; the others stay.
    notices.first.get_by_role("button", name="Dismiss").click()
    expect(notices).to_have_count(2)

    # No command became a message or reached the model; the notices were for this page only.
    with live.client() as api:
        assert api.get(f"/api/chats/{chat['id']}/messages").json() == before
    assert len(models.requests) == asked
    page.reload()
    expect(page.locator("#composer-input")).to_be_visible()
    expect(notices).to_have_count(0)


def test_panel_saves_lists_and_deletes_notes(page: Page, live, models, shot, screen):
    with live.client() as api:
        add_connection(api, models)
        chat = new_chat(api, [add_character(api, "Aria", first_mes="")["id"]])
    page.goto(f"{live.url}/chats/{chat['id']}")

    page.get_by_role("button", name="Memory of this chat").click()
    panel = page.locator("#memory-panel")
    expect(panel).to_be_visible()
    expect(panel.locator("#chat-memory-empty")).to_have_text(
        "Nothing yet. The memory appears after the first reply."
    )
    expect(panel).to_contain_text("@")  # how to bring this memory into another chat

    page.get_by_placeholder("Save a note…").fill("O cliente prefere azul")
    page.get_by_placeholder("Save a note…").press("Enter")
    notes = panel.locator("#chat-notes > li")
    expect(notes).to_have_count(1)
    expect(notes.first).to_contain_text("O cliente prefere azul")
    expect(page.get_by_placeholder("Save a note…")).to_have_value("")
    expect_in_sight(page, "#chat-notes > li")
    shot("panel")
    assert _violations(page) == set()

    panel.get_by_role("button", name="Delete note 1").click()
    expect(notes).to_have_count(0)

    # A note over the limit is refused, in sight, and the panel stays with what was typed.
    page.get_by_placeholder("Save a note…").fill("x" * 501)
    page.get_by_placeholder("Save a note…").press("Enter")
    toast = page.locator("#toasts .toast", has_text="500")
    expect(toast).to_be_visible()
    expect_in_sight(page, "#toasts .toast")
    expect(panel).to_be_visible()
    expect(notes).to_have_count(0)
    shot("refused")


def test_at_brings_another_chats_memory(page: Page, live, models, shot, screen):
    with live.client() as api:
        add_connection(api, models)
        aria = add_character(api, "Aria", first_mes="")["id"]
        lighthouse = _chat_with_reply(api, aria, "The lighthouse", "The lamp of the lighthouse is green.")
        market = _chat_with_reply(api, aria, "The market", "Fish is sold on Tuesdays.")
        new_chat(api, [aria], name="The empty room")  # no reply: no memory yet
        chat = new_chat(api, [aria], name="Now")
        others = f"/api/chats/{chat['id']}/memory/others"
        wait_for(lambda: len(api.get(others).json()) == 2, what="both chats with a reply to have a memory")
    page.goto(f"{live.url}/chats/{chat['id']}")
    box = page.locator("#composer-input")
    options = page.locator("#chat-ref-list [role=option]")

    # The empty chat offers the same list.
    page.get_by_role("button", name="Use another chat").click()
    expect(options).to_have_count(2)
    expect(box).to_be_focused()
    box.press("Escape")
    expect(page.locator("#chat-ref-picker")).to_be_hidden()

    box.press_sequentially("@")
    expect(options).to_have_count(2)
    expect(options.nth(0)).to_contain_text("The market")  # most recent first
    expect(options.nth(0)).to_contain_text("Fish is sold on Tuesdays.")
    expect(options.nth(1)).to_contain_text("The lighthouse")
    expect(page.locator("#chat-ref-picker")).not_to_contain_text("The empty room")
    expect(box).to_have_attribute("aria-controls", "chat-ref-list")
    expect_in_sight(page, "#chat-ref-picker")
    shot("picker")
    assert _violations(page) == set()

    # Escape closes the list and leaves what was typed.
    box.press("Escape")
    expect(page.locator("#chat-ref-picker")).to_be_hidden()
    expect(box).to_have_value("@")

    box.press_sequentially("ligh")
    expect(options).to_have_count(1)
    expect(options.first).to_contain_text("The lighthouse")
    box.press("ArrowDown")
    expect(box).to_have_attribute("aria-activedescendant", options.first.get_attribute("id"))
    box.press("Enter")
    chip = page.locator(f"#composer-refs .ref-chip[data-chat-id='{lighthouse['id']}']")
    expect(chip).to_contain_text("The lighthouse")
    expect(page.locator("#chat-ref-picker")).to_be_hidden()
    expect(box).to_have_value("")
    expect(box).to_be_focused()

    # A finger or the mouse chooses too; the same chat twice is one chip; a chip can be taken back.
    box.press_sequentially("@")
    expect(options).to_have_count(2)
    (options.nth(0).tap if screen == "phone" else options.nth(0).click)()
    chips = page.locator("#composer-refs .ref-chip")
    expect(chips).to_have_count(2)
    expect(chips.nth(1)).to_have_attribute("data-chat-id", str(market["id"]))
    box.press_sequentially("@light")
    expect(options).to_have_count(1)
    box.press("Tab")
    expect(chips).to_have_count(2)
    expect(box).to_have_value("")
    chips.nth(1).get_by_role("button").click()
    expect(chips).to_have_count(1)

    box.press_sequentially("What colour is the lamp?")
    shot("chip")
    page.click("#send-button")
    sent = page.locator("article.msg-user").last
    expect(sent.locator(".msg-text")).to_contain_text("What colour is the lamp?")
    expect(page.locator("article.msg-assistant").last).to_contain_text("Echo:")
    expect(page.locator("#composer-refs")).to_be_hidden()

    # The model read the other chat's memory, quoted inside « », before the question.
    asked = wait_for(lambda: [t for t in _chat_requests(models) if "What colour is the lamp?" in t])
    text = asked[-1]
    opening, closing = text.index("«"), text.index("»")
    assert opening < text.index("The lamp of the lighthouse is green.") < closing, text
    assert "Fish is sold" not in text

    # The sent message keeps the attachment: open it to read what was sent.
    ref = sent.locator(".msg-refs details.ref-sent")
    expect(ref.locator("summary")).to_contain_text("The lighthouse")
    ref.locator("summary").click()
    expect(ref.locator("pre.ref-text")).to_be_visible()
    expect(ref.locator("pre.ref-text")).to_contain_text("The lamp of the lighthouse is green.")
    shot("sent")


SELECT = """phrase => {
  const host = [...document.querySelectorAll("article.msg-assistant .msg-text")].at(-1);
  const walker = document.createTreeWalker(host, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const at = node.data.indexOf(phrase);
    if (at < 0) continue;
    const range = document.createRange();
    range.setStart(node, at);
    range.setEnd(node, at + phrase.length);
    const sel = document.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
    const r = range.getBoundingClientRect();
    return { top: r.top, bottom: r.bottom, left: r.left, right: r.right };
  }
  return null;
}"""


def test_reply_to_an_excerpt(page: Page, live, models, shot, screen):
    reply = "The keeper lit the green lamp at dusk and waited for the ship."
    with live.client() as api:
        add_connection(api, models)
        chat = new_chat(api, [add_character(api, "Aria", first_mes="")["id"]])
        models.script(reply)
        r = api.post(
            f"/api/chats/{chat['id']}/generate",
            json={"action": "send", "content": "Tell me about the keeper."},
        )
        assert "event: done" in r.text, r.text
    page.goto(f"{live.url}/chats/{chat['id']}")
    expect(page.locator("article.msg-assistant .msg-text")).to_contain_text(reply)
    button = page.locator("#quote-reply-button")
    expect(button).to_be_hidden()

    picked = page.evaluate(SELECT, "green lamp at dusk")
    assert picked, "the phrase is not in the reply"
    expect(button).to_be_visible()
    expect_in_sight(page, "#quote-reply-button")
    place = button.bounding_box()
    if screen == "phone":
        # Above the selection, clear of the phone's handles and menu below it.
        assert place["y"] + place["height"] <= picked["top"], (place, picked)
    else:
        # Beside where the selection ends.
        assert abs(place["x"] - picked["right"]) < 40 and place["y"] + place["height"] <= picked["bottom"], (
            place,
            picked,
        )
    shot("selected")

    # Text outside a reply offers nothing.
    page.evaluate("() => document.getSelection().removeAllRanges()")
    expect(button).to_be_hidden()
    page.evaluate(SELECT, "green lamp at dusk")
    expect(button).to_be_visible()

    if screen == "phone":
        button.tap()
    else:
        page.keyboard.press("Alt+KeyR")
    quote = page.locator("#composer-quote")
    expect(quote).to_be_visible()
    expect(page.locator("#composer-quote-text")).to_have_text("green lamp at dusk")
    expect(page.locator("#composer-input")).to_be_focused()
    expect(button).to_be_hidden()
    assert page.evaluate("() => document.getSelection().isCollapsed")
    expect_in_sight(page, "#composer-quote")
    shot("quote")
    assert _violations(page) == set()

    page.locator("#composer-input").press_sequentially("about this")
    page.click("#send-button")
    sent = page.locator("article.msg-user").last
    expect(sent.locator(".msg-text")).to_contain_text("about this")
    expect(sent.locator("blockquote.msg-quote")).to_have_text("green lamp at dusk")
    above = page.evaluate(
        """() => {
          const msg = [...document.querySelectorAll("article.msg-user")].at(-1);
          const q = msg.querySelector(".msg-quote"), t = msg.querySelector(".msg-text");
          return !!(q.compareDocumentPosition(t) & Node.DOCUMENT_POSITION_FOLLOWING)
            && q.getBoundingClientRect().bottom <= t.getBoundingClientRect().top + 1;
        }"""
    )
    assert above, "the quote is not above the message's text"
    expect(quote).to_be_hidden()
    expect(page.locator("article.msg-assistant").last).to_contain_text("Echo:")

    # The model read the excerpt as a quote, before the words about it.
    asked = wait_for(lambda: [t for t in _chat_requests(models) if "about this" in t])
    text = asked[-1]
    assert "> green lamp at dusk" in text, json.dumps(text)
    assert text.index("> green lamp at dusk") < text.rindex("about this"), text
    shot("sent")


def test_a_refused_message_gives_back_its_quote_and_chips(page: Page, live, models, shot, screen):
    reply = "The keeper lit the green lamp at dusk and waited for the ship."
    with live.client() as api:
        add_connection(api, models)
        aria = add_character(api, "Aria", first_mes="")["id"]
        gone = _chat_with_reply(api, aria, "The old log", "The ship came in at dawn.")
        chat = new_chat(api, [aria], name="Now")
        models.script(reply)
        r = api.post(
            f"/api/chats/{chat['id']}/generate",
            json={"action": "send", "content": "Tell me about the keeper."},
        )
        assert "event: done" in r.text, r.text
        wait_for(
            lambda: api.get(f"/api/chats/{chat['id']}/memory/others").json(), what="the old log's memory"
        )
    page.goto(f"{live.url}/chats/{chat['id']}")
    expect(page.locator("article.msg-assistant .msg-text")).to_contain_text(reply)
    box = page.locator("#composer-input")

    page.evaluate(SELECT, "green lamp")
    page.locator("#quote-reply-button").click()
    expect(page.locator("#composer-quote-text")).to_have_text("green lamp")
    box.press_sequentially("@old")
    expect(page.locator("#chat-ref-list [role=option]")).to_have_count(1)
    box.press("Enter")
    chip = page.locator("#composer-refs .ref-chip")
    expect(chip).to_have_count(1)

    # A quote or another chat's memory still needs words: nothing is sent, nothing is lost.
    page.click("#send-button")
    expect(page.locator("#toasts .toast", has_text="Write a few words")).to_be_visible()
    expect(page.locator("#composer-quote")).to_be_visible()
    expect(chip).to_have_count(1)

    # The chat chosen is deleted meanwhile: the server refuses the message, and the composer gets back
    # the words, the quote and the chip.
    with live.client() as api:
        assert api.delete(f"/api/chats/{gone['id']}").status_code in (200, 204)
    asked = len(models.requests)
    box.fill("Does it fit the log?")
    page.click("#send-button")
    expect(page.locator("#toasts .toast-error", has_text="was deleted")).to_be_visible()
    expect(box).to_have_value("Does it fit the log?")
    expect(page.locator("#composer-quote-text")).to_have_text("green lamp")
    expect(chip).to_have_count(1)
    expect(page.locator("article.msg-user")).to_have_count(1)
    expect_in_sight(page, "#toasts .toast-error")
    shot("refused")
    assert len(models.requests) == asked

    # Taken back, the message goes without them.
    page.locator("#composer-quote-remove").click()
    chip.get_by_role("button").click()
    expect(page.locator("#composer-quote")).to_be_hidden()
    expect(page.locator("#composer-refs")).to_be_hidden()
    page.click("#send-button")
    expect(page.locator("article.msg-user")).to_have_count(2)
    expect(page.locator("article.msg-user").last.locator(".msg-quote")).to_have_count(0)
    expect(page.locator("article.msg-assistant").last).to_contain_text("Echo: Does it fit the log?")


def test_a_long_excerpt_is_cut_to_the_limit(page: Page, live, models, shot, screen):
    reply = " ".join(f"Wave {n} broke on the rocks below the lighthouse." for n in range(60))
    assert len(reply) > 2_000
    with live.client() as api:
        add_connection(api, models)
        chat = new_chat(api, [add_character(api, "Aria", first_mes="")["id"]])
        models.script(reply)
        r = api.post(f"/api/chats/{chat['id']}/generate", json={"action": "send", "content": "The sea?"})
        assert "event: done" in r.text, r.text
    page.goto(f"{live.url}/chats/{chat['id']}")
    expect(page.locator("article.msg-assistant .msg-text")).to_contain_text("Wave 59")
    page.evaluate(
        """() => {
          const range = document.createRange();
          range.selectNodeContents([...document.querySelectorAll("article.msg-assistant .msg-text")].at(-1));
          document.getSelection().removeAllRanges();
          document.getSelection().addRange(range);
        }"""
    )
    expect_in_sight(page, "#quote-reply-button")
    if screen == "phone":
        page.locator("#quote-reply-button").tap()
    else:
        page.keyboard.press("Alt+KeyR")
    expect(page.locator("#toasts .toast", has_text="first 2,000 characters")).to_be_visible()
    quoted = page.locator("#composer-quote-text").text_content()
    assert len(quoted) == 2_000 and quoted.endswith("…") and reply.startswith(quoted[:-1]), quoted[-40:]

    # The server takes it as it is.
    page.locator("#composer-input").press_sequentially("and this")
    page.click("#send-button")
    expect(page.locator("article.msg-user").last.locator(".msg-quote")).to_contain_text("Wave 0 broke")
    expect(page.locator("article.msg-assistant").last).to_contain_text("Echo:")
