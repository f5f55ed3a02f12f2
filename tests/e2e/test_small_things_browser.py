"""Small things a new user trips over (issue 11 item 10), in a real browser, desktop and phone."""

import re

from playwright.sync_api import Page, expect
from sqlmodel import Session

from app.chats.service import new_message
from app.memory.recall.jobs import embed_chat


def _long_chat(live, messages: int = 120) -> int:
    with live.client() as c:
        char = c.post("/api/characters", json={"name": "Aria", "first_mes": "Hello."}).json()
        chat = c.post("/api/chats", json={"character_ids": [char["id"]], "mode": "conversation"}).json()
    with Session(live.engine) as s:
        for i in range(1, messages + 1):
            text = f"Message {i}: we keep walking along the coast road, past the salt flats and the fishing huts."
            s.add(
                new_message(
                    chat["id"],
                    "user" if i % 2 == 0 else "assistant",
                    "Rowan" if i % 2 == 0 else "Aria",
                    [text],
                )
            )
        s.commit()
    return chat["id"]


def test_a_long_chat_opens_at_its_end_without_scrolling_through_it(page: Page, live, shot):
    chat_id = _long_chat(live)
    page.goto(f"{live.url}/chats/{chat_id}")
    # Read at once, not waited for: a smooth scroll from the top would still be on its way.
    left, last_bottom, list_bottom = page.evaluate("""() => {
        const l = document.getElementById('message-list');
        const msgs = l.querySelectorAll('article.msg');
        return [l.scrollHeight - l.scrollTop - l.clientHeight,
                msgs[msgs.length - 1].getBoundingClientRect().bottom, l.getBoundingClientRect().bottom];
    }""")
    assert left < 2 and last_bottom <= list_bottom + 1, (left, last_bottom, list_bottom)
    expect(page.locator("article.msg").last).to_contain_text("Message 120")
    shot("opened")


def test_memory_cards_show_local_time_as_the_chat_does(page: Page, live, shot):
    chat_id = _long_chat(live)
    embed_chat(live.services, chat_id)
    page.goto(f"{live.url}/chats/{chat_id}")
    chat_time = page.locator("article.msg time").first.inner_text()
    assert chat_time.startswith("Today at")
    page.goto(f"{live.url}/chats/{chat_id}/memories")
    card = page.locator(".memory-card").first
    expect(card.locator("time").first).to_have_text(re.compile(r"^Today at \d"))
    expect(card).not_to_contain_text("UTC")
    shot("memory-times")


def test_the_lorebook_entry_search_box_gets_room(page: Page, live, shot):
    with live.client() as c:
        book = c.post("/api/lorebooks", json={"name": "Vellmar"}).json()
        c.post(
            f"/api/lorebooks/{book['id']}/entries",
            json={"title": "Harbour", "keys": ["harbour"], "content": "Boats."},
        )
    page.goto(f"{live.url}/lorebooks/{book['id']}")
    box = page.get_by_role("searchbox", name="Search entries")
    row = box.locator("xpath=..")
    width, room = box.bounding_box()["width"], row.bounding_box()["width"]
    # A row of its own on a phone (the buttons go under it); beside them on a desktop, still most of it.
    assert width >= (0.95 if page.viewport_size["width"] < 500 else 0.5) * room, (width, room)
    box.fill("harb")
    expect(page.locator(".lore-entry")).to_have_count(1)
    box.scroll_into_view_if_needed()
    shot("entry-search")


def test_the_forgetting_help_explains_memory_recall_and_lorebooks(page: Page, live, shot):
    page.goto(f"{live.url}/help/forgetting")
    recall = page.get_by_role("heading", name="Memory Recall: older messages brought back")
    expect(recall).to_be_visible()
    expect(page.locator("#memory-recall ~ ul").first).to_contain_text("Chat Settings → Memory Recall")
    lore = page.get_by_role("heading", name="Lorebooks: facts sent when they come up")
    lore.scroll_into_view_if_needed()
    expect(lore).to_be_visible()
    expect(page.locator("#lorebooks ~ ul").first).to_contain_text("Active Context")
    shot("help")


def test_download_names_carry_no_doubled_spaces(page: Page, live):
    # A chat's default name is "Aria – <date> <time>": the dash is dropped from the file name, and
    # the spaces it stood between must not be left doubled (fixed with downloads.safe_stem in issue 9).
    with live.client() as c:
        char = c.post("/api/characters", json={"name": "Aria  the   Bard", "first_mes": "Hello."}).json()
        chat = c.post("/api/chats", json={"character_ids": [char["id"]]}).json()
    assert " – " in chat["name"]
    page.goto(f"{live.url}/chats/{chat['id']}/settings")
    with page.expect_download() as got:
        page.locator("#chat-settings-form").get_by_role("link", name="Export .jsonl").click()
    name = got.value.suggested_filename
    assert name.startswith("Aria the Bard 20") and name.endswith(".jsonl") and "  " not in name, name
    page.goto(f"{live.url}/characters/{char['id']}")
    with page.expect_download() as got:
        page.get_by_role("link", name="JSON").click()
    assert (
        got.value.suggested_filename.startswith("Aria the Bard.") and "  " not in got.value.suggested_filename
    )


def test_a_control_swapped_in_answers_a_click_at_once(page: Page, live):
    """htmx wires up swapped-in content when it settles: a tap on a panel the server just swapped in,
    landing before that, did nothing (a Retry that ignored the click under load). Here the new button
    is clicked the moment it is in the page; its own request must go out."""
    with live.client() as c:
        char = c.post("/api/characters", json={"name": "Aria", "first_mes": "Hello."}).json()
        chat = c.post("/api/chats", json={"character_ids": [char["id"]], "name": "Road"}).json()
        assert (
            c.post(f"/api/chats/{chat['id']}/summaries", json={"content": "They met.", "last": 1}).status_code
            == 201
        )
    page.goto(f"{live.url}/chats/{chat['id']}/settings")
    toggles: list[str] = []
    page.on("request", lambda r: toggles.append(r.url) if "/summaries?inactive=" in r.url else None)
    page.evaluate("""() => {
        const list = document.getElementById('chat-summary');
        const seen = new MutationObserver(() => {
            const fresh = document.querySelector('#summary-toggle-inactive[data-fresh]');
            if (fresh) { seen.disconnect(); fresh.click(); }
        });
        // The next panel's button is marked fresh by the response below; clicked in the same turn.
        seen.observe(list, {childList: true, subtree: true});
        const mark = (e) => {  // the settings page swaps other parts in too: only the panel's answer
            if (!e.detail.serverResponse.includes('id="summary-toggle-inactive"')) return;
            document.body.removeEventListener('htmx:beforeSwap', mark);
            e.detail.serverResponse = e.detail.serverResponse.replace(
                'id="summary-toggle-inactive"', 'id="summary-toggle-inactive" data-fresh');
        };
        document.body.addEventListener('htmx:beforeSwap', mark);
    }""")
    before = page.locator("#summary-toggle-inactive").inner_text()
    page.locator("#summary-toggle-inactive").click()
    for _ in range(50):  # the second request, if it goes out at all, follows the first at once
        if len(toggles) == 2:
            break
        page.wait_for_timeout(100)
    assert len(toggles) == 2, toggles
    # Two toggles: the panel is back as it was, and its button works.
    expect(page.locator("#summary-toggle-inactive:not([data-fresh])")).to_have_text(before)
