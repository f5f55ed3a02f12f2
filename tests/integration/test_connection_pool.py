"""A request holds one connection of the app's pool, never two. A request that took a second
connection from the same pool while it held its first (a claim read, a service opening a session of
its own) once made a hundred page views at once (the two-server load bench) hold every connection,
each waiting for another, until the pool's 30 s timeout failed them all.

The load bench found the chat page's claim reads (now on the claims' own pool) and the Re-scan panel's
last run (now on the request's session). tests/support/pool_nesting.py, which records a thread checking
out a second connection while it holds one, then found the rest over every page and main action: the
Memory Recall viewer's rebuild (read on the request's session; Rebuild and Stop start on sessions of
their own before the request uses its own), the API's Retry of a failed summary and Re-scan (started
before the request uses its session), and the MCP servers' rows answered as a whole page (read on the
request's session). Prepare's recap step, a background thread, put stale recaps back on a second
connection too: it now does so on the step's.

The tests: with every connection of the pool but one held, as a crowd of requests holds them, pages
and actions still answer; the detector finds no request thread holding two, over a list of requests
(each one that held two is named with the stacks); and none in Prepare's thread."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from contextlib import contextmanager

from sqlmodel import Session, select

from app.chats.models import Message
from app.memory.scenes.models import SceneRun
from app.memory.summaries.models import SummaryJob
from app.platform.db import make_engine
from tests.conftest import add_character, add_connection, new_chat
from tests.support.pool_nesting import PoolNesting, no_nested_checkout, request_threads
from tests.support.waiting import wait_for

MESSAGES = 12


@contextmanager
def all_but_one_held(sugo) -> Iterator[None]:
    """Every connection of the app's pool but one taken: what a crowd of requests does."""
    defaults = inspect.signature(make_engine).parameters
    most = defaults["pool_size"].default + defaults["max_overflow"].default
    held = [sugo.services.engine.connect() for _ in range(most - 1)]
    try:
        yield
    finally:
        for conn in held:
            conn.close()


def _chat(sugo, api, models) -> int:
    """A Roleplay chat with Advanced Memory on, MESSAGES messages, a failed Generate of a summary (for
    Retry) and memories made of its messages."""
    add_connection(api, models)
    chat_id = new_chat(api, [add_character(api)["id"]])["id"]
    r = api.put(f"/api/chats/{chat_id}/options", json={"settings": {"advanced_memory": True}})
    assert r.status_code == 200, r.text
    with Session(sugo.engine) as s:
        for n in range(2, MESSAGES + 1):
            name, role = ("You", "user") if n % 2 == 0 else ("Aria", "assistant")
            s.add(Message(chat_id=chat_id, role=role, name=name, content=f"Line {n}: we walk on."))
        s.commit()
    ids = [m["id"] for m in api.get(f"/api/chats/{chat_id}/messages").json() if m["kind"] == "message"]
    with Session(sugo.engine) as s:
        s.add(
            SummaryJob(
                chat_id=chat_id,
                scope="last",
                last_n=4,
                first_message_id=ids[-4],
                last_message_id=ids[-1],
                first_position=MESSAGES - 3,
                last_position=MESSAGES,
                status="failed",
                reason="The model did not answer.",
            )
        )
        s.commit()
    return chat_id


def _mcp_server(api) -> int:
    r = api.post("/api/mcp-servers", json={"name": "tools", "url": "https://mcp.example.com/mcp"})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def test_a_chat_page_and_its_settings_need_one_connection_of_the_apps_pool(sugo, api, models):
    add_connection(api, models)
    chat_id = new_chat(api, [add_character(api)["id"]])["id"]
    with all_but_one_held(sugo):
        for path in (f"/chats/{chat_id}", f"/chats/{chat_id}/settings"):
            r = api.get(path, timeout=20)
            assert r.status_code == 200, (path, r.status_code, r.text[-300:])


def test_the_memory_viewer_and_the_mcp_servers_rows_need_one_connection_of_the_apps_pool(sugo, api, models):
    chat_id = _chat(sugo, api, models)
    server = _mcp_server(api)
    with all_but_one_held(sugo):
        for method, path, status in (
            ("GET", f"/chats/{chat_id}/memories", 200),
            ("GET", f"/chats/{chat_id}/memories/status", 200),
            ("GET", f"/api/chats/{chat_id}/memories/status", 200),
            ("POST", f"/chats/{chat_id}/memories/rebuild/stop", 200),
            ("POST", f"/api/chats/{chat_id}/memories/rebuild/stop", 200),
            # Without HX-Request (a link opened in a new tab) a row answers with the whole page.
            ("GET", f"/settings/mcp/{server}", 200),
            ("GET", f"/settings/mcp/{server}/remove", 200),
            ("POST", f"/settings/mcp/{server}/disable", 200),
            ("POST", f"/settings/mcp/{server}/enable", 200),
        ):
            r = api.request(method, path, timeout=20)
            assert r.status_code == status, (method, path, r.status_code, r.text[-300:])


def test_no_request_takes_a_second_connection_of_the_apps_pool(sugo, api, models):
    chat_id = _chat(sugo, api, models)
    server = _mcp_server(api)
    base = f"/chats/{chat_id}"
    nested: list[str] = []
    for method, path, status in (
        ("GET", base, 200),
        ("GET", f"{base}/settings", 200),
        ("GET", f"{base}/scenes/rescan", 200),
        ("GET", f"{base}/memories", 200),
        ("GET", f"{base}/memories/status", 200),
        ("GET", f"/api{base}/memories/status", 200),
        ("POST", f"{base}/memories/rebuild", 200),
        ("POST", f"{base}/memories/rebuild/stop", 200),
        ("POST", f"/api{base}/memories/rebuild", 202),
        ("POST", f"/api{base}/memories/rebuild/stop", 200),
        ("POST", f"{base}/scenes/reindex", 200),
        ("POST", f"/api{base}/summaries/generate/retry", 202),
        ("POST", f"/api{base}/scenes/rescan", 202),  # the open scene: no body fields
        ("GET", "/settings/mcp", 200),
        ("GET", f"/settings/mcp/{server}", 200),
        ("GET", f"/settings/mcp/{server}/remove", 200),
        ("POST", f"/settings/mcp/{server}/disable", 200),
        ("POST", f"/settings/mcp/{server}/enable", 200),
        ("GET", f"/settings/mcp/{server}/discovering", 200),
    ):
        with PoolNesting(sugo.engine, threads=request_threads) as nesting:
            r = api.request(method, path, json={} if path.startswith("/api") else None, timeout=20)
        assert r.status_code == status, (method, path, r.status_code, r.text[-300:])
        nested.extend(f"{method} {path}: {n}" for n in nesting.nestings)
    assert not nested, "requests that held two connections of the pool:\n\n" + "\n\n".join(nested)


def test_prepares_recap_step_takes_one_connection_of_the_apps_pool(sugo, api, models):
    chat_id = _chat(sugo, api, models)
    with no_nested_checkout(sugo.engine, "Prepare"):
        r = api.post(f"/api/chats/{chat_id}/scenes/prepare", json={})
        assert r.status_code == 202, r.text

        def ended() -> bool:
            with Session(sugo.engine) as s:
                runs = s.exec(select(SceneRun).where(SceneRun.chat_id == chat_id)).all()
                return bool(runs) and all(run.status != "running" for run in runs)

        wait_for(ended, timeout=60, what="Prepare ends")
