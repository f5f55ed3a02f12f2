"""Issue 29's reading comfort in a real browser, at desktop and phone sizes: the Reading panel (the
header's button on a desktop, the More menu under the thumb on a phone) sets the text width and size,
bubbles or a book page, and hides names and times; each change applies at once, is kept on this device
and is back after a reload, before any of the page's script runs (base.html's bootstrap). The computed
styles are checked, not only the attributes."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.conftest import add_character, add_connection, new_chat
from tests.e2e.test_accessibility_browser import _violations
from tests.support.sight import expect_in_sight

# What the page looks like, read from computed styles: the message column's text width, the reply's
# font size, the user's bubble, the avatars, and whether names and times take any room.
LOOK = """() => {
  const list = document.getElementById('message-list'), cs = getComputedStyle(list);
  const reply = document.querySelector('article.msg-assistant .msg-text');
  const mine = document.querySelector('article.msg-user .msg-body');
  const name = document.querySelector('article.msg-assistant .msg-name').getBoundingClientRect();
  const time = document.querySelector('article.msg-assistant .msg-head time');
  return {
    column: list.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight),
    size: parseFloat(getComputedStyle(reply).fontSize),
    family: getComputedStyle(reply).fontFamily,
    bubble: getComputedStyle(mine).backgroundColor,
    avatar: getComputedStyle(document.querySelector('article.msg-assistant > .avatar')).display,
    name: Math.round(name.width * name.height),
    time: getComputedStyle(time).display,
  };
}"""


def _chat(live, models) -> int:
    with live.client() as api:
        add_connection(api, models)
        chat = new_chat(api, [add_character(api, "Aria", first_mes="The road is long.")["id"]])
        r = api.post(
            f"/api/chats/{chat['id']}/generate", json={"action": "send", "content": "Shall we rest?"}
        )
        assert "event: done" in r.text, r.text
    return chat["id"]


def _open_reading(page: Page, screen: str) -> None:
    if screen == "phone":
        page.locator("#more-button").tap()
        page.locator("#reading-menu-item").tap()
    else:
        page.locator("#reading-button").click()
    expect(page.locator("#reading-panel")).to_be_visible()
    expect_in_sight(page, "#reading-panel")


def _press(target, screen: str) -> None:
    """A tap on a phone, a click on a desktop."""
    if screen == "phone":
        target.tap()
    else:
        target.click()


def _pick(page: Page, screen: str, label: str) -> None:
    _press(page.locator("#reading-form label", has_text=label), screen)


def test_reading_settings_apply_at_once_and_survive_a_reload(page: Page, live, models, shot, screen):
    chat_id = _chat(live, models)
    page.goto(f"{live.url}/chats/{chat_id}")
    expect(page.locator("article.msg-assistant")).to_have_count(2)
    before = page.evaluate(LOOK)
    assert before["bubble"] != "rgba(0, 0, 0, 0)" and before["avatar"] != "none"
    assert before["name"] > 1 and before["time"] != "none"

    _open_reading(page, screen)
    # Keyboard first: focus is on the first group's choice; an arrow changes it, as in any radio group.
    # A phone has no width to choose (it is narrower than any column).
    if screen == "desktop":
        expect(page.locator("#reading-form input[name=width][value=normal]")).to_be_focused()
        page.keyboard.press("ArrowLeft")
        expect(page.locator("#reading-form input[name=width][value=narrow]")).to_be_checked()
        expect(page.locator("html")).to_have_attribute("data-reading-width", "narrow")
    else:
        expect(page.locator("#reading-form .reading-width")).to_be_hidden()
        expect(page.locator("#reading-form input[name=size][value=normal]")).to_be_focused()
        page.keyboard.press("ArrowRight")
        expect(page.locator("html")).to_have_attribute("data-font-size", "large")
    _pick(page, screen, "Larger")
    _pick(page, screen, "Book")
    expect(page.locator("html")).to_have_attribute("data-layout", "book")
    shot("book-with-names")
    for label in ("Names", "Times", "Backgrounds and character art"):
        _pick(page, screen, label)
    expect(page.locator("html")).to_have_attribute("data-scenery", "off")
    for theme in ("light", "dark"):
        page.evaluate("t => document.documentElement.dataset.theme = t", theme)
        assert _violations(page) == set(), theme
    shot("panel")
    page.keyboard.press("Escape")
    expect(page.locator("#reading-panel")).to_be_hidden()

    def check(look: dict) -> None:
        if screen == "desktop":
            assert look["column"] == 640 and before["column"] == 860, (before, look)
        else:  # the text keeps the phone's screen, less the book's margins
            assert 340 < look["column"] <= before["column"], (before, look)
        assert look["size"] > before["size"] * 1.25, (before, look)
        assert look["family"] != before["family"]  # the book's serif
        assert look["bubble"] == "rgba(0, 0, 0, 0)" and look["avatar"] == "none"
        assert look["name"] <= 1 and look["time"] == "none"

    check(page.evaluate(LOOK))
    shot("book")

    # After a reload, from base.html's bootstrap alone: app.js is held back, and all is as chosen.
    page.route("**/static/app.js", lambda route: route.abort())
    page.reload()
    expect(page.locator("article.msg-assistant")).to_have_count(2)
    html = page.locator("html")
    width = [("data-reading-width", "narrow")] if screen == "desktop" else []
    for name, value in [
        *width,
        ("data-font-size", "larger"),
        ("data-layout", "book"),
        ("data-hide-names", ""),
        ("data-hide-times", ""),
        ("data-scenery", "off"),
    ]:
        expect(html).to_have_attribute(name, value)
    check(page.evaluate(LOOK))
    page.unroute("**/static/app.js")

    # Back to the defaults: no attribute is left, and the bubbles are back after a reload.
    page.reload()
    _open_reading(page, screen)
    expect(page.locator("#reading-form input[name=layout][value=book]")).to_be_checked()
    for label in ("Normal", "Bubbles", "Names", "Times", "Backgrounds and character art"):
        for target in page.locator("#reading-form label", has_text=label).all():
            if not target.locator("input").is_checked():
                _press(target, screen)
    page.locator("#reading-close").click()
    page.reload()
    expect(page.locator("article.msg-assistant")).to_have_count(2)
    for name in (
        "data-reading-width",
        "data-font-size",
        "data-layout",
        "data-hide-names",
        "data-hide-times",
        "data-scenery",
    ):
        expect(html).not_to_have_attribute(name, re.compile(".*"))
    assert page.evaluate(LOOK) == before
