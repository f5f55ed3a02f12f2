"""Issue 11 item 6: a chat exported as .jsonl and imported again through the pages keeps its
context note (text, depth, role), its lorebooks, its recent-message limit and the recall switch;
a lorebook the file names that does not exist is said, and the rest imports. Desktop size (no
layout is involved)."""

import json

import pytest
from playwright.sync_api import Page, expect


@pytest.mark.parametrize("screen", ["desktop"])
def test_exported_chat_imports_with_its_settings(page: Page, live, tmp_path, shot):
    with live.client() as c:
        char = c.post("/api/characters", json={"name": "Aria", "first_mes": "The harbour is quiet."}).json()
        chat = c.post("/api/chats", json={"character_ids": [char["id"]], "name": "Harbour"}).json()
        books = [c.post("/api/lorebooks", json={"name": n}).json() for n in ("Harbour lore", "Sea songs")]

    # Set everything through Chat Settings, as a user would.
    page.goto(f"{live.url}/chats/{chat['id']}/settings")
    form = page.locator("#chat-settings-form")
    form.locator("#context-note").fill("The fog never lifts.")
    form.locator("#context-note-depth").fill("2")
    form.locator("select[name=context_note_role]").select_option("user")
    form.locator("input[name=recent_message_limit]").fill("40")
    form.locator("#memory-recall").check()
    for b in books:
        form.locator(f"input[name=lorebook_ids][value='{b['id']}']").check()
    form.get_by_role("button", name="Save settings").click()
    expect(page.locator("#chat-settings-form .notice-ok, #toasts .toast")).not_to_have_count(0)

    with page.expect_download() as got:
        page.locator("#chat-settings-form").get_by_role("link", name="Export .jsonl").click()
    exported = tmp_path / "Harbour.jsonl"
    got.value.save_as(exported)
    meta = json.loads(exported.read_text().splitlines()[0])["chat_metadata"]
    assert meta["note_prompt"] == "The fog never lifts." and meta["world_info"] == "Harbour lore"

    with live.client() as c:  # a book the file names is gone by the time of the import
        assert c.delete(f"/api/lorebooks/{books[1]['id']}").status_code == 204

    page.goto(live.url + "/")
    page.locator(".import-box summary").click()
    page.set_input_files(".import-box input[type=file][name=file]", str(exported))
    page.locator(".import-box").get_by_role("button", name="Import chat").click()
    page.wait_for_url(lambda url: "/chats/" in url and f"/chats/{chat['id']}" not in url)
    notice = page.locator("#toasts .toast-info")
    expect(notice).to_have_text(
        "Lorebook “Sea songs” was not found; import it and attach it in Chat Settings.×"
    )
    shot("imported-notice")
    new_id = page.url.rstrip("/").split("/")[-1]

    page.goto(f"{live.url}/chats/{new_id}/settings")
    form = page.locator("#chat-settings-form")
    expect(form.locator("input[name=name]")).to_have_value("Harbour (2)")  # "Harbour" is taken: numbered
    expect(form.locator("#context-note")).to_have_value("The fog never lifts.")
    expect(form.locator("#context-note-depth")).to_have_value("2")
    expect(form.locator("select[name=context_note_role]")).to_have_value("user")
    expect(form.locator("input[name=recent_message_limit]")).to_have_value("40")
    expect(form.locator("#memory-recall")).to_be_checked()
    expect(form.locator(f"input[name=lorebook_ids][value='{books[0]['id']}']")).to_be_checked()
    shot("imported-settings")
