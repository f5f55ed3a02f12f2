"""A request holds one connection of the app's pool, never two: the chat page asks whether a reply is
being written (on any server: a claim row), and Chat Settings whether Prepare runs. Those claim reads
once took a second connection from the same pool while the request held its first; a hundred page
views at once (the two-server load bench) then held every connection, each waiting for another, until
the pool's 30 s timeout failed them all. The claims now read on a pool of their own."""

from __future__ import annotations

import inspect

from app.platform.db import make_engine
from tests.conftest import add_character, add_connection, new_chat


def test_a_chat_page_and_its_settings_need_one_connection_of_the_apps_pool(sugo, api, models):
    add_connection(api, models)
    chat_id = new_chat(api, [add_character(api)["id"]])["id"]
    defaults = inspect.signature(make_engine).parameters
    most = defaults["pool_size"].default + defaults["max_overflow"].default
    # Every connection of the app's pool but one is taken: what a crowd of requests does.
    held = [sugo.services.engine.connect() for _ in range(most - 1)]
    try:
        for path in (f"/chats/{chat_id}", f"/chats/{chat_id}/settings"):
            r = api.get(path, timeout=20)
            assert r.status_code == 200, (path, r.status_code, r.text[-300:])
    finally:
        for conn in held:
            conn.close()
