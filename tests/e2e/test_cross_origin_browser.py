"""Issue 21, item 1, in Chromium: a page served on another port of this computer (a dev server,
another local app) posts a form and a no-cors fetch to a Sugo without a password. The browser
sends its own Origin and Sec-Fetch-Site: same-site; Sugo refuses both, and nothing changes."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from playwright.sync_api import Page, expect

from tests.support.waiting import wait_for


class PageServer:
    """Serves one HTML page on another loopback port: the attacker's."""

    def __init__(self) -> None:
        self.html = ""
        self.fetched = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/done":  # the page's script reports that its fetch came back
                    server.fetched.set()
                body = server.html.encode()
                self.send_response(200)
                self.send_header("content-type", "text/html")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> PageServer:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def attacker() -> Iterator[PageServer]:
    with PageServer() as server:
        yield server


def test_a_page_on_another_local_port_cannot_change_sugo(page: Page, live, attacker, models):
    with live.client() as c:
        char = c.post("/api/characters", json={"name": "Aria", "first_mes": "Hello."}).json()
        chat = c.post("/api/chats", json={"character_ids": [char["id"]]}).json()
    sugo = live.url
    # A no-cors fetch adds a connection pointing at the attacker; a form then deletes the chat.
    attacker.html = f"""<!doctype html><title>Another app</title>
<form id="f" method="post" action="{sugo}/chats/{chat["id"]}/delete"></form>
<script>
fetch("{sugo}/connections", {{method: "POST", mode: "no-cors",
  body: new URLSearchParams({{name: "Attacker", kind: "openai", base_url: "{attacker.url}/v1", model: "x"}})}})
  .finally(() => fetch("/done"));
</script>"""
    # The handler reads only what the event carries: one that asked Chromium for the request's headers
    # (a round trip) could still be waiting for them when the test read the list, which then held one
    # response of two. The headers are read below, from the awaited response.
    seen: list[tuple[str, int]] = []
    page.on("response", lambda r: seen.append((r.url, r.status)) if r.url.startswith(sugo) else None)
    # The fetch's response is awaited before the page posts its form: Playwright reports a request's
    # response once Chromium has sent all it knows of it, and a page that navigated away at once (the
    # form used to be posted from the fetch's own callback) could leave that report behind with the
    # old document; the test then saw one response of two.
    with page.expect_response(f"{sugo}/connections") as fetched:
        page.goto(attacker.url)
    assert fetched.value.status == 403
    wait_for(attacker.fetched.is_set, timeout=15, what="the attacker's fetch to come back")
    form_url = f"{sugo}/chats/{chat['id']}/delete"
    with page.expect_response(form_url) as posted:
        page.evaluate("document.getElementById('f').submit()")  # the attacker's own page posts it
    expect(page.locator("body")).to_contain_text("Refused: this change came from " + attacker.url)
    # Both requests were refused; the form's carried what a cross-port page's do (Playwright cannot
    # read an opaque no-cors fetch's request headers).
    assert seen == [(f"{sugo}/connections", 403), (form_url, 403)]
    request = posted.value.request
    assert (posted.value.status, request.header_value("origin"), request.header_value("sec-fetch-site")) == (
        403,
        attacker.url,
        "same-site",
    )
    with live.client() as c:
        assert c.get(f"/api/chats/{chat['id']}").status_code == 200
        assert c.get("/api/connections").json() == []
