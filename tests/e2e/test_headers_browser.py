"""The chat page under its Content-Security-Policy: the theme bootstrap (allowed by its hash), htmx
and app.js run with no violation, and markup in a message, quoted or not, stays inert text."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.support.model_server import Reply

PAYLOAD = (
    '"<img src=x onerror=window.__pwned=1>" then <script>window.__pwned=2</script> and '
    '"</span><img src=x onerror=window.__pwned=3>" *end*'
)
REPORT_VIOLATIONS = (
    "window.__violations = [];"
    "document.addEventListener('securitypolicyviolation',"
    " e => window.__violations.push(e.violatedDirective + ' ' + e.blockedURI));"
)


def test_the_chat_page_works_under_the_policy_and_quoted_markup_stays_inert(
    page: Page, live, models, shot, no_script_runs
):
    with live.client() as c:
        c.post("/api/connections", json={"name": "Local", "base_url": models.base_url, "model": "test-model"})
        char = c.post("/api/characters", json={"name": "Vex", "first_mes": '*Vex nods.* "Ask away."'}).json()
        chat = c.post("/api/chats", json={"character_ids": [char["id"]]}).json()
    console: list[str] = []
    page.on("console", lambda m: console.append(m.text) if m.type in {"error", "warning"} else None)
    page.add_init_script(REPORT_VIOLATIONS)
    page.add_init_script("localStorage.setItem('sugo-theme', 'light')")

    response = page.goto(f"{live.url}/chats/{chat['id']}")
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
    # The inline bootstrap ran (its hash is allowed): the saved theme is applied.
    assert page.evaluate("document.documentElement.dataset.theme") == "light"

    models.script(Reply(text=PAYLOAD, chunk_size=6, delay_s=0.01))
    page.fill("#composer-input", PAYLOAD)
    page.click("#send-button")  # app.js streams the reply
    reply = page.locator("article.msg-assistant").last
    expect(page.locator("article.msg-assistant")).to_have_count(2)
    expect(reply.locator(".msg-text em")).to_have_text("end")  # rendered by the server once finished
    for text in (reply.locator(".msg-text"), page.locator("article.msg-user .msg-text")):
        expect(text.locator("span.dialogue")).to_have_count(2)
        expect(text.locator("span.dialogue").first).to_have_text('"<img src=x onerror=window.__pwned=1>"')
        expect(text.locator("img, script")).to_have_count(0)
    page.reload()
    expect(page.locator("article.msg")).to_have_count(3)
    # htmx under the policy: hiding a message swaps it for its new version.
    page.locator("article.msg-user").hover()
    page.locator("article.msg-user").get_by_role("button", name="Hide message").click()
    expect(page.locator("article.msg-user .badge-hidden")).to_be_visible()
    shot("chat")

    page.wait_for_timeout(300)
    assert page.evaluate("window.__pwned") is None and no_script_runs == []
    assert page.evaluate("window.__violations") == []
    assert not [m for m in console if "Content Security Policy" in m or "Refused to" in m], console
