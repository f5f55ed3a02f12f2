"""Issue 21, items 1 and 2, over real HTTP: a page on another port of this computer cannot change
anything in Sugo (no password set), logging out needs the CSRF token, and the login backoff counts
the connection's address unless the owner names a reverse proxy (SUGO_TRUSTED_PROXIES)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys

import pytest

from app.platform.settings import load_settings
from app.web.auth import cross_origin_refusal, parse_origin
from tests.conftest import add_character, add_connection, new_chat
from tests.support.live import LiveSugo
from tests.support.process import SugoProcess


def _other_port(sugo) -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert port != sugo.port
    return port


def _attacker(sugo) -> dict[str, str]:
    """What Chromium sends with a form or fetch from a page served on another local port."""
    return {
        "Origin": f"http://127.0.0.1:{_other_port(sugo)}",
        "Sec-Fetch-Site": "same-site",
        "Content-Type": "application/x-www-form-urlencoded",
    }


def _own(sugo) -> dict[str, str]:
    """What it sends from Sugo's own page (htmx, forms)."""
    return {"Origin": sugo.url, "Sec-Fetch-Site": "same-origin", "HX-Request": "true"}


class TestAnotherLocalPort:
    def test_cannot_delete_a_chat(self, sugo, api):
        chat = new_chat(api, [add_character(api)["id"]])
        for sent in (_attacker(sugo), {"Origin": _attacker(sugo)["Origin"]}, {"Sec-Fetch-Site": "same-site"}):
            assert api.post(f"/chats/{chat['id']}/delete", headers=sent).status_code == 403, sent
            assert api.delete(f"/api/chats/{chat['id']}", headers=sent).status_code == 403, sent
        assert api.get(f"/api/chats/{chat['id']}").status_code == 200
        assert api.post(f"/chats/{chat['id']}/delete", headers=_own(sugo)).status_code == 204
        assert api.get(f"/api/chats/{chat['id']}").status_code == 404

    def test_cannot_add_a_connection_or_make_it_the_default(self, sugo, api, models):
        mine = add_connection(api, models)
        form = {"name": "Attacker", "kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "x"}
        r = api.post("/connections", data=form, headers=_attacker(sugo))
        assert r.status_code == 403 and "came from http://127.0.0.1:" in r.json()["detail"]
        assert [c["name"] for c in api.get("/api/connections").json()] == ["Test model"]
        other = add_connection(api, models, name="Second")
        assert api.post(f"/connections/{other['id']}/default", headers=_attacker(sugo)).status_code == 403
        assert api.post(f"/api/connections/{other['id']}/default", headers=_attacker(sugo)).status_code == 403
        assert {c["name"]: c["is_default"] for c in api.get("/api/connections").json()}["Second"] is False
        # The same from Sugo's own page.
        assert api.post("/connections", data=form, headers=_own(sugo)).status_code == 200
        assert api.post(f"/connections/{other['id']}/default", headers=_own(sugo)).status_code == 200
        assert {c["name"]: c["is_default"] for c in api.get("/api/connections").json()} == {
            "Test model": False,
            "Second": True,
            "Attacker": False,
        }
        assert mine["id"] != other["id"]

    def test_the_port_and_the_scheme_count_not_only_the_name(self, sugo, api):
        for origin in (
            f"http://localhost:{sugo.port}",
            f"https://127.0.0.1:{sugo.port}",
            "http://127.0.0.1",
            f"http://127.0.0.1:{sugo.port}.evil.example",
            "null",
        ):
            r = api.post("/api/personas", json={"name": "Evil"}, headers={"Origin": origin})
            assert r.status_code == 403, origin
        # A Referer stands in for a missing Origin (older browsers' forms).
        r = api.post(
            "/api/personas",
            json={"name": "Evil"},
            headers={"Referer": f"http://127.0.0.1:{_other_port(sugo)}/x"},
        )
        assert r.status_code == 403
        assert api.get("/api/personas").json() == []
        # Sugo reached as localhost: its own origin is then localhost (the Host header, an allowed name).
        r = api.post(
            "/api/personas",
            json={"name": "Me"},
            headers={"Host": f"localhost:{sugo.port}", "Origin": f"http://localhost:{sugo.port}"},
        )
        assert r.status_code == 201
        r = api.post("/api/personas", json={"name": "Page"}, headers={"Referer": f"{sugo.url}/personas"})
        assert r.status_code == 201
        # No Origin, no Referer: not a browser's request (curl, scripts).
        assert api.post("/api/personas", json={"name": "Script"}).status_code == 201
        assert (
            api.post("/api/personas", json={"name": "Typed"}, headers={"Sec-Fetch-Site": "none"}).status_code
            == 201
        )


def test_logout_needs_the_csrf_token_and_refuses_another_port(tmp_path):
    with (
        LiveSugo(tmp_path / "locked", password="open sesame") as live,
        live.client() as c,
        live.client() as phone,
    ):
        for client in (c, phone):
            assert (
                client.post("/login", data={"password": "open sesame"}, follow_redirects=False).status_code
                == 303
            )
        token = re.search(r'name="csrf-token" content="([^"]+)"', c.get("/").text).group(1)
        attacker = _attacker(live)
        assert c.post("/logout", headers=attacker).status_code == 403
        assert c.post("/logout", headers={**attacker, "X-CSRF-Token": token}).status_code == 403
        assert c.post("/logout").status_code == 403  # no token: a page that slipped past the origin check
        assert phone.get("/api/chats").status_code == 200  # nobody was logged out
        # The page's button posts through htmx, with the token: then every device is logged out.
        assert 'hx-post="/logout"' in c.get("/").text
        r = c.post("/logout", headers={**_own(live), "X-CSRF-Token": token})
        assert r.status_code == 204 and r.headers["hx-redirect"] == "/login"
        assert phone.get("/api/chats").status_code == 401


def test_sugo_behind_a_https_reverse_proxy(tmp_path):
    """The browser sees https://sugo.example.com (port 443); Sugo listens on plain http on loopback.
    Its own origin is the Host the proxy passes on, with the scheme its X-Forwarded-Proto names, and
    only when the proxy is named in SUGO_TRUSTED_PROXIES."""
    public = {
        "Host": "sugo.example.com",
        "Origin": "https://sugo.example.com",
        "X-Forwarded-Proto": "https",
        "Sec-Fetch-Site": "same-origin",
    }
    with LiveSugo(tmp_path / "a", allowed_hosts=("sugo.example.com",)) as live, live.client() as c:
        r = c.post("/api/personas", json={"name": "Unnamed proxy"}, headers=public)
        assert r.status_code == 403 and "SUGO_TRUSTED_PROXIES" in r.json()["detail"]
    with (
        LiveSugo(tmp_path / "b", allowed_hosts=("sugo.example.com",), trusted_proxies=("127.0.0.1",)) as live,
        live.client() as c,
    ):
        assert c.post("/api/personas", json={"name": "Proxied"}, headers=public).status_code == 201
        evil = {**public, "Origin": "https://sugo.example.com:8443", "Sec-Fetch-Site": "same-site"}
        assert c.post("/api/personas", json={"name": "Evil"}, headers=evil).status_code == 403
        assert (
            c.post(
                "/api/personas", json={"name": "Evil"}, headers={**public, "X-Forwarded-Proto": "http"}
            ).status_code
            == 403
        )


def test_any_host_still_compares_the_whole_origin(tmp_path):
    with LiveSugo(tmp_path / "d", allowed_hosts=("*",)) as live, live.client() as c:
        own = {"Host": "my-box:8000", "Origin": "http://my-box:8000"}
        assert c.post("/api/personas", json={"name": "Mine"}, headers=own).status_code == 201
        assert (
            c.post(
                "/api/personas", json={"name": "Evil"}, headers={**own, "Origin": "http://my-box:5173"}
            ).status_code
            == 403
        )


def test_cross_origin_rules():
    def refused(**headers) -> bool:
        given = {"origin": None, "referer": None, "fetch_site": None, **headers}
        return (
            cross_origin_refusal(
                scheme=given.pop("scheme", "http"), host=given.pop("host", "127.0.0.1:8000"), **given
            )
            is not None
        )

    assert not refused()
    assert not refused(origin="http://127.0.0.1:8000", fetch_site="same-origin")
    assert not refused(origin="HTTP://127.0.0.1:8000")
    assert not refused(host="[::1]:8000", origin="http://[::1]:8000")
    assert not refused(host="sugo.lan", origin="http://sugo.lan:80")
    assert not refused(scheme="https", host="sugo.lan", origin="https://sugo.lan")
    assert refused(scheme="https", host="sugo.lan", origin="https://sugo.lan:8443")
    assert refused(origin="http://127.0.0.1:8001")
    assert refused(origin="http://127.0.0.1:8000", fetch_site="same-site")
    assert refused(origin="http://127.0.0.1:8000", fetch_site="cross-site")
    assert refused(fetch_site="same-site")
    assert refused(origin="null")
    assert refused(origin="http://user@127.0.0.1:8000")
    assert refused(origin="http://127.0.0.1:99999")
    assert refused(origin="http://127.0.0.1:8000", host=None)
    assert refused(referer="http://127.0.0.1:8001/page")
    assert not refused(referer="http://127.0.0.1:8000/chats/1")
    assert parse_origin("ftp://127.0.0.1") is None
    assert parse_origin("https://Sugo.Example.com") == ("https", "sugo.example.com", 443)


# --- item 2: the login backoff and X-Forwarded-For -------------------------------------------------


def _wrong_logins(server, rotate: bool) -> list[int]:
    with server.client() as c:
        return [
            c.post(
                "/login",
                data={"password": "guess"},
                headers={"X-Forwarded-For": f"203.0.113.{i}"} if rotate else {},
            ).status_code
            for i in range(1, 8)
        ]


def test_a_rotated_x_forwarded_for_does_not_escape_the_login_backoff(tmp_path):
    with SugoProcess(tmp_path / "plain", SUGO_PASSWORD="open sesame") as server:
        assert _wrong_logins(server, rotate=True) == [401] * 5 + [429] * 2


def test_a_named_proxy_passes_the_clients_address_on(tmp_path):
    with SugoProcess(
        tmp_path / "proxied", SUGO_PASSWORD="open sesame", SUGO_TRUSTED_PROXIES="127.0.0.1"
    ) as server:
        # Each client behind the proxy counts on its own; the same client still meets the 429.
        assert _wrong_logins(server, rotate=True) == [401] * 7
        assert _wrong_logins(server, rotate=False) == [401] * 5 + [429] * 2


def test_trusted_proxies_are_addresses_or_networks(monkeypatch):
    monkeypatch.delenv("SUGO_TRUSTED_PROXIES", raising=False)
    assert load_settings().trusted_proxies == ()
    monkeypatch.setenv("SUGO_TRUSTED_PROXIES", " 127.0.0.1, 172.16.0.0/12 ,::1")
    assert load_settings().trusted_proxies == ("127.0.0.1", "172.16.0.0/12", "::1")
    for bad in ("*", "proxy.lan", "10.0.0.0/33"):
        monkeypatch.setenv("SUGO_TRUSTED_PROXIES", bad)
        with pytest.raises(ValueError, match="SUGO_TRUSTED_PROXIES takes the addresses or networks"):
            load_settings()


def test_a_wrong_trusted_proxy_stops_the_start_with_a_sentence(tmp_path):
    environ = {k: v for k, v in os.environ.items() if not k.startswith("SUGO_")}
    done = subprocess.run(
        [sys.executable, "-m", "app", "--port", "1"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**environ, "SUGO_DATA_DIR": str(tmp_path / "d"), "SUGO_TRUSTED_PROXIES": "*"},
    )
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "SUGO_TRUSTED_PROXIES takes the addresses or networks of your reverse proxies" in done.stderr
