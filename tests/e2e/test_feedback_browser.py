"""Issue 11 item 2: feedback is seen where the user is. After a Save the message is in the
viewport (not at the top of a form scrolled far away); a Test connection result is in the viewport
and not under the sticky Save bar; a field the browser refuses is scrolled into view, focused, not
under the sticky bar, with its message beside it. Desktop and phone."""

from playwright.sync_api import Locator, Page, expect

# True when the element's box lies inside the viewport and the element (or something inside it) is
# what is drawn at its centre: a box hidden under the sticky Save bar or a nav bar fails.
SEEN = """el => {
  const r = el.getBoundingClientRect();
  if (r.width === 0 || r.height === 0) return "no box";
  if (r.top < 0 || r.left < 0 || r.bottom > innerHeight || r.right > innerWidth)
    return `outside the viewport: ${Math.round(r.top)}..${Math.round(r.bottom)} of ${innerHeight}`;
  const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
  if (hit !== el && !el.contains(hit)) return "covered by " + (hit && (hit.className || hit.tagName));
  return "seen";
}"""


def seen(locator: Locator) -> str:
    return locator.evaluate(SEEN)


def _chat(live, models) -> dict:
    with live.client() as c:
        c.post("/api/connections", json={"name": "Local", "base_url": models.base_url, "model": "test-model"})
        char = c.post("/api/characters", json={"name": "Aria", "first_mes": "The harbour is quiet."}).json()
        return c.post("/api/chats", json={"character_ids": [char["id"]]}).json()


def _scroll_to_end(page: Page, scroller: str | None) -> None:
    if scroller:
        page.locator(scroller).evaluate(
            "el => { el.style.scrollBehavior = 'auto'; el.scrollTop = el.scrollHeight; }"
        )
    else:
        page.evaluate("window.scrollTo(0, document.documentElement.scrollHeight)")


def test_saved_in_chat_settings_is_seen_in_the_panel_and_on_the_page(page: Page, live, models, shot):
    chat = _chat(live, models)
    page.goto(f"{live.url}/chats/{chat['id']}")
    page.click("#settings-button")
    panel = page.locator("#settings-panel")
    expect(panel.locator("#chat-settings-form")).to_be_visible()
    _scroll_to_end(page, "#panel-body")
    panel.locator("input[name=name]").evaluate("el => el.value = 'Harbour talk'")
    panel.get_by_role("button", name="Save settings").click()
    status = panel.get_by_role("status").filter(has_text="Saved.")
    expect(status).to_be_visible()
    assert seen(status) == "seen"
    shot("panel-saved")

    page.goto(f"{live.url}/chats/{chat['id']}/settings")
    _scroll_to_end(page, None)
    page.get_by_role("button", name="Save settings").click()
    status = page.get_by_role("status").filter(has_text="Saved.")
    expect(status).to_be_visible()
    assert seen(status) == "seen"
    shot("page-saved")


def _scroll_to(page: Page, scroller: str | None, where: str) -> None:
    if where == "end":
        _scroll_to_end(page, scroller)
    elif scroller:
        page.locator(scroller).evaluate("el => { el.style.scrollBehavior = 'auto'; el.scrollTop = 0; }")
    else:
        page.evaluate("window.scrollTo(0, 0)")


def _refuse_limit(page: Page, scope, scroller: str | None) -> None:
    """Save with the limit at 10, from the top of the form (the field below the fold) and from its
    end (the field above): each time it ends focused, in view, clear of the bars, its message beside."""
    limit = scope.locator("input[name=recent_message_limit]")
    limit.fill("10")
    for where in ("top", "end"):
        page.locator("body").evaluate("b => document.activeElement.blur()")
        _scroll_to(page, scroller, where)
        scope.get_by_role("button", name="Save settings").click()
        expect(limit).to_be_focused()
        assert seen(limit) == "seen", where
        error = scope.locator(".field-error")
        expect(error).to_contain_text("greater than or equal to 20")
        assert seen(error) == "seen", where


