"""Issue 11 item 11: what a phone needs to install Sugo (manifest, service worker, icons, offline
page) is served without a login, with the right media types; nothing else became public."""

import json

import pytest

from app.web.install import SHELL, shell_version, web_manifest
from tests.support.live import LiveSugo


@pytest.fixture
def locked(tmp_path):
    with LiveSugo(tmp_path / "locked", password="open sesame") as live:
        yield live


def test_the_install_files_need_no_login_and_say_what_they_are(locked):
    with locked.client() as c:
        r = c.get("/manifest.webmanifest")
        assert r.status_code == 200 and r.headers["content-type"] == "application/manifest+json"
        assert r.json() == web_manifest()
        r = c.get("/sw.js")
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/javascript")
        assert r.headers["cache-control"] == "no-cache"
        for path in SHELL:
            assert c.get(path).status_code == 200, path
        # Still locked: pages, the API, images.
        assert c.get("/api/chats").status_code == 401
        assert c.get("/images/1").status_code == 401
        assert c.get("/chats/1", follow_redirects=False).status_code in (303, 401)
        assert c.get("/sw.js/../api/chats").status_code == 401


def test_the_worker_names_its_shell_and_a_versioned_cache(locked):
    with locked.client() as c:
        text = c.get("/sw.js").text
    assert f"const SHELL = {json.dumps(list(SHELL))};" in text
    assert "/static/offline.html" in SHELL
    assert not any(p.startswith(("/api/", "/chats", "/images")) for p in SHELL)
    assert 'const CACHE = "sugo-shell-' in text and "{{" not in text


def test_the_shell_version_changes_with_any_file():
    assert shell_version([b"a", b"b"]) == shell_version([b"a", b"b"])
    assert shell_version([b"a", b"b"]) != shell_version([b"a", b"c"])
    assert shell_version([b"ab", b""]) != shell_version([b"a", b"b"])
    assert len(shell_version([b"a"])) == 16


def test_the_manifest_opens_sugo_full_screen_at_its_start():
    m = web_manifest()
    assert (m["name"], m["start_url"], m["scope"], m["display"]) == ("Sugo", "/", "/", "standalone")
    assert {(i["sizes"], i["purpose"]) for i in m["icons"]} == {
        ("192x192", "any"),
        ("512x512", "any"),
        ("512x512", "maskable"),
    }
