"""A group chat's turn-taking in the browser (issue 27): one send brings each member's reply, streamed
one after the other into the page, once each; Chat Settings sets the order and mutes a member, and a
muted member answers when picked under the message box. Desktop and phone."""

import threading

from playwright.sync_api import Page, expect

from tests.support.model_server import Reply


def _group(page: Page, live, models, **settings) -> tuple[int, dict]:
    with live.client() as c:
        c.post("/api/connections", json={"name": "T", "base_url": models.base_url, "model": "test-model"})
        ids = {
            name: c.post("/api/characters", json={"name": name, "first_mes": ""}).json()["id"]
            for name in ("Aria", "Bram", "Cleo")
        }
        chat = c.post("/api/chats", json={"character_ids": list(ids.values())}).json()
        if settings:
            c.put(f"/api/chats/{chat['id']}/options", json={"settings": {**chat["settings"], **settings}})
    page.goto(f"{live.url}/chats/{chat['id']}")
    return chat["id"], ids


def test_one_send_streams_each_members_reply_in_turn(page: Page, live, models, shot):
    chat_id, _ = _group(page, live, models, reply_order="list")
    models.script(
        Reply(text="Aria tunes her lute and hums.", chunk_size=4, delay_s=0.02),
        Reply(text="Bram grunts from the forge.", chunk_size=4, delay_s=0.02),
        Reply(text="Cleo laughs at them both.", chunk_size=4, delay_s=0.02),
    )
    page.fill("#composer-input", "Evening, everyone.")
    page.click("#send-button")
    replies = page.locator("article.msg-assistant")
    expect(replies).to_have_count(3)
    expect(page.locator("#send-button")).to_be_visible()  # the whole turn has ended
    expect(replies.locator(".msg-name")).to_have_text(["Aria", "Bram", "Cleo"])
    expect(replies.locator(".msg-text")).to_have_text(
        ["Aria tunes her lute and hums.", "Bram grunts from the forge.", "Cleo laughs at them both."]
    )
    expect(page.locator("article.msg")).to_have_count(4)  # the user's message once, no reply twice
    expect(replies.last).to_be_in_viewport()
    shot("three-replies")
    # What the page shows is what is stored.
    page.reload()
    expect(page.locator("article.msg-assistant .msg-name")).to_have_text(["Aria", "Bram", "Cleo"])


def test_chat_settings_set_the_order_and_mute_a_member_who_answers_when_picked(
    page: Page, live, models, shot
):
    chat_id, ids = _group(page, live, models)
    page.click("#settings-button")
    panel = page.locator("#settings-panel")
    group = panel.locator("#group-turns")
    expect(group).to_be_visible()
    group.get_by_label("Order").select_option("list")
    group.locator(".member-row", has_text="Bram").get_by_label("Muted").check()
    group.scroll_into_view_if_needed()
    shot("group-settings")
    panel.get_by_role("button", name="Save settings").click()
    saved = panel.get_by_text("Saved.")
    expect(saved).to_be_in_viewport()
    with live.client() as c:
        chat = c.get(f"/api/chats/{chat_id}").json()
    assert chat["settings"]["reply_order"] == "list"
    assert [(m["name"], m["muted"]) for m in chat["members"]] == [
        ("Aria", False),
        ("Bram", True),
        ("Cleo", False),
    ]
    expect(panel.locator("#group-turns .member-row", has_text="Bram").get_by_label("Muted")).to_be_checked()
    panel.get_by_role("button", name="Close Chat Settings").click()

    models.script("Aria answers.", "Cleo answers.")
    page.fill("#composer-input", "Who is here?")
    page.click("#send-button")
    expect(page.locator("article.msg-assistant .msg-name")).to_have_text(["Aria", "Cleo"])
    expect(page.locator("#send-button")).to_be_visible()

    # Picked under the message box, the muted member answers alone.
    models.script("Bram, asked, answers.")
    page.select_option("#speaker-select", label="Bram")
    page.fill("#composer-input", "Bram?")
    page.click("#send-button")
    expect(page.locator("article.msg-assistant").last.locator(".msg-name")).to_have_text("Bram")
    expect(page.locator("article.msg-assistant")).to_have_count(3)


def test_auto_mode_takes_turns_while_idle_and_stop_pauses_it(page: Page, live, models, shot):
    _group(page, live, models, reply_order="pooled", auto_mode_seconds=5)
    auto = page.locator("#auto-mode")
    expect(auto).to_have_text("Auto · every 5 s")
    models.script("Aria breaks the silence.")
    # Nobody typed: after five idle seconds the group goes on by itself.
    expect(page.locator("article.msg-assistant")).to_have_count(1, timeout=20_000)
    held = threading.Event()
    models.script(Reply(text="word " * 100, chunk_size=5, delay_s=0.02, hold=held))
    expect(page.locator("#stop-button")).to_be_visible(timeout=20_000)
    page.click("#stop-button")
    held.set()
    expect(auto).to_have_text("Auto paused · click to go on")
    expect(auto).to_have_attribute("aria-pressed", "false")
    expect(auto).to_be_in_viewport()
    shot("auto-paused")
    expect(page.locator("#send-button")).to_be_visible()
    # The stopped turn's message stays, marked; no third turn starts while paused.
    expect(page.locator("article.msg-assistant")).to_have_count(2)
    expect(page.locator("article.msg-assistant").last.locator(".msg-error")).to_contain_text("Stopped")
    auto.click()
    expect(auto).to_have_attribute("aria-pressed", "true")


def test_a_merged_reply_shows_each_speaker_as_a_coloured_name(page: Page, live, models, shot):
    _group(page, live, models, group_merged=True)
    models.script(
        '<speaker="Aria">*tunes her lute*\n\n<speaker="Bram">"Not that song again."\n\n<speaker="Cleo">Laughs.'
    )
    page.fill("#composer-input", "Play something!")
    page.click("#send-button")
    reply = page.locator("article.msg-assistant")
    expect(reply).to_have_count(1)
    expect(reply.locator(".msg-name")).to_have_text("The group")
    marks = reply.locator(".msg-text .speaker-mark")
    expect(marks).to_have_text(["Aria", "Bram", "Cleo"])
    expect(reply.locator(".msg-text")).not_to_contain_text("<speaker")
    colours = marks.evaluate_all("els => els.map(e => getComputedStyle(e).color)")
    assert len(set(colours)) == 3, colours  # one colour per name
    expect(reply).to_be_in_viewport()
    shot("merged")
