"""The whole first capability in a real browser: import a card, chat with streaming, swipe, edit,
hide, Peek Prompt, Chat Settings."""

import json
import re
import threading

from playwright.sync_api import Page, expect

from tests.conftest import SERAPHINA_PNG
from tests.support.cards import v2_only_png
from tests.support.model_server import Reply

STREAMED = (
    "Seraphina brushes the hair from your forehead. The forest is quiet tonight, and you are safe here."
)


def _connection(live, models, name="Local test", model="test-model"):
    with live.client() as c:
        r = c.post(
            "/api/connections",
            json={
                "name": name,
                "base_url": models.base_url,
                "model": model,
                "context_size": 8192,
                "max_tokens": 200,
            },
        )
        assert r.status_code == 201, r.text
        return r.json()


def test_import_card_chat_stream_swipe_edit_hide_peek_settings(page: Page, live, models, shot, tmp_path):
    models.models = ["test-model", "other-model"]
    card = tmp_path / "Seraphina-v2.png"
    card.write_bytes(v2_only_png(SERAPHINA_PNG.read_bytes()))
    _connection(live, models)
    other = _connection(live, models, name="Second endpoint", model="other-model")

    # Import a SillyTavern V2 PNG card (only the `chara` chunk).
    page.goto(live.url + "/characters")
    expect(page.get_by_text("No characters yet")).to_be_visible()
    page.set_input_files("#card-file", str(card))
    page.wait_for_url(re.compile(r"/characters/\d+$"))
    expect(page.locator("h1")).to_have_text("Seraphina")
    with live.client() as c:
        imported = c.get("/api/characters/" + page.url.rsplit("/", 1)[1]).json()
    assert imported["card_spec"] == "chara_card_v2" and imported["avatar_url"]
    shot("character")
    # The card's embedded lorebook became a lorebook attached to the character.
    page.locator("summary", has_text="Advanced").click()
    expect(page.locator("#character-lorebooks")).to_contain_text("Lorebooks:")
    page.locator("#character-lorebooks a").first.click()
    expect(page.locator(".lore-entry").first).to_be_visible()
    page.go_back()

    # Start a chat with her; her greeting opens it.
    page.get_by_role("link", name="Start a chat").click()
    page.get_by_role("button", name="Start chat").click()
    page.wait_for_url(re.compile(r"/chats/\d+$"))
    chat_id = int(page.url.rsplit("/", 1)[1])
    expect(page.locator("article.msg-assistant")).to_have_count(1)

    # Send a message and watch the reply stream in, token by token.
    # The model pauses after eight deltas until the test has seen the reply half-way.
    halfway = threading.Event()
    models.script(
        Reply(text=STREAMED, chunk_size=3, delay_s=0.03, hold=halfway, hold_after_chunks=8),
        Reply(text="A second, different reply."),
    )
    page.fill("#composer-input", "Where am I?")
    page.click("#send-button")
    reply = page.locator("article.msg-assistant").nth(1)
    expect(page.locator("#stop-button")).to_be_visible()
    partial = reply.locator(".msg-text")
    expect(partial).to_contain_text("Seraphina brushes")  # arrived before the end
    assert len(partial.inner_text()) < len(STREAMED), "the reply should still be streaming"
    shot("streaming")
    halfway.set()
    expect(partial).to_have_text(STREAMED)
    expect(page.locator("#send-button")).to_be_visible()
    expect(page.locator("article.msg-user .msg-text")).to_have_text("Where am I?")
    expect(reply.locator(".swipe-counter")).to_have_text("1/1")

    # Swipe right past the newest version: a second reply is generated; then back to the first.
    reply.locator(".swipe-right").click()
    reply = page.locator("article.msg-assistant").nth(1)
    expect(reply.locator(".swipe-counter")).to_have_text("2/2")
    expect(reply.locator(".msg-text")).to_have_text("A second, different reply.")
    # The stream's end refreshes the message; a click before that lands could be undone by it.
    expect(page.locator("#send-button")).to_be_visible()
    reply.locator(".swipe-left").click()
    reply = page.locator("article.msg-assistant").nth(1)
    expect(reply.locator(".swipe-counter")).to_have_text("1/2")
    expect(reply.locator(".msg-text")).to_have_text(STREAMED)
    shot("swiped")

    # Edit the user's message.
    user = page.locator("article.msg-user")
    user.hover()
    user.get_by_role("button", name="Edit message").click()
    page.locator(".edit-form textarea").fill("Where am I, *really*?")
    page.locator(".edit-form").get_by_role("button", name="Save").click()
    expect(page.locator("article.msg-user .msg-text")).to_have_text("Where am I, really?")
    expect(page.locator("article.msg-user .msg-text em")).to_have_text("really")

    # Hide it from the AI: it stays visible, marked, and leaves Peek Prompt.
    page.locator("article.msg-user").hover()
    page.locator("article.msg-user").get_by_role("button", name="Hide message").click()
    expect(page.locator("article.msg-user.is-hidden")).to_be_visible()
    expect(page.locator("article.msg-user .badge-hidden")).to_contain_text("hidden from AI")
    page.click("#peek-button")
    dialog = page.locator("#peek-dialog")
    expect(dialog.locator(".prompt-blocks")).to_be_visible()
    expect(dialog).to_contain_text("1 hidden message left out")
    expect(dialog.locator(".prompt-blocks")).not_to_contain_text("Where am I")
    expect(dialog.locator(".prompt-blocks")).to_contain_text(STREAMED[:40])
    shot("peek")
    dialog.get_by_role("button", name="Close Peek Prompt").click()

    # Chat Settings: switch this chat to the second connection.
    page.click("#settings-button")
    panel = page.locator("#settings-panel")
    expect(panel.locator("#chat-connection")).to_be_visible()
    shot("settings")
    panel.locator("#chat-connection").select_option(str(other["id"]))
    panel.get_by_role("button", name="Save settings").click()
    expect(panel.get_by_text("Saved.")).to_be_visible()
    with live.client() as c:
        assert c.get(f"/api/chats/{chat_id}").json()["connection_id"] == other["id"]
    panel.get_by_role("button", name="Close Chat Settings").click()
    page.fill("#composer-input", "Anyone there?")
    page.click("#send-button")
    expect(page.locator("article.msg-assistant").last.locator(".msg-text")).to_have_text(
        "Echo: Anyone there?"
    )
    assert models.last_request.json["model"] == "other-model"
    shot("after-settings")


