"""The memory viewer in a real browser, desktop and phone."""

import re
import threading

from playwright.sync_api import Page, expect
from sqlmodel import Session

from app.chats.service import new_message
from app.memory.recall.jobs import embed_chat
from tests.support.sight import expect_in_sight

FACT = "My sister Elowen hid the brass key inside the old clock tower."


class _Turnstile:
    """An embedding gate (the model server's `embedding_gate`) that lets calls through one by one as the
    test allows them, or all of them once set."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._passes = 0
        self._open = False

    def allow(self, calls: int) -> None:
        with self._changed:
            self._passes += calls
            self._changed.notify_all()

    def set(self) -> None:
        with self._changed:
            self._open = True
            self._changed.notify_all()

    def wait(self, timeout: float | None = None) -> bool:
        with self._changed:
            if not self._changed.wait_for(lambda: self._open or self._passes > 0, timeout):
                return False
            if not self._open:
                self._passes -= 1
            return True


def _fill_and_embed(live, chat_id: int, messages: int) -> None:
    """A long chat with the fact at message 20, chunked and embedded as the background job would."""
    with Session(live.engine) as s:
        for i in range(1, messages + 1):
            text = FACT if i == 20 else f"We keep walking along the coast road, day {i}."
            s.add(
                new_message(
                    chat_id, "user" if i % 2 == 0 else "assistant", "Rowan" if i % 2 == 0 else "Aria", [text]
                )
            )
        s.commit()
    embed_chat(live.services, chat_id)


def test_memory_viewer_lists_searches_forgets_exports_and_clears(page: Page, live, shot):
    with live.client() as c:
        char = c.post("/api/characters", json={"name": "Aria", "first_mes": "Hello."}).json()
        chat = c.post("/api/chats", json={"character_ids": [char["id"]], "mode": "conversation"}).json()
    _fill_and_embed(live, chat["id"], 120)
    page.on("dialog", lambda d: d.accept())

    page.goto(f"{live.url}/chats/{chat['id']}")
    page.click("#settings-button")
    expect(page.locator("#memory-recall")).to_be_checked()  # on by default in a Conversation chat
    page.locator("#memories-link").click()
    count = int(page.locator("#memory-count").inner_text())
    assert count > 5
    expect(page.locator(".memory-card").first).to_contain_text("Vectorized")
    page.fill("input[name=q]", "Where is the brass key?")
    expect(page.locator("#memory-results .memory-hit").first).to_contain_text("Elowen")
    shot("viewer")

    page.locator(".memory-card").first.get_by_role("button", name="Forget memory").click()
    expect(page.locator(".memory-card")).to_have_count(count - 1)
    expect(page.locator("#memory-count")).to_have_text(str(count - 1))  # the status block, out of band
    with page.expect_download() as download:
        page.get_by_role("link", name="Export").click()
    assert download.value.suggested_filename.endswith(".marinara.json")
    # Clear all says it will not last while the messages make memories, and offers the pause.
    expect(page.locator("#memory-chunking")).to_contain_text(
        "after the next reply, memories are made from the messages again"
    )
    page.get_by_role("button", name="Clear all").click()
    expect(page.locator("#memory-view .notice-ok")).to_contain_text("The messages are untouched")
    expect(page.locator("#memory-view .notice-ok")).to_contain_text(
        "made from them again after the next reply"
    )
    expect(page.locator(".memory-card")).to_have_count(0)
    shot("cleared")
    # The file exported from this chat links back to its messages: no "imported" copy beside them.
    page.set_input_files("input[type=file][name=file]", download.value.path())
    page.get_by_role("button", name="Import", exact=True).click()
    expect(page.locator("#memory-view .notice-ok")).to_contain_text(
        f"Imported {count - 1} ({count - 1} matching this chat's messages)"
    )
    expect(page.locator(".memory-card")).to_have_count(count - 1)
    expect(page.locator(".memory-card .badge", has_text="imported")).to_have_count(0)

    page.get_by_role("button", name="Pause making memories").click()
    expect(page.locator("#memory-chunking")).to_contain_text("Making memories is paused")
    page.get_by_role("button", name="Clear all").click()
    expect(page.locator(".memory-card")).to_have_count(0)
    expect(page.locator("#memory-list")).to_contain_text("Making memories is paused for this chat")
    expect(page.locator("#memory-view .notice-ok")).not_to_contain_text("made from them again")
    shot("paused")
    page.goto(f"{live.url}/chats/{chat['id']}")
    page.click("#settings-button")
    expect(page.locator("#memory-chunking-paused")).to_be_checked()  # the same switch in Chat Settings
    page.goto(f"{live.url}/chats/{chat['id']}/memories")
    page.get_by_role("button", name="Resume making memories").click()
    expect(page.get_by_role("button", name="Pause making memories")).to_be_visible()


def test_switching_the_embedding_model_then_rebuild_shows_progress_and_stops(page: Page, live, models, shot):
    with live.client() as c:
        plain = c.post(
            "/api/connections",
            json={"name": "Chat model", "base_url": models.base_url, "model": "test-model"},
        ).json()
        embeds = c.post(
            "/api/connections",
            json={
                "name": "Embedder",
                "base_url": models.base_url,
                "model": "test-model",
                "embedding_model": "test-embedding",
            },
        ).json()
        char = c.post("/api/characters", json={"name": "Aria", "first_mes": "Hello."}).json()
        chat = c.post(
            "/api/chats",
            json={"character_ids": [char["id"]], "mode": "conversation", "connection_id": plain["id"]},
        ).json()
    # Enough memories for five rebuild batches: Stop, pressed once the first batch shows, must land
    # before the last batch has started (with three, the poll could show the first as the last began).
    _fill_and_embed(live, chat["id"], 480)
    page.on("dialog", lambda d: d.accept())

    # Chat Settings → Memory Recall: pick the multilingual built-in model for this chat.
    page.goto(f"{live.url}/chats/{chat['id']}")
    page.click("#settings-button")
    expect(page.locator("#builtin-embedding")).to_contain_text("Automatic: all-MiniLM-L6-v2")
    page.select_option("#builtin-embedding", "multilingual-e5-small")
    page.locator("#chat-settings-form button[type=submit]").click()
    # The saved panel comes back with "Saved." (the select held the new value before the save).
    expect(page.locator("#chat-settings-form").get_by_text("Saved.")).to_be_visible()
    expect(page.locator("#builtin-embedding")).to_have_value("multilingual-e5-small")
    page.goto(f"{live.url}/chats/{chat['id']}/memories")
    count = int(page.locator("#memory-count").inner_text())
    expect(page.locator("#space-mismatch")).to_contain_text(
        f"{count} memories were embedded with another model"
    )
    expect(page.locator(".memory-card").first).to_contain_text("Other model")
    expect(page.locator("#embedding-source")).to_contain_text("multilingual-e5-small")
    shot("other-model")

    # Back to Automatic, on a connection with a (slow) embedding model: Rebuild, watch, Stop.
    with live.client() as c:
        c.put(
            f"/api/chats/{chat['id']}/options",
            json={"connection_id": embeds["id"], "settings": {"builtin_embedding": None}},
        )
    polls: list[str] = []
    page.on("response", lambda r: polls.append(r.text()) if "/memories/status" in r.url else None)
    # The rebuild's embedding calls pass one at a time as the test lets them: the first batch, then none
    # until Stop has landed (a rebuild left to run could end before the click, and Stop would find none).
    calls = _Turnstile()
    try:
        page.reload()
        page.evaluate("window.sugoMarker = 'still here'")
        expect(page.locator("#embedding-source")).to_contain_text("test-embedding")
        models.embedding_gate = calls
        page.get_by_role("button", name="Rebuild all").click()
        expect(page.locator("#rebuild-progress")).to_contain_text(f"/ {count}")
        expect_in_sight(page, "#rebuild-progress")  # issue 21: the status by the button pressed
        expect(page.get_by_role("button", name="Rebuild all")).to_be_disabled()
        shot("rebuilding")
        calls.allow(1)
        # A locator, not wait_for_function: that evaluates its string with eval, which the pages' policy forbids.
        expect(page.locator("#rebuild-progress progress")).not_to_have_attribute("value", "0")
        with page.expect_response(lambda r: r.url.endswith("/memories/rebuild/stop")) as stopped:
            page.locator("#rebuild-progress").get_by_role("button", name="Stop").click()
        assert stopped.value.ok, stopped.value.text()
        calls.set()
        expect(page.locator("#rebuild-result")).to_contain_text("Rebuild stopped after", timeout=15000)
        expect_in_sight(page, "#rebuild-result")
    finally:
        calls.set()
        models.embedding_gate = None
    expect(page.locator("#space-mismatch")).to_be_visible()
    # The last poll brought the list along: what the rebuild reached has the current model's vectors.
    expect(page.locator(".memory-card").first).to_contain_text("Vectorized")
    expect(page.locator(".memory-card").last).to_contain_text("Other model")
    expect(page.get_by_role("button", name="Rebuild all")).to_be_enabled()
    shot("stopped")

    # Rebuild again, to the end: the poller goes, every memory matches the model.
    page.get_by_role("button", name="Rebuild all").click()
    expect(page.locator("#rebuild-result")).to_contain_text(
        f"Rebuilt {count} memories with test-embedding", timeout=30000
    )
    expect(page.locator("#space-mismatch")).to_have_count(0)
    expect(page.locator(".memory-card", has_text="Other model")).to_have_count(0)
    expect(page.locator("#memory-status")).not_to_have_attribute("hx-get", re.compile("."))
    assert page.evaluate("window.sugoMarker") == "still here"
    assert polls and not [p for p in polls if "<html" in p]
    shot("rebuilt")


def test_ranking_weights_are_set_in_chat_settings_and_emptied_back_to_the_defaults(page: Page, live, shot):
    with live.client() as c:
        char = c.post("/api/characters", json={"name": "Aria", "first_mes": "Hello."}).json()
        chat = c.post("/api/chats", json={"character_ids": [char["id"]], "mode": "conversation"}).json()

    def save(dense: str, neighbours: str) -> tuple:
        """Fill both fields, save, and read back what the chat stored."""
        page.fill("#recall-dense-weight", dense)
        page.fill("#recall-neighbour-share", neighbours)
        page.locator("#chat-settings-form button[type=submit]").click()
        expect(page.locator("#chat-settings-form").get_by_text("Saved.")).to_be_visible()
        with live.client() as c:
            settings = c.get(f"/api/chats/{chat['id']}").json()["settings"]
        return settings.get("recall_dense_weight"), settings.get("recall_neighbour_share")

    page.goto(f"{live.url}/chats/{chat['id']}")
    page.click("#settings-button")
    ranking = page.locator("#recall-ranking")
    # Closed while the defaults hold; its fields say what the defaults are.
    expect(ranking).not_to_have_attribute("open", "")
    ranking.locator("summary").click()
    expect(page.locator("#recall-dense-weight")).to_have_attribute("placeholder", "0.5 (default)")
    expect(page.locator("#recall-neighbour-share")).to_have_attribute("placeholder", "0.15 (default)")
    assert save("0.7", "0.25") == (0.7, 0.25)
    page.reload()
    page.click("#settings-button")
    expect(page.locator("#recall-ranking")).to_have_attribute("open", "")
    expect(page.locator("#recall-dense-weight")).to_have_value("0.7")
    page.locator("#recall-dense-weight").scroll_into_view_if_needed()
    shot("ranking-weights")
    # Emptied, the chat follows the defaults again.
    assert save("", "") == (None, None)


def test_vectors_of_a_new_size_are_marked_and_rebuild_moves_the_chat_to_them(page: Page, live, models, shot):
    """Issue 21, item 3: the embedding server swapped the model behind the name (8 numbers, then 16).
    The refused memories say why, a notice offers Rebuild, and Rebuild ends it."""
    models.embedding_dim = 8
    with live.client() as c:
        conn = c.post(
            "/api/connections",
            json={
                "name": "Embedder",
                "base_url": models.base_url,
                "model": "test-model",
                "embedding_model": "swapped-embed",
            },
        ).json()
        char = c.post("/api/characters", json={"name": "Aria", "first_mes": "Hello."}).json()
        chat = c.post(
            "/api/chats",
            json={"character_ids": [char["id"]], "mode": "conversation", "connection_id": conn["id"]},
        ).json()
    _fill_and_embed(live, chat["id"], 100)
    models.embedding_dim = 16
    _fill_and_embed(live, chat["id"], 20)
    page.on("dialog", lambda d: d.accept())

    page.goto(f"{live.url}/chats/{chat['id']}/memories")
    notice = page.locator("#embedding-unavailable")
    expect(notice).to_contain_text(
        "could not be embedded: The embedding server now gives swapped-embed vectors of 16 numbers"
    )
    expect(notice).to_contain_text("Rebuild all embeds them again with swapped-embed")
    expect(notice).to_be_in_viewport()
    expect(page.locator(".memory-card", has_text="Embedding unavailable").first).to_contain_text(
        "the model behind that name has changed"
    )
    shot("new-size")

    page.get_by_role("button", name="Rebuild all").click()
    expect(page.locator("#rebuild-result")).to_contain_text("Rebuilt", timeout=30000)
    expect(page.locator("#rebuild-result")).to_be_in_viewport()
    expect(notice).to_have_count(0)
    expect(page.locator(".memory-card", has_text="Embedding unavailable")).to_have_count(0)
    expect(page.locator(".memory-card").first).to_contain_text("Vectorized")
    shot("rebuilt-new-size")
