"""Importing a SillyTavern group from the chat list (issue 27), desktop and phone: the group file and
its chat open as a group chat whose members answer by their own names, and the page says what arrived
in view."""

import json

from playwright.sync_api import Page, expect

GROUP = {
    "id": "1735812000000",
    "name": "Tavern night",
    "members": ["Kaito.png", "Mira.png"],
    "disabled_members": [],
    "activation_strategy": 1,
    "generation_mode": 2,
    "chat_id": "2025-01-02@10h00m00s",
    "chats": ["2025-01-02@10h00m00s"],
}
LINES = [
    {"chat_metadata": {}, "user_name": "unused", "character_name": "unused"},
    {
        "name": "Rowan",
        "is_user": True,
        "is_system": False,
        "send_date": "2025-01-02T10:00:00.000Z",
        "mes": "Evening.",
        "extra": {},
    },
    {
        "name": "Kaito",
        "is_user": False,
        "is_system": False,
        "send_date": "2025-01-02T10:00:01.000Z",
        "mes": "Another round!",
        "original_avatar": "Kaito.png",
        "extra": {"gen_id": 1},
    },
    {
        "name": "Mira",
        "is_user": False,
        "is_system": False,
        "send_date": "2025-01-02T10:00:02.000Z",
        "mes": "Only one.",
        "original_avatar": "Mira.png",
        "extra": {"gen_id": 1},
    },
]


def _chosen(page: Page, live, tmp_path):
    """The chat list's group import, opened, with the group file and its chat chosen."""
    group_file = tmp_path / "1735812000000.json"
    group_file.write_text(json.dumps(GROUP))
    chat_file = tmp_path / "2025-01-02@10h00m00s.jsonl"
    chat_file.write_text("\n".join(json.dumps(x) for x in LINES) + "\n")
    page.goto(live.url + "/")
    box = page.locator("#group-import")
    box.locator("summary").click()
    box.locator("input[name=group]").set_input_files(str(group_file))
    box.locator("input[name=chats]").set_input_files(str(chat_file))
    return box


def test_import_a_group_and_its_chat_from_the_chat_list(page: Page, live, tmp_path, shot):
    with live.client() as c:
        for name in ("Kaito", "Mira"):
            c.post("/api/characters", json={"name": name})
    box = _chosen(page, live, tmp_path)
    shot("form")
    box.get_by_role("button", name="Import group").click()
    page.wait_for_url(lambda url: "/chats/" in url)
    done = page.locator("#toasts .toast-ok")
    expect(done).to_have_text("Imported 3 messages.×")
    expect(done).to_be_in_viewport()
    expect(page.locator("article.msg-assistant .msg-name")).to_have_text(["Kaito", "Mira"])
    expect(page.locator(".chat-head, header").first).to_contain_text("Tavern night")
    shot("imported")


def test_a_group_whose_members_are_missing_says_which(page: Page, live, tmp_path):
    box = _chosen(page, live, tmp_path)
    box.get_by_role("button", name="Import group").click()
    error = page.locator("#toasts .toast-error")
    expect(error).to_contain_text("Kaito.png, Mira.png are not in Sugo yet")
    expect(error).to_be_in_viewport()