def test_nothing_in_a_message_executes(page: Page, live, models, no_script_runs):
    payload = (
        '<script>window.__pwned = 1; alert("script")</script> <img src=x onerror="window.__pwned = 2; alert(2)"> '
        '[click me](javascript:window.__pwned=3) <svg onload="alert(4)"></svg>'
    )
    _connection(live, models)
    with live.client() as c:
        char = c.post("/api/characters", json={"name": "Vex", "first_mes": payload}).json()
        chat = c.post("/api/chats", json={"character_ids": [char["id"]]}).json()
    page.goto(f"{live.url}/chats/{chat['id']}")
    models.script(Reply(text=payload, chunk_size=7))
    page.fill("#composer-input", payload)
    page.click("#send-button")
    expect(page.locator("article.msg-assistant")).to_have_count(2)
    expect(page.locator("article.msg-assistant").last.locator(".msg-text")).to_contain_text("<script>")
    page.reload()
    expect(page.locator("article.msg")).to_have_count(3)
    link = page.get_by_text("[click me](javascript:window.__pwned=3)").first
    expect(link).to_be_visible()
    assert page.locator(".msg-text a[href^='javascript']").count() == 0
    page.wait_for_timeout(300)
    assert page.evaluate("window.__pwned") is None
    assert no_script_runs == []


