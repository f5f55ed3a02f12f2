"""HTMX answers with fragments, over real HTTP: an action returns the block that changed plus
out-of-band updates for what else changed, never the whole page (no `<html`), and is much smaller
than the page; a plain request still gets the page."""

import re
import time

from app.memory.recall.jobs import embed_chat
from tests.conftest import add_character, add_connection, new_chat
from tests.integration.test_memory_recall import _chunks, _fill

HX = {"HX-Request": "true"}


def _fragment(r, status=200) -> str:
    assert r.status_code == status, r.text[:500]
    assert "<html" not in r.text and "<body" not in r.text, r.text[:500]
    assert r.headers["vary"] == "HX-Request"
    return r.text


def _oob_ids(html: str) -> set[str]:
    return set(re.findall(r'<\w+[^>]*\sid="([^"]+)"[^>]*\shx-swap-oob="true"', html))


def _book(api, entries=30) -> tuple[int, list[dict]]:
    book = api.post("/api/lorebooks", json={"name": "Vellmar"}).json()
    for i in range(entries):
        r = api.post(
            f"/api/lorebooks/{book['id']}/entries",
            json={
                "title": f"Place {i}",
                "keys": [f"place{i}", "harbour" if i % 3 == 0 else "hills"],
                "content": f"Place {i} lies by the water; its people fish and trade salt. " * 6,
            },
        )
        assert r.status_code == 201, r.text
    return book["id"], api.get(f"/api/lorebooks/{book['id']}").json()["entries"]


class TestToggleLoreEntry:
    def test_answers_that_entrys_row_and_the_count_of_entries_off(self, api):
        book_id, entries = _book(api)
        for name in ("Aria", "Bram", "Cora"):
            add_character(api, name)
        page = api.get(f"/lorebooks/{book_id}")
        assert "<html" in page.text and page.headers["vary"] == "HX-Request"
        target = entries[4]

        html = _fragment(api.post(f"/lorebooks/{book_id}/entries/{target['id']}/toggle", headers=HX))
        assert html.count('class="card lore-entry') == 1 and f'id="entry-{target["id"]}"' in html
        assert "is-off" in html and ">Enable</button>" in html
        assert _oob_ids(html) == {"entry-count", "book-message"}
        assert "30 · 1 off" in html
        assert len(html.encode()) < len(page.content) / 4, (len(html.encode()), len(page.content))
        assert api.get(f"/api/lorebooks/{book_id}").json()["entries"][4]["enabled"] is False

        back = _fragment(api.post(f"/lorebooks/{book_id}/entries/{target['id']}/toggle", headers=HX))
        assert (
            "is-off" not in back
            and ">Disable</button>" in back
            and " off" not in back.split('id="entry-count"')[1]
        )

    def test_without_htmx_answers_the_whole_page(self, api):
        book_id, entries = _book(api, entries=2)
        r = api.post(f"/lorebooks/{book_id}/entries/{entries[0]['id']}/toggle")
        assert r.status_code == 200 and "<html" in r.text and "1 off" in r.text


