"""Settings → Web search in a real browser, desktop and phone (issue 24): a Brave key saved sealed (the
page then says "A key is saved" and never shows it) and removed with confirmation; a SearXNG URL saved;
a bad URL refused with its sentence in sight, the form kept as typed and nothing saved."""

from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.test_accessibility_browser import _violations
from tests.support.live import LiveSugo
from tests.support.sight import expect_in_sight

KEY = "BSA-browser-key-987654321"


@pytest.fixture
def live_web(tmp_path) -> Iterator[LiveSugo]:
    with LiveSugo(tmp_path / "data", fetch_allow=("searx.lan",)) as sugo:
        yield sugo


def _saved(live: LiveSugo) -> dict:
    with live.client() as c:
        return c.get("/api/tools/web").json()


def test_save_a_key_and_a_searxng_url_then_remove_the_key(page: Page, live_web, shot):
    page.goto(f"{live_web.url}/settings/web")
    expect(page.locator(".tool-tabs a[aria-current='page']")).to_have_text("Web search")
    expect(page.locator("#fetch-allow")).to_contain_text("Allowed now: searx.lan.")
    expect(page.locator("#brave-key-saved")).to_have_count(0)
    page.fill("#brave-key", KEY)
    page.fill("#searxng-url", "http://searx.lan:8888/")
    page.uncheck("#duckduckgo")
    shot("filled")
    page.click("#web-save")
    expect_in_sight(page, "#web-settings-saved")
    expect(page.locator("#web-settings-saved")).to_have_text("Saved.")
    expect(page.locator("#brave-key-saved")).to_have_text("A key is saved")
    expect(page.locator("#brave-key")).to_have_value("")
    expect(page.locator("#searxng-url")).to_have_value("http://searx.lan:8888")
    expect(page.locator("#duckduckgo")).not_to_be_checked()
    assert KEY not in page.content()
    assert _violations(page) == set()
    shot("saved")
    assert _saved(live_web) == {
        "has_brave_key": True,
        "searxng_url": "http://searx.lan:8888",
        "duckduckgo": False,
        "fetch_allow": ["searx.lan"],
    }

    page.reload()
    expect(page.locator("#brave-key-saved")).to_have_text("A key is saved")
    assert KEY not in page.content()
    page.once("dialog", lambda d: d.accept())
    page.click("#brave-key-remove")
    expect_in_sight(page, "#web-settings-saved")
    expect(page.locator("#web-settings-saved")).to_have_text("The Brave key was removed.")
    expect(page.locator("#brave-key-saved")).to_have_count(0)
    assert _saved(live_web)["has_brave_key"] is False
    assert _saved(live_web)["searxng_url"] == "http://searx.lan:8888"  # the rest stays
    shot("removed")


def test_a_bad_searxng_url_is_refused_in_sight_and_nothing_is_saved(page: Page, live_web, shot):
    page.goto(f"{live_web.url}/settings/web")
    page.fill("#brave-key", KEY)
    page.fill("#searxng-url", "ftp://searx.lan/")
    page.click("#web-save")
    expect_in_sight(page, "#web-settings-error")
    expect(page.locator("#web-settings-error")).to_contain_text(
        "The SearXNG URL must start with http:// or https:// and name a host"
    )
    expect(page.locator("#web-settings-error")).to_contain_text("Nothing was saved.")
    # The form is as typed: fix the URL and save again.
    expect(page.locator("#searxng-url")).to_have_value("ftp://searx.lan/")
    expect(page.locator("#brave-key")).to_have_value(KEY)
    shot("refused")
    assert _violations(page) == set()
    assert _saved(live_web) == {
        "has_brave_key": False,
        "searxng_url": "",
        "duckduckgo": True,
        "fetch_allow": ["searx.lan"],
    }
    page.fill("#searxng-url", "https://searx.lan")
    page.click("#web-save")
    expect_in_sight(page, "#web-settings-saved")
    expect(page.locator("#web-settings-error")).to_have_count(0)
    assert _saved(live_web)["searxng_url"] == "https://searx.lan"
    assert _saved(live_web)["has_brave_key"] is True
