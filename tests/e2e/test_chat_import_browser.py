"""Issue 21, item 18, in Chromium at desktop and phone sizes: a SillyTavern chat imported from the home page
is named after its file, and the chat it opens says what arrived ("Imported 160 messages (3 summaries, 2
lorebooks attached).") in view, before the notes about what was left out."""

import json

from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Page, expect

HEADER = {"user_name": "Rowan", "character_name": "Aria", "create_date": "2024-05-01@21h13m05s"}


def _file(tmp_path, n: int) -> str:
    meta = {
        "summaryEntries": [
            {
                "title": f"Part {k}",
                "content": f"What happened in part {k}.",
                "enabled": True,
                "rangeStartIndex": 10 * k,
                "rangeEndIndex": 10 * k + 9,
            }
            for k in range(3)
        ],
        "sugo": {"lorebooks": ["Coast", "Storms", "Nowhere"]},
    }
    lines = [{**HEADER, "chat_metadata": meta}] + [
        {
            "name": "Rowan" if i % 2 else "Aria",
            "is_user": bool(i % 2),
            "is_system": False,
            "send_date": "2024-05-01T21:13:05.000Z",
            "mes": f"Line {i}.",
            "extra": {},
        }
        for i in range(n)
    ]
    path = tmp_path / "Aria - 2024-05-01@21h13m05s.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return str(path)


def test_the_imported_chat_says_what_arrived_in_view(page: Page, live, tmp_path, shot):
    with live.client() as c:
        c.post("/api/characters", json={"name": "Aria", "first_mes": "Hello."})
        for name in ("Coast", "Storms"):
            c.post("/api/lorebooks", json={"name": name})
    page.goto(live.url + "/")
    page.locator(".import-box summary").click()
    page.set_input_files(".import-box input[type=file][name=file]", _file(tmp_path, 160))
    page.locator(".import-box").get_by_role("button", name="Import chat").click()
    page.wait_for_url(lambda url: "/chats/" in url)
    done = page.locator("#toasts .toast-ok")
    expect(done).to_have_text("Imported 160 messages (3 summaries, 2 lorebooks attached).×")
    expect(done).to_be_in_viewport()
    notes = page.locator("#toasts .toast-info")
    expect(notes).to_have_text(
        ["Lorebook “Nowhere” was not found; import it and attach it in Chat Settings.×"]
    )
    expect(notes).to_be_in_viewport()
    expect(page.locator("#chat-name")).to_have_text("Aria - 2024-05-01@21h13m05s")
    shot("imported")
    found = Axe().run(page, context="#toasts")
    assert found.violations_count == 0, found.generate_report()
    done.get_by_role("button", name="Dismiss").click()
    expect(done).to_have_count(0)
