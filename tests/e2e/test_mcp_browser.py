"""Settings → MCP Servers in the browser, desktop and phone: add a server (the SDK's own, on loopback),
Discover now, Disable, Remove with its confirmation step; each answer lands in sight where the user
clicked, and no script dialog is ever opened."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Page, expect

from tests.support.live import LiveSugo
from tests.support.mcp_server import McpTestServer
from tests.support.sight import expect_in_sight

TOKEN = "sk-secret-XYZ"
AXE = Axe().axe_script


def axe_violations(page: Page) -> list[str]:
    """axe-core's violations on the page, every rule: "rule: target"."""
    if not page.evaluate("() => typeof axe !== 'undefined'"):
        page.evaluate(AXE)
    result = page.evaluate("() => axe.run(document, {resultTypes: ['violations']})")
    return [f"{v['id']}: {' '.join(map(str, n['target']))}" for v in result["violations"] for n in v["nodes"]]


@pytest.fixture
def mcp() -> Iterator[McpTestServer]:
    with McpTestServer(token=TOKEN) as server:
        yield server


@pytest.fixture
def live(tmp_path) -> Iterator[LiveSugo]:
    # A loopback MCP server needs SUGO_FETCH_ALLOW, as the page says.
    with LiveSugo(tmp_path / "data", fetch_allow=("127.0.0.1",)) as sugo:
        yield sugo


def test_add_discover_disable_and_remove_an_mcp_server(page: Page, live, mcp, shot, no_script_runs):
    page.goto(live.url + "/settings/mcp")
    expect(page.locator(".tool-tabs a[aria-current=page]")).to_have_text("MCP Servers")
    expect(page.locator("#mcp-warning")).to_contain_text("prompt injection")
    expect(page.locator("#mcp-servers")).to_contain_text("No MCP server yet")
    shot("empty")

    # A refused name: the sentence shows, and what was typed stays.
    page.fill("input[name=name]", "my helper")
    page.fill("input[name=url]", mcp.url)
    page.fill("input[name=token]", TOKEN)
    page.select_option("select[name=server_type]", "general")
    page.get_by_role("button", name="Add server").click()
    expect(page.locator(".toast")).to_contain_text("letters (a–z, A–Z), digits and hyphens")
    expect_in_sight(page, ".toast")
    expect(page.locator("input[name=url]")).to_have_value(mcp.url)

    page.fill("input[name=name]", "helper")
    page.get_by_role("button", name="Add server").click()
    expect_in_sight(page, "#mcp-added")
    expect(page.locator("#mcp-added")).to_contain_text("Added helper")
    expect(page.locator("input[name=name]")).to_have_value("")  # the form is ready for another
    row = page.locator(".mcp-server").filter(has_text="helper")
    expect(row.locator(".mcp-tools")).to_have_text("Discovery unknown")
    expect(row).to_contain_text("token saved")
    assert TOKEN not in page.content()

    row.get_by_role("button", name="Discover now").click()
    status = row.locator("[role=status]")
    expect(status).to_have_text("Found 4 tools.")
    row_id = row.get_attribute("id")
    expect_in_sight(page, f"#{row_id} [role=status]")
    expect(row.locator(".mcp-tools")).to_have_text("Tools: echo, add, fail, hang — discovered just now")
    shot("discovered")
    assert axe_violations(page) == []

    row.get_by_role("button", name="Disable").click()
    expect(row.locator(".mcp-state")).to_have_text("disabled")
    expect(row.get_by_role("button", name="Enable")).to_be_visible()
    with live.client() as c:
        assert c.get("/api/mcp-servers").json()[0]["enabled"] is False

    row.get_by_role("button", name="Remove…").click()
    confirm = page.locator(f"#{row_id} [role=alert]")
    expect(confirm).to_contain_text("Remove helper?")
    expect_in_sight(page, f"#{row_id} [role=alert]")
    shot("confirm-remove")
    assert axe_violations(page) == []
    # "Keep it" leaves it there.
    confirm.get_by_role("button", name="Keep it").click()
    expect(page.locator(f"#{row_id} .mcp-name")).to_have_text("helper")
    with live.client() as c:
        assert len(c.get("/api/mcp-servers").json()) == 1

    page.locator(f"#{row_id}").get_by_role("button", name="Remove…").click()
    page.locator(f"#{row_id}").get_by_role("button", name="Remove for good").click()
    expect(page.locator(f"#{row_id}")).to_have_text("Removed helper.")
    expect_in_sight(page, f"#{row_id} [role=status]")
    with live.client() as c:
        assert c.get("/api/mcp-servers").json() == []
    assert no_script_runs == []


def test_a_refused_discovery_shows_why_in_the_row(page: Page, tmp_path, mcp, shot):
    with LiveSugo(tmp_path / "strict") as strict:  # no SUGO_FETCH_ALLOW
        with strict.client() as c:
            c.post("/api/mcp-servers", json={"name": "local", "url": mcp.url}).raise_for_status()
        page.goto(strict.url + "/settings/mcp")
        row = page.locator(".mcp-server").filter(has_text="local")
        row.get_by_role("button", name="Discover now").click()
        status = row.locator("[role=status]")
        expect(status).to_contain_text("not fetched")
        expect_in_sight(page, f"#{row.get_attribute('id')} [role=status]")
        expect(row.locator(".mcp-tools")).to_have_text("Discovery unknown")
        shot("refused")
    assert mcp.auth_headers == []