def test_stop_keeps_the_partial_reply(page: Page, live, models):
    _connection(live, models)
    with live.client() as c:
        char = c.post("/api/characters", json={"name": "Bram", "first_mes": "Hm?"}).json()
        chat = c.post("/api/chats", json={"character_ids": [char["id"]]}).json()
    page.goto(f"{live.url}/chats/{chat['id']}")
    models.script(Reply(text="and then " * 300, chunk_size=4, delay_s=0.02))
    page.fill("#composer-input", "Tell me everything")
    page.click("#send-button")
    reply = page.locator("article.msg-assistant").last
    expect(reply.locator(".msg-text")).to_contain_text("and then and then")
    page.click("#stop-button")
    expect(page.locator("#send-button")).to_be_visible()
    expect(reply.locator(".badge-warn")).to_have_text("incomplete")
    with live.client() as c:
        last = c.get(f"/api/chats/{chat['id']}/messages").json()[-1]
    assert last["status"] == "partial" and 0 < len(last["content"]) < len("and then " * 300)


def test_error_mid_stream_is_shown_and_the_partial_reply_kept(page: Page, live, models, shot):
    _connection(live, models)
    with live.client() as c:
        char = c.post("/api/characters", json={"name": "Bram", "first_mes": "Hm?"}).json()
        chat = c.post("/api/chats", json={"character_ids": [char["id"]]}).json()
    page.goto(f"{live.url}/chats/{chat['id']}")
    models.script(Reply(text="The forge roars as the bellows", chunk_size=5, break_after_chunks=3))
    page.fill("#composer-input", "Work the forge")
    page.click("#send-button")
    reply = page.locator("article.msg-assistant").last
    expect(reply.locator(".msg-error")).to_contain_text("dropped")
    expect(reply.locator(".msg-text")).to_contain_text("The forge roars")
    expect(page.locator("#toasts .toast-error")).to_contain_text("dropped")
    shot("broken-stream")


def test_peek_prompt_page_lists_blocks_with_tokens(page: Page, live, models):
    with live.client() as c:
        char = c.post(
            "/api/characters",
            json={
                "name": "Iris",
                "description": "An archivist.",
                "mes_example": "<START>\n{{user}}: hi\n{{char}}: hello",
            },
        ).json()
        chat = c.post("/api/chats", json={"character_ids": [char["id"]]}).json()
    page.goto(f"{live.url}/chats/{chat['id']}/prompt")
    blocks = page.locator(".prompt-block")
    expect(blocks.first).to_contain_text("Main prompt")
    expect(page.locator(".prompt-block[data-block='examples']")).to_contain_text("[Example Chat]")
    messages = json.loads(page.locator("#prompt-json").text_content())
    assert messages[0]["role"] == "system" and "An archivist." in messages[0]["content"]


def test_context_note_at_depth_two_shows_in_peek_prompt_at_that_depth(page: Page, live, models, shot):
    _connection(live, models)
    with live.client() as c:
        char = c.post("/api/characters", json={"name": "Iris", "first_mes": "The archive is quiet."}).json()
        chat = c.post("/api/chats", json={"character_ids": [char["id"]]}).json()
        for text in ("First question", "Second question"):
            c.post(f"/api/chats/{chat['id']}/generate", json={"action": "send", "content": text})
    page.goto(f"{live.url}/chats/{chat['id']}")
    page.click("#settings-button")
    panel = page.locator("#settings-panel")
    panel.locator("#context-note").fill("Iris is hiding a letter.")
    panel.locator("#context-note-depth").fill("2")
    panel.get_by_role("button", name="Save settings").click()
    expect(panel.get_by_text("Saved.")).to_be_visible()
    expect(panel.locator("#depth-warning")).to_have_count(0)
    panel.get_by_role("button", name="Close Chat Settings").click()
    page.click("#peek-button")
    blocks = page.locator("#peek-dialog .prompt-block")
    expect(blocks.filter(has_text="Context note (depth 2)")).to_have_count(1)
    names = blocks.evaluate_all("els => els.map(e => e.dataset.block)")
    note = names.index("context_note_0")
    # Two history messages follow the note: the previous reply and the newest message.
    assert [n.startswith("message_") for n in names[note + 1 :]] == [True, True]
    shot("context-note")
    page.locator("#peek-dialog").get_by_role("button", name="Close Peek Prompt").click()
    # A deep note is allowed, with a warning that it breaks prompt caching.
    page.click("#settings-button")
    panel.locator("#context-note-depth").fill("9")
    panel.get_by_role("button", name="Save settings").click()
    expect(panel.locator("#depth-warning")).to_contain_text("breaks prompt caching")


