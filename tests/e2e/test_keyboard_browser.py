"""Issue 21 item 16, the chat by keyboard, desktop and phone: nothing had focus when a chat opened, there
was no skip link, and every message's buttons were Tab stops of their own (259 Tabs from the top of a
60-message chat to the message box). Now the desktop opens with the message box focused (a phone does
not: focus would open its keyboard), a skip link is the first Tab stop, and each message is one Tab stop
whose buttons the arrow keys walk."""

from playwright.sync_api import Page, expect
from sqlmodel import Session

from app.chats.service import new_message

ACTIVE_ID = "() => document.activeElement && (document.activeElement.id || document.activeElement.className)"


def _chat(live, messages: int = 60) -> tuple[int, list[int]]:
    """A chat of `messages` messages (the greeting first, then character and user in turn, a reply last)."""
    with live.client() as c:
        char = c.post("/api/characters", json={"name": "Aria", "first_mes": "The road is long."}).json()
        chat = c.post("/api/chats", json={"character_ids": [char["id"]], "name": "Road"}).json()
    with Session(live.engine) as s:
        for i in range(2, messages + 1):
            user = i % 2 == 1  # the reply comes last
            s.add(
                new_message(
                    chat["id"],
                    "user" if user else "assistant",
                    "You" if user else "Aria",
                    [f"Step {i}: we walk on along the coast road."],
                    character_id=None if user else char["id"],
                )
            )
        s.commit()
    with live.client() as c:
        ids = [m["id"] for m in c.get(f"/api/chats/{chat['id']}/messages").json()]
    assert len(ids) == messages
    return chat["id"], ids


def _opened(page: Page, live, chat_id: int) -> None:
    page.goto(f"{live.url}/chats/{chat_id}")
    expect(page.locator("article.msg")).to_have_count(60)
    # The numbers are written by the same start-up code that focuses (or not) the message box, just before.
    expect(page.locator("article.msg").last.locator(".msg-num")).to_have_text("#60")


def test_the_message_box_is_one_tab_away_and_focused_on_a_desktop(page: Page, live, screen, shot):
    chat_id, _ = _chat(live)
    _opened(page, live, chat_id)
    composer = page.locator("#composer-input")
    if screen == "desktop":
        expect(composer).to_be_focused()
        page.keyboard.type("Hello")  # typed straight in, no click
        expect(composer).to_have_value("Hello")
        composer.fill("")
        # Counted backwards from the message box to the top of the page: every stop on the way.
        stops = 0
        while page.evaluate("() => !document.activeElement.classList.contains('skip-link')"):
            page.keyboard.press("Shift+Tab")
            stops += 1
            assert stops < 300, page.evaluate(ACTIVE_ID)
    else:
        expect(composer).not_to_be_focused()
        assert page.evaluate("() => document.activeElement === document.body")
        stops = None
    # From the top: the first Tab reaches the skip link, shown; Enter puts focus in the message box.
    page.evaluate("() => document.activeElement.blur()")
    page.goto(f"{live.url}/chats/{chat_id}")
    expect(page.locator("article.msg").last.locator(".msg-num")).to_have_text("#60")
    if screen == "desktop":
        page.locator("#chat-name").click()  # the focus leaves the message box, as a reader's click would
    else:
        page.keyboard.press("Tab")
        skip = page.locator(".skip-link")
        expect(skip).to_be_focused()
        expect(skip).to_have_text("Skip to the message box")
        expect(skip).to_be_in_viewport(ratio=1)
        shot("skip-link")
        page.keyboard.press("Enter")
        expect(composer).to_be_focused()
        # Counted forwards from the top, without the skip link: one stop per message, not four or five.
        page.evaluate("() => document.activeElement.blur()")
        page.goto(f"{live.url}/chats/{chat_id}")
        expect(page.locator("article.msg").last.locator(".msg-num")).to_have_text("#60")
        stops = 0
        while page.evaluate("() => document.activeElement.id !== 'composer-input'"):
            page.keyboard.press("Tab")
            stops += 1
            assert stops < 300, page.evaluate(ACTIVE_ID)
    # 60 messages, the menu and the chat's header: about one stop per message (259 before).
    assert stops <= 60 + 20, stops


def test_the_skip_link_goes_to_the_message_box(page: Page, live, screen):
    chat_id, _ = _chat(live)
    _opened(page, live, chat_id)
    page.locator("#chat-name").click()
    skip = page.locator(".skip-link")
    skip.focus()
    expect(skip).to_be_in_viewport(ratio=1)
    skip.press("Enter")
    expect(page.locator("#composer-input")).to_be_focused()
    assert page.url.endswith(f"/chats/{chat_id}")  # no fragment left in the address


def test_the_arrow_keys_walk_a_messages_buttons_and_tab_leaves_it(page: Page, live, screen, shot):
    chat_id, ids = _chat(live)
    _opened(page, live, chat_id)
    one, two = page.locator(f"#msg-{ids[-3]}"), page.locator(f"#msg-{ids[-2]}")
    # One stop per message: only the toolbar's first button takes Tab.
    assert one.locator('[tabindex="0"]').count() == 1
    edit = one.get_by_role("button", name="Edit message")
    expect(edit).to_have_attribute("tabindex", "0")
    expect(one.get_by_role("toolbar", name="Message actions")).to_have_count(1)
    edit.focus()
    page.keyboard.press("ArrowRight")
    expect(one.get_by_role("button", name="Hide message")).to_be_focused()
    page.keyboard.press("ArrowRight")
    expect(one.get_by_role("button", name="Branch from here")).to_be_focused()
    page.keyboard.press("End")
    expect(one.get_by_role("button", name="Delete message")).to_be_focused()
    page.keyboard.press("ArrowRight")  # round to the first
    expect(edit).to_be_focused()
    page.keyboard.press("ArrowLeft")
    expect(one.get_by_role("button", name="Delete message")).to_be_focused()
    one.scroll_into_view_if_needed()
    shot("toolbar-focused")
    # Tab leaves the message for the next one's stop; Shift+Tab comes back to the button used last.
    page.keyboard.press("Tab")
    expect(two.get_by_role("button", name="Edit message")).to_be_focused()
    page.keyboard.press("Shift+Tab")
    expect(one.get_by_role("button", name="Delete message")).to_be_focused()
    expect(edit).to_have_attribute("tabindex", "-1")

    # A button that re-renders its message (Hide) keeps the focus on that message's button, now Unhide.
    page.keyboard.press("Home")
    page.keyboard.press("ArrowRight")
    expect(one.get_by_role("button", name="Hide message")).to_be_focused()
    page.keyboard.press("Enter")
    expect(one.get_by_role("button", name="Unhide message")).to_be_focused()
    expect(one.get_by_role("button", name="Unhide message")).to_have_attribute("tabindex", "0")

    # The last reply's version arrow is one of its buttons too, reached by the arrows, not by Tab.
    last = page.locator(f"#msg-{ids[-1]}")
    last.get_by_role("button", name="Edit message").focus()
    page.keyboard.press("End")
    expect(last.get_by_role("button", name="Generate another version")).to_be_focused()
    expect(last.get_by_role("button", name="Generate another version")).to_have_attribute("tabindex", "0")
    page.keyboard.press("Tab")  # out of the message list (to the notice's link: this chat has no connection)
    assert page.evaluate("() => !document.activeElement.closest('#message-list')"), page.evaluate(ACTIVE_ID)
