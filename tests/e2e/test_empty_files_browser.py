"""Issue 11 item 4: an empty file (0 bytes) chosen for the lorebook or the memory import is named
as empty, not answered with "Choose a … file", and nothing is created. Desktop and phone."""

from playwright.sync_api import Page, expect


def test_an_empty_file_is_called_empty_in_the_lorebook_and_memory_imports(page: Page, live, tmp_path, shot):
    empty = tmp_path / "Eldoria.json"
    empty.write_bytes(b"")
    with live.client() as c:
        char = c.post("/api/characters", json={"name": "Aria", "first_mes": "The harbour is quiet."}).json()
        chat = c.post("/api/chats", json={"character_ids": [char["id"]]}).json()

    page.goto(live.url + "/lorebooks")
    page.set_input_files("input[type=file][name=file]", str(empty))
    page.get_by_role("button", name="Import", exact=True).click()
    toast = page.locator("#toasts .toast-error")
    expect(toast).to_contain_text("“Eldoria.json” is empty (0 bytes)")
    expect(toast).not_to_contain_text("Choose a lorebook file")
    expect(page.get_by_text("No lorebooks yet")).to_be_visible()
    shot("lorebook-import-empty")

    empty_memories = tmp_path / "memories.marinara.json"
    empty_memories.write_bytes(b"")
    page.goto(f"{live.url}/chats/{chat['id']}/memories")
    page.set_input_files("input[type=file][name=file]", str(empty_memories))
    page.get_by_role("button", name="Import", exact=True).click()
    expect(page.locator("#toasts .toast-error").last).to_contain_text(
        "“memories.marinara.json” is empty (0 bytes)"
    )
    expect(page.locator(".memory-card")).to_have_count(0)
    with live.client() as c:
        assert c.get("/api/lorebooks").json() == []