def test_context_grid_shows_legend_cost_and_downloads_a_snapshot(page: Page, live, models, shot):
    with live.client() as c:
        c.post(
            "/api/connections",
            json={
                "name": "Priced",
                "base_url": models.base_url,
                "model": "test-model",
                "context_size": 8192,
                "max_tokens": 300,
                "price_input_per_m": 3,
                "price_output_per_m": 15,
                "price_cached_input_per_m": 0.3,
            },
        )
        char = c.post(
            "/api/characters",
            json={"name": "Iris", "description": "An archivist. " * 80, "first_mes": "The archive is quiet."},
        ).json()
        chat = c.post("/api/chats", json={"character_ids": [char["id"]]}).json()
        c.post(f"/api/chats/{chat['id']}/generate", json={"action": "send", "content": "Any letters today?"})
    page.goto(f"{live.url}/chats/{chat['id']}")
    page.click("#context-button")
    dialog = page.locator("#context-dialog")
    expect(dialog.locator(".ctx-grid .cell").first).to_be_visible()
    legend = dialog.locator("#context-legend")
    expect(legend).to_contain_text("System")
    expect(legend).to_contain_text("Conversation")
    expect(legend).to_contain_text("Reserved for the reply")
    expect(legend).to_contain_text("Free")
    expect(dialog.locator("#context-cost")).to_contain_text("Estimated input cost per reply: $")
    expect(dialog.locator("#context-sizes tbody tr").first).to_contain_text("Character: Iris")
    shot("grid")
    with page.expect_download() as download_info:
        dialog.locator("#snapshot-text").click()
    download = download_info.value
    assert download.suggested_filename.endswith(".txt")
    text = open(download.path(), encoding="utf-8").read()
    assert "Sugo prompt snapshot" in text and "Any letters today?" in text
    dialog.get_by_role("link", name="Why does it forget?").click()
    expect(page.locator("h1")).to_have_text("Why does it forget?")


def test_refresh_command_and_undo(page: Page, live, models, shot):
    _connection(live, models)
    with live.client() as c:
        char = c.post("/api/characters", json={"name": "Bram", "first_mes": "Hm?"}).json()
        chat = c.post("/api/chats", json={"character_ids": [char["id"]]}).json()
        c.post(f"/api/chats/{chat['id']}/generate", json={"action": "send", "content": "Remember the anvil."})
    page.goto(f"{live.url}/chats/{chat['id']}")
    page.fill("#composer-input", "/refresh")
    page.click("#send-button")
    mark = page.locator(".refresh-mark")
    expect(mark).to_contain_text("the AI reads nothing above this line")
    page.click("#peek-button")
    dialog = page.locator("#peek-dialog")
    expect(dialog).to_contain_text("A refresh mark cuts the conversation")
    expect(dialog.locator(".prompt-blocks")).not_to_contain_text("Remember the anvil.")
    shot("refresh")
    dialog.get_by_role("button", name="Close Peek Prompt").click()
    mark.get_by_role("button", name="Undo refresh").click()
    expect(page.locator(".refresh-mark")).to_have_count(0)
    page.click("#peek-button")
    expect(page.locator("#peek-dialog .prompt-blocks")).to_contain_text("Remember the anvil.")