class TestLorebookActions:
    def test_search_answers_the_list_with_the_count_and_bulk_labels(self, api):
        book_id, _ = _book(api, entries=9)
        html = _fragment(api.get(f"/lorebooks/{book_id}", params={"q": "place3"}, headers=HX))
        assert html.count('class="card lore-entry') == 1 and 'id="entry-list"' in html
        assert _oob_ids(html) == {"entry-count", "bulk-enable"}
        assert "matching “place3”" in html and "Enable these" in html

    def test_bulk_disable_answers_the_list_count_and_message(self, api):
        book_id, _ = _book(api, entries=9)
        html = _fragment(
            api.post(
                f"/lorebooks/{book_id}/entries/enable", data={"q": "harbour", "enabled": "false"}, headers=HX
            )
        )
        assert html.count("lore-entry is-off") == 3
        assert _oob_ids(html) == {"entry-count", "book-message"} and "Disabled 3 entries." in html

    def test_delete_answers_only_out_of_band_updates_and_the_emptied_list_says_so(self, api):
        book_id, entries = _book(api, entries=2)
        html = _fragment(
            api.post(f"/lorebooks/{book_id}/entries/{entries[0]['id']}/delete", data={"q": ""}, headers=HX)
        )
        assert "lore-entry" not in html and _oob_ids(html) == {"entry-count", "book-message"}
        assert "Entry deleted." in html and "HX-Retarget" not in html
        last = api.post(f"/lorebooks/{book_id}/entries/{entries[1]['id']}/delete", data={"q": ""}, headers=HX)
        assert last.headers["hx-retarget"] == "#entry-list"
        assert "No entries yet" in _fragment(last)

    def test_overview_attachments_and_keyword_test_answer_their_blocks(self, api):
        book_id, _ = _book(api, entries=3)
        chat = new_chat(api, [add_character(api)["id"]])
        saved = _fragment(
            api.post(
                f"/lorebooks/{book_id}",
                headers=HX,
                data={
                    "name": "Vellmar Isles",
                    "token_budget": "",
                    "entry_limit": "50",
                    "max_depth": "",
                    "scan_depth": "",
                    "enabled": "true",
                },
            )
        )
        assert 'id="overview" open' in saved and _oob_ids(saved) == {"book-title", "book-message"}
        assert "Vellmar Isles" in saved.split('id="book-title"')[1]
        book = api.get(f"/api/lorebooks/{book_id}").json()
        # Blank numbers take BookIn's defaults, not numbers written again in the route.
        assert (book["entry_limit"], book["token_budget"], book["max_depth"], book["scan_depth"]) == (
            50,
            2048,
            3,
            2,
        )

        links = _fragment(
            api.post(f"/lorebooks/{book_id}/links", data={"link": f"chat:{chat['id']}"}, headers=HX)
        )
        assert 'id="attachments" open' in links and "1 place" in links and _oob_ids(links) == {"book-message"}

        test = _fragment(
            api.post(f"/lorebooks/{book_id}/test", data={"text": "Off to place1 we go"}, headers=HX)
        )
        assert test.lstrip().startswith('<div id="keyword-test-result"') and "Place 1" in test

    def test_creating_a_book_answers_its_page_content_and_pushes_its_url(self, api):
        r = api.post("/lorebooks", data={"name": "Fresh"}, headers=HX)
        html = _fragment(r)
        book_id = api.get("/api/lorebooks").json()[0]["id"]
        assert r.headers["hx-push-url"] == f"/lorebooks/{book_id}"
        assert html.startswith("<title>Fresh – Lorebooks – Sugo</title>") and 'id="entry-list"' in html


class TestEntryForm:
    def test_blank_numbers_take_the_models_defaults(self, api):
        book_id, _ = _book(api, entries=0)
        r = api.post(
            f"/lorebooks/{book_id}/entries",
            headers=HX,
            data={
                "title": "Tobiah",
                "keys": "Tobiah",
                "content": "Keeps the lighthouse.",
                "enabled": "true",
                "order": "",
                "depth": "",
                "probability": "",
                "sticky": "",
                "group_weight": "",
                "position": "",
                "role": "",
            },
        )
        assert "Entry added." in _fragment(r)
        entry = api.get(f"/api/lorebooks/{book_id}").json()["entries"][0]
        assert (
            entry["order"],
            entry["depth"],
            entry["probability"],
            entry["sticky"],
            entry["group_weight"],
            entry["position"],
            entry["role"],
        ) == (100, 4, 100, 0, 100, "before_char", "system")


