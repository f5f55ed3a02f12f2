"""Issue 24 in the browser, desktop and phone: a reply that called a tool shows a live line while the
tool runs, then the call folded under its text (name, time; arguments and result on opening), with the
tool's quiet notice in sight; the Tools & Permissions page saves its switches and the round cap and
refuses a cap out of range with the message in sight; a connection's Tools field says why tools
stopped being offered."""

import json
import threading

from playwright.sync_api import Page, expect
from pydantic import BaseModel, Field

from app.tools.registry import Tool, ToolResult
from tests.support.model_server import Reply


class _Args(BaseModel):
    place: str = Field(max_length=100)


def _forecast(release: threading.Event):
    def run(ctx, args: _Args) -> ToolResult:
        release.wait(20)  # the test looks at the page while the tool runs
        return ToolResult(f"Rain over {args.place}, <b>12 °C</b>", notice=f"Forecast read for {args.place}")

    return run


def _setup(page: Page, live, models, release: threading.Event) -> None:
    live.app.state.services.tools.add(
        Tool("weather", "The weather at a place.", _Args, _forecast(release), None, label="Weather")
    )
    with live.client() as c:
        c.post("/api/settings/tools", json={"deliberate": False}).raise_for_status()
        c.post(
            "/api/connections",
            json={"name": "Local", "base_url": models.base_url, "model": "test-model", "max_tokens": 200},
        ).raise_for_status()
        char = c.post("/api/characters", json={"name": "Aria", "first_mes": "Welcome, traveller."}).json()
        chat = c.post("/api/chats", json={"character_ids": [char["id"]]}).json()
    page.goto(f"{live.url}/chats/{chat['id']}")


def test_a_reply_with_a_tool_call_shows_it_live_then_folded(page: Page, live, models, shot, no_script_runs):
    release = threading.Event()
    _setup(page, live, models, release)
    call = {
        "id": "call_w",
        "type": "function",
        "function": {"name": "weather", "arguments": json.dumps({"place": "Vale"})},
    }
    models.script(
        Reply(text="Let me look outside.", tool_calls=[call]), Reply(text="It will rain in the Vale.")
    )
    try:
        page.fill("#composer-input", "Will it rain?")
        page.click("#send-button")
        reply = page.locator("article.msg-assistant").last
        live_line = reply.locator(".tool-live")
        expect(live_line).to_have_text("Using weather…")
        expect(live_line).to_be_in_viewport()
        shot("running")
    finally:
        release.set()
    expect(page.locator("#send-button")).to_be_visible()
    expect(reply.locator(".msg-text")).to_contain_text("It will rain in the Vale.")
    calls = reply.locator(".tool-calls")
    expect(calls.locator(".tool-notice")).to_have_text("Forecast read for Vale")
    expect(calls.locator(".tool-notice")).to_be_in_viewport()
    fold = calls.locator("details.tool-call")
    expect(fold.locator("summary")).to_contain_text("Weather")
    expect(fold.locator(".tool-call-body")).to_be_hidden()
    fold.locator("summary").click()
    body = fold.locator(".tool-call-body")
    expect(body).to_contain_text('"place": "Vale"')
    expect(body).to_contain_text("Rain over Vale, <b>12 °C</b>")  # a result is data: shown as text
    expect(body.locator("b")).to_have_count(0)
    expect(body).to_be_in_viewport()
    shot("opened")
    page.reload()
    expect(page.locator("article.msg-assistant").last.locator("details.tool-call summary")).to_contain_text(
        "Weather"
    )
    assert no_script_runs == []


def test_the_tools_and_permissions_page_saves_and_refuses_a_bad_cap(page: Page, live, shot):
    page.goto(f"{live.url}/settings/tools")
    expect(page.get_by_role("heading", name="Tools & Permissions")).to_be_visible()
    expect(page.locator('.tool-tabs a[aria-current="page"]')).to_have_text("Tools & Permissions")
    web = page.locator('input[name="perm_web_search"]')
    expect(web).not_to_be_checked()  # off by default
    expect(page.locator('input[name="perm_memory"]')).to_be_checked()
    web.check()
    page.fill('input[name="round_cap"]', "7")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("status")).to_have_text("Saved.")
    expect(page.get_by_role("status")).to_be_in_viewport()
    shot("saved")
    page.reload()
    expect(page.locator('input[name="perm_web_search"]')).to_be_checked()
    expect(page.locator('input[name="round_cap"]')).to_have_value("7")
    # Out of range: the browser's own check is bypassed to see the server's message.
    page.locator('input[name="round_cap"]').evaluate("el => { el.removeAttribute('max'); el.value = '50'; }")
    page.get_by_role("button", name="Save").click()
    toast = page.locator("#toasts")
    expect(toast).to_contain_text("20")
    expect(toast).to_be_in_viewport()
    shot("refused")
    with live.client() as c:
        assert c.get("/api/settings/tools").json()["round_cap"] == 7


def test_a_connection_says_why_tools_stopped_being_offered(page: Page, live, models, shot):
    models.refuse_tools = True
    live.app.state.services.tools.add(
        Tool("weather", "The weather at a place.", _Args, _forecast(threading.Event()), None)
    )
    with live.client() as c:
        c.post("/api/settings/tools", json={"deliberate": False}).raise_for_status()
        conn = c.post(
            "/api/connections",
            json={"name": "Old local", "base_url": models.base_url, "model": "test-model", "max_tokens": 50},
        ).json()
        char = c.post("/api/characters", json={"name": "Aria"}).json()
        chat = c.post("/api/chats", json={"character_ids": [char["id"]]}).json()
    models.script(Reply(text="Hello."))
    page.goto(f"{live.url}/chats/{chat['id']}")
    page.fill("#composer-input", "Hi")
    page.click("#send-button")
    reply = page.locator("article.msg-assistant").last
    expect(reply.locator(".tool-notice")).to_contain_text("refused tools")
    page.goto(f"{live.url}/connections/{conn['id']}")
    note = page.get_by_role("note").filter(has_text="Tools are not offered")
    note.scroll_into_view_if_needed()
    expect(note).to_contain_text("does not support tools")
    shot("refused")
    page.select_option('select[name="tools_mode"]', "on")
    page.get_by_role("button", name="Save").first.click()
    with live.client() as c:
        saved = c.get(f"/api/connections/{conn['id']}").json()
    assert saved["tools_mode"] == "on" and saved["tools_refused"] == ""
