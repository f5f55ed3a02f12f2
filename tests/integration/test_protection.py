"""Protection: cross-site writes refused always; with SUGO_PASSWORD, a login, CSRF and bearer tokens."""

import re

import pytest

from tests.support.live import LiveSugo


@pytest.fixture
def locked(tmp_path):
    with LiveSugo(tmp_path / "locked", password="open sesame") as live:
        yield live


def _login(client) -> str:
    r = client.post("/login", data={"password": "open sesame", "next": "/"}, follow_redirects=False)
    assert r.status_code == 303
    page = client.get("/").text
    return re.search(r'name="csrf-token" content="([^"]+)"', page).group(1)


def test_binds_to_loopback_by_default():
    from app.platform.settings import load_settings

    assert load_settings().host == "127.0.0.1"


def test_cross_site_writes_are_refused_without_a_password(api):
    r = api.post("/api/personas", json={"name": "Evil"}, headers={"Origin": "https://evil.example"})
    assert r.status_code == 403
    r = api.post("/api/personas", json={"name": "Evil"}, headers={"Sec-Fetch-Site": "cross-site"})
    assert r.status_code == 403
    assert api.get("/api/personas").json() == []
    assert (
        api.post(
            "/api/personas", json={"name": "Fine"}, headers={"Origin": api.base_url.__str__().rstrip("/")}
        ).status_code
        == 201
    )


class TestPassword:
    def test_everything_refuses_unauthenticated_requests(self, locked):
        with locked.client() as c:
            assert c.get("/healthz").status_code == 200
            assert c.get("/api/chats").status_code == 401
            assert c.post("/api/personas", json={"name": "x"}).status_code == 401
            assert c.get("/images/1").status_code == 401
            assert c.get("/docs").status_code == 401
            r = c.get("/characters", headers={"Accept": "text/html"}, follow_redirects=False)
            assert r.status_code == 303 and r.headers["location"].startswith("/login?next=/characters")

    def test_wrong_password_is_refused(self, locked):
        with locked.client() as c:
            r = c.post("/login", data={"password": "nope"})
            assert r.status_code == 401 and "Wrong password" in r.text
            assert c.get("/api/chats").status_code == 401

    def test_login_session_needs_csrf_token_for_changes(self, locked):
        with locked.client() as c:
            token = _login(c)
            assert c.get("/api/chats").status_code == 200
            assert c.post("/api/personas", json={"name": "NoToken"}).status_code == 403
            assert (
                c.post("/api/personas", json={"name": "Bad"}, headers={"X-CSRF-Token": "forged"}).status_code
                == 403
            )
            assert (
                c.post("/api/personas", json={"name": "Me"}, headers={"X-CSRF-Token": token}).status_code
                == 201
            )
            c.post("/logout", headers={"X-CSRF-Token": token})
            c.cookies.clear()
            assert c.get("/api/chats").status_code == 401

    def test_bearer_password_for_api_clients(self, locked):
        with locked.client(headers={"Authorization": "Bearer open sesame"}) as c:
            assert c.post("/api/personas", json={"name": "Script"}).status_code == 201
        with locked.client(headers={"Authorization": "Bearer wrong"}) as c:
            assert c.get("/api/personas").status_code == 401

    def test_login_redirect_never_leaves_the_site(self, locked):
        with locked.client() as c:
            r = c.post(
                "/login", data={"password": "open sesame", "next": "//evil.example/x"}, follow_redirects=False
            )
            assert r.headers["location"] == "/"


def test_message_html_is_sanitized_server_side(api):
    from tests.conftest import add_character, new_chat

    char = add_character(
        api,
        "Vex",
        first_mes='<script>alert(1)</script> <img src=x onerror="alert(2)"> [click](javascript:alert(3)) "Hi"',
    )
    chat = new_chat(api, [char["id"]])
    page = api.get(f"/chats/{chat['id']}").text
    body = page.split('id="message-list"', 1)[1]
    assert "<script>alert" not in body and "<img src=x" not in body and 'href="javascript' not in body
    assert "&lt;script&gt;" in body
    assert '<span class="dialogue">"Hi"</span>' in body