class TestMemoryProgressPoll:
    def test_the_poll_answers_the_status_block_while_a_rebuild_runs_and_the_list_when_done(
        self, api, sugo, models
    ):
        char = add_character(api)
        chat = new_chat(api, [char["id"]])
        _fill(sugo, chat["id"], char["id"], n=260)
        embed_chat(sugo.services, chat["id"])
        count = len(_chunks(sugo, chat["id"]))
        conn = add_connection(api, models, embedding_model="test-embedding")
        api.put(f"/api/chats/{chat['id']}/options", json={"connection_id": conn["id"]})
        base = f"/chats/{chat['id']}/memories"
        page = api.get(base)
        assert "<html" in page.text
        models.embedding_delay_s = 0.4
        try:
            started = _fragment(api.post(f"{base}/rebuild", headers=HX))
            assert (
                started.lstrip().startswith('<div id="memory-status"') and 'id="rebuild-progress"' in started
            )
            poll = _fragment(api.get(f"{base}/status", headers=HX))
            assert (
                f"/ {count}" in poll and 'hx-trigger="load delay:1s"' in poll and 'hx-target="this"' in poll
            )
            assert "memory-card" not in poll and not _oob_ids(poll)
            assert len(poll.encode()) < len(page.content) / 4, (len(poll.encode()), len(page.content))
            stopped = _fragment(api.post(f"{base}/rebuild/stop", headers=HX))
            assert 'id="memory-status"' in stopped
            deadline = time.monotonic() + 30
            while 'id="rebuild-progress"' in (poll := _fragment(api.get(f"{base}/status", headers=HX))):
                assert time.monotonic() < deadline
                time.sleep(0.1)
        finally:
            models.embedding_delay_s = 0.0
        # Done: no poller any more, the result, and the list (new badges) out of band.
        assert "hx-trigger" not in poll.split(">", 1)[0] and "Rebuild stopped after" in poll
        assert _oob_ids(poll) == {"memory-list"} and poll.count("memory-card") == count

    def test_forget_clear_and_import_answer_fragments(self, api, sugo):
        char = add_character(api)
        chat = new_chat(api, [char["id"]])
        _fill(sugo, chat["id"], char["id"])
        embed_chat(sugo.services, chat["id"])
        chunks = _chunks(sugo, chat["id"])
        base = f"/chats/{chat['id']}/memories"
        forgot = _fragment(api.post(f"{base}/{chunks[0].id}/forget", headers=HX))
        assert _oob_ids(forgot) == {"memory-status"} and f'id="memory-count">{len(chunks) - 1}<' in forgot
        exported = api.get(f"/api/chats/{chat['id']}/memories/export").content
        cleared = _fragment(api.post(f"{base}/clear", headers=HX))
        assert (
            cleared.lstrip().startswith('<div class="stack" id="memory-list"')
            and "No memories yet" in cleared
        )
        assert (
            _oob_ids(cleared) == {"memory-status", "memory-message"}
            and "The messages are untouched" in cleared
        )
        imported = _fragment(
            api.post(f"{base}/import", files={"file": ("m.marinara.json", exported)}, headers=HX)
        )
        assert imported.count("memory-card") == len(chunks) - 1 and f"Imported {len(chunks) - 1}" in imported


class TestHomeSearch:
    def test_answers_the_chat_list_alone(self, api):
        char = add_character(api)
        for i in range(12):
            new_chat(api, [char["id"]], name=f"Harbour talk {i}")
        new_chat(api, [char["id"]], name="Lighthouse")
        page = api.get("/")
        html = _fragment(api.get("/", params={"q": "light"}, headers=HX))
        assert html.lstrip().startswith('<div id="chat-list"') and html.count('class="chat-row"') == 1
        assert "Lighthouse" in html and "Import a SillyTavern chat" not in html
        assert len(html.encode()) < len(page.content) / 4, (len(html.encode()), len(page.content))
        assert "No chat matches" in _fragment(api.get("/", params={"q": "nothing-like-it"}, headers=HX))


class TestChatMessages:
    def test_deleting_the_last_message_re_renders_the_one_now_last_out_of_band(self, api, models):
        add_connection(api, models)
        char = add_character(api)
        chat = new_chat(api, [char["id"]])
        for text in ("Hello", "Again"):
            assert (
                api.post(
                    f"/api/chats/{chat['id']}/generate", json={"action": "send", "content": text}
                ).status_code
                == 200
            )
        messages = api.get(f"/api/chats/{chat['id']}/messages").json()
        messages = messages["messages"] if isinstance(messages, dict) else messages
        first_reply, user, last = messages[-3], messages[-2], messages[-1]
        assert (
            api.post(f"/chats/{chat['id']}/messages/{user['id']}/delete", headers=HX).text == ""
        )  # not last: nothing else changes
        html = _fragment(api.post(f"/chats/{chat['id']}/messages/{last['id']}/delete", headers=HX))
        assert _oob_ids(html) == {f"msg-{first_reply['id']}"}
        assert (
            "data-last" in html and 'data-action="regenerate"' in html and "Generate another version" in html
        )

        after = _fragment(
            api.get(f"/chats/{chat['id']}/messages", params={"after": messages[0]["id"]}, headers=HX)
        )
        assert _oob_ids(after) == {f"msg-{messages[0]['id']}"} and 'hx-swap-oob="delete"' not in after
