"""Who sees a message in a group chat, in the browser (issue 27, acceptance 5): hide a message from one
character and read the marker naming it; send a whisper from the message box; name a narrator in Chat
Settings. What the page sets is what the prompts obey. Desktop and phone."""

import json

from playwright.sync_api import Page, expect


def _group(page: Page, live, models) -> tuple[int, dict]:
    with live.client() as c:
        c.post("/api/connections", json={"name": "T", "base_url": models.base_url, "model": "test-model"})
        ids = {
            name: c.post("/api/characters", json={"name": name, "first_mes": ""}).json()["id"]
            for name in ("Aria", "Bram", "Cleo")
        }
        chat = c.post("/api/chats", json={"character_ids": list(ids.values())}).json()
        c.put(
            f"/api/chats/{chat['id']}/options",
            json={"settings": {**chat["settings"], "reply_order": "manual"}},
        )
        c.post(f"/api/chats/{chat['id']}/messages", json={"content": "The key is under the third lantern."})
    page.goto(f"{live.url}/chats/{chat['id']}")
    return chat["id"], ids


def _peek(live, chat_id: int, speaker_id: int) -> str:
    with live.client() as c:
        return json.dumps(
            c.get(f"/api/chats/{chat_id}/prompt", params={"speaker_id": speaker_id}).json()["messages"]
        )


def test_hide_a_message_from_one_character_and_see_the_marker(page: Page, live, models, shot):
    chat_id, ids = _group(page, live, models)
    msg = page.locator("article.msg").first
    msg.hover()
    msg.get_by_role("button", name="Who sees this message").click()
    form = msg.locator(".audience-form")
    expect(form).to_be_in_viewport()
    form.get_by_role("group", name="Hidden from").get_by_role("checkbox", name="Bram").check()
    shot("audience-form")
    form.get_by_role("button", name="Save who sees it").click()
    marker = page.locator("article.msg").first.locator(".badge-hidden")
    expect(marker).to_have_text("hidden from Bram")
    expect(marker).to_be_in_viewport()
    expect(page.locator(".audience-form")).to_have_count(0)
    shot("hidden-from-bram")
    assert "third lantern" not in _peek(live, chat_id, ids["Bram"])
    assert "third lantern" in _peek(live, chat_id, ids["Aria"])
    page.reload()
    expect(page.locator("article.msg").first.locator(".badge-hidden")).to_have_text("hidden from Bram")


def test_send_a_whisper_from_the_message_box(page: Page, live, models, shot):
    chat_id, ids = _group(page, live, models)
    models.script("Cleo nods, quietly.")
    page.click("#more-button")
    page.get_by_role("menuitem", name="Whisper…").click()
    bar = page.locator("#composer-whisper")
    expect(bar).to_be_visible()
    bar.locator("#whisper-select").select_option(label="Cleo")
    page.fill("#composer-input", "Meet me at the mill.")
    shot("whisper-bar")
    page.click("#send-button")
    whisper = page.locator("article.msg-user").last
    expect(whisper.locator(".badge-whisper")).to_have_text("whisper to Cleo")
    # Its recipient answers it; the bar is gone once it is sent.
    expect(page.locator("article.msg-assistant .msg-name")).to_have_text(["Cleo"])
    expect(bar).to_be_hidden()
    expect(page.locator("article.msg-assistant")).to_be_in_viewport()
    shot("whisper-sent")
    assert "the mill" not in _peek(live, chat_id, ids["Bram"])
    assert "the mill" in _peek(live, chat_id, ids["Cleo"])


def test_name_a_narrator_who_reads_the_whispers(page: Page, live, models, shot):
    chat_id, ids = _group(page, live, models)
    with live.client() as c:
        c.post(
            f"/api/chats/{chat_id}/messages",
            json={"content": "Only Aria hears this.", "whisper_to": ids["Aria"]},
        )
    page.click("#settings-button")
    group = page.locator("#settings-panel #group-turns")
    group.get_by_label("Narrator").select_option(label="Bram")
    page.locator("#settings-panel").get_by_role("button", name="Save settings").click()
    expect(page.locator("#settings-panel").get_by_text("Saved.")).to_be_in_viewport()
    with live.client() as c:
        assert c.get(f"/api/chats/{chat_id}").json()["narrator_id"] == ids["Bram"]
    assert "Only Aria hears this." in _peek(live, chat_id, ids["Bram"])
    assert "Only Aria hears this." not in _peek(live, chat_id, ids["Cleo"])


def test_peek_prompt_shows_the_prompt_as_each_member_sees_it(page: Page, live, models, shot):
    chat_id, ids = _group(page, live, models)
    with live.client() as c:
        first = c.get(f"/api/chats/{chat_id}/messages").json()[0]
        c.patch(f"/api/chats/{chat_id}/messages/{first['id']}", json={"hidden_for": [ids["Bram"]]})
    page.click("#peek-button")
    dialog = page.locator("#peek-dialog")
    blocks = dialog.locator(".prompt-blocks")
    expect(blocks).to_contain_text("third lantern")  # Aria, the first member, sees it
    dialog.get_by_label("As seen by").select_option(label="Bram")
    expect(blocks).not_to_contain_text("third lantern")
    expect(dialog).to_contain_text("1 hidden message left out")
    expect(dialog.locator("#peek-snapshot-json")).to_have_attribute(
        "href", f"/api/chats/{chat_id}/prompt/snapshot?format=json&speaker_id={ids['Bram']}"
    )
    shot("peek-as-bram")
    dialog.get_by_label("As seen by").select_option(label="Cleo")
    expect(blocks).to_contain_text("third lantern")


def test_give_one_member_its_own_new_start(page: Page, live, models, shot):
    chat_id, ids = _group(page, live, models)
    with live.client() as c:
        c.post(f"/api/chats/{chat_id}/messages", json={"content": "Bram walks in."})
    page.reload()
    msg = page.locator("article.msg").last
    msg.hover()
    msg.get_by_role("button", name="Who sees this message").click()
    form = msg.locator(".audience-form")
    form.locator(f"input[name='start_here'][value='{ids['Bram']}']").check()
    shot("new-start-form")
    form.get_by_role("button", name="Save who sees it").click()
    badge = page.locator("article.msg").last.locator(".badge-start")
    expect(badge).to_have_text("new start for Bram")
    expect(badge).to_be_in_viewport()
    shot("new-start")
    bram = _peek(live, chat_id, ids["Bram"])
    assert "Bram walks in." in bram and "third lantern" not in bram
    assert "third lantern" in _peek(live, chat_id, ids["Aria"])
    # Unchecked again, Bram reads from the beginning.
    msg = page.locator("article.msg").last
    msg.hover()
    msg.get_by_role("button", name="Who sees this message").click()
    box = msg.locator(f".audience-form input[name='start_here'][value='{ids['Bram']}']")
    expect(box).to_be_checked()
    box.uncheck()
    msg.locator(".audience-form").get_by_role("button", name="Save who sees it").click()
    expect(page.locator("article.msg").last.locator(".badge-start")).to_have_count(0)
    assert "third lantern" in _peek(live, chat_id, ids["Bram"])