def test_an_invalid_limit_is_focused_in_view_with_its_message(page: Page, live, models, shot):
    chat = _chat(live, models)
    page.goto(f"{live.url}/chats/{chat['id']}")
    page.click("#settings-button")
    panel = page.locator("#settings-panel")
    expect(panel.locator("#chat-settings-form")).to_be_visible()
    _refuse_limit(page, panel, "#panel-body")
    shot("panel-invalid")
    # Nothing was saved, and a valid value takes the message away.
    with live.client() as c:
        assert c.get(f"/api/chats/{chat['id']}").json()["settings"]["recent_message_limit"] != 10
    panel.locator("input[name=recent_message_limit]").fill("30")
    expect(panel.locator(".field-error")).to_have_count(0)

    page.goto(f"{live.url}/chats/{chat['id']}/settings")
    _refuse_limit(page, page.locator("#chat-settings-form"), None)
    shot("page-invalid")


def test_test_connection_result_is_seen_beside_its_button(page: Page, live, models, shot):
    page.goto(live.url + "/connections/new?preset=custom")
    page.fill("input[name=name]", "Local")
    page.fill("input[name=base_url]", models.base_url)
    for summary in page.locator("#connection-form details > summary").all():
        summary.click()  # every section open: the form as long as it gets
    page.get_by_role("button", name="Test connection").click()
    result = page.locator(".test-result")
    expect(result).to_contain_text("Connected")
    assert seen(result) == "seen"
    shot("test-result")
    # A failing test is seen too.
    page.fill("input[name=base_url]", "http://127.0.0.1:9/v1")
    page.get_by_role("button", name="Test connection").click()
    expect(page.locator(".test-result.notice-error")).to_be_visible()
    assert seen(page.locator(".test-result")) == "seen"


def test_saves_on_the_character_and_lore_entry_forms_are_seen(page: Page, live, models, shot):
    with live.client() as c:
        char = c.post("/api/characters", json={"name": "Aria", "description": "Keeps the harbour."}).json()
        book = c.post("/api/lorebooks", json={"name": "Vellmar"}).json()
        for i in range(30):
            c.post(
                f"/api/lorebooks/{book['id']}/entries",
                json={"title": f"Place {i}", "keys": [f"place{i}"], "content": f"Place {i} of Vellmar."},
            )
    page.goto(f"{live.url}/characters/{char['id']}")
    page.locator("details > summary", has_text="Advanced").click()
    _scroll_to_end(page, None)
    page.get_by_role("button", name="Save", exact=True).click()
    status = page.get_by_role("status").filter(has_text="Saved.")
    expect(status).to_be_visible()
    assert seen(status) == "seen"
    shot("character-saved")

    page.goto(f"{live.url}/lorebooks/{book['id']}/entries/new")
    page.fill("input[name=title]", "Tobiah")
    page.fill("#entry-keys", "Tobiah")
    page.fill("#entry-content", "Tobiah keeps the lighthouse.")
    page.locator("#entry-form details").evaluate_all("els => els.forEach(d => d.open = true)")
    _scroll_to_end(page, None)
    page.get_by_role("button", name="Save entry").click()
    status = page.locator("#book-message")
    expect(status).to_have_text("Entry added.")
    assert seen(status) == "seen"
    shot("entry-saved")


def test_saving_and_adding_personas_is_seen_beside_the_button(page: Page, live, shot):
    with live.client() as c:
        for name in ("Rowan", "Mira", "Tobiah", "Edda", "Kasimir", "Lune"):
            c.post("/api/personas", json={"name": name, "description": f"{name} walks the harbour at night."})
    page.goto(live.url + "/personas")
    last = page.locator(".persona-card").last
    last.locator("textarea[name=description]").fill("Keeps the tide tables.")
    last.get_by_role("button", name="Save").click()
    status = page.locator("#persona-list").get_by_role("status")
    expect(status).to_have_text("Saved.")
    assert seen(status) == "seen"
    assert page.locator(".persona-card").last.get_by_role("status").count() == 1  # beside the one saved
    shot("persona-saved")

    form = page.locator("#new-persona-form")
    form.locator("input[name=name]").fill("Quill")
    form.get_by_role("button", name="Add persona").click()
    added = page.locator("#new-persona-form").get_by_role("status")
    expect(added).to_have_text("Added Quill.")
    assert seen(added) == "seen"
    expect(page.locator(".persona-card")).to_have_count(7)
    shot("persona-added")
