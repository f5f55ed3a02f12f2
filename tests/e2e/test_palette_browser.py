"""Issue 29's `/` palette in a real browser, at desktop and phone sizes: typing `/` in the message box
lists every registered command with its one-line description, the text after the slash filters the
list, and the keyboard chooses and runs a command (/refresh puts its mark in the message list, in
sight); a command that needs more is completed instead; Esc closes the list; a tap runs one."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.conftest import add_character, add_connection, new_chat
from tests.e2e.test_accessibility_browser import _violations
from tests.support.sight import expect_in_sight


def _chat(live, models) -> int:
    with live.client() as api:
        add_connection(api, models)
        chat = new_chat(api, [add_character(api, "Bram", first_mes="Hm?")["id"]])
    return chat["id"]


def _chosen(page: Page) -> str | None:
    """The name of the command the message box points at (aria-activedescendant), None if none."""
    return page.evaluate(
        "() => document.getElementById(document.getElementById('composer-input')"
        ".getAttribute('aria-activedescendant'))?.dataset.name ?? null"
    )


def test_slash_lists_the_commands_and_arrows_run_refresh(page: Page, live, models, shot, screen):
    chat_id = _chat(live, models)
    page.goto(f"{live.url}/chats/{chat_id}")
    box = page.locator("#composer-input")
    expect(box).to_have_attribute("placeholder", "Message Bram… / for commands")
    box.focus()
    page.keyboard.type("/")
    palette = page.locator("#slash-palette")
    expect(palette).to_be_visible()
    options = page.locator("#slash-list [role=option]:visible")
    expect(options).to_have_count(4)
    expect(options.locator(".slash-usage")).to_have_text(
        ["/refresh", "/remember TEXT", "/memory", "/forget N"]
    )
    for description in options.locator(".slash-desc").all():
        assert description.inner_text().strip().endswith(".")
    expect_in_sight(page, "#slash-palette")
    assert _chosen(page) is None  # only "/": nothing chosen yet, so a stray Enter runs nothing
    page.keyboard.press("Enter")
    expect(box).to_have_value("/")
    assert _violations(page) == set()
    page.keyboard.press("ArrowDown")  # a chosen option, in both themes
    for theme in ("light", "dark"):
        page.evaluate("t => document.documentElement.dataset.theme = t", theme)
        assert _violations(page) == set(), theme
    page.keyboard.press("ArrowUp")
    shot("palette")

    # Down to /refresh, then Enter runs it: the mark lands at the end of the chat, in sight.
    for _ in range(4):
        if _chosen(page) == "refresh":
            break
        page.keyboard.press("ArrowDown")
    assert _chosen(page) == "refresh"
    expect(page.locator("#slash-option-refresh")).to_have_attribute("aria-selected", "true")
    page.keyboard.press("Enter")
    expect(page.locator("#message-list .refresh-mark")).to_have_count(1)
    expect_in_sight(page, "#message-list .refresh-mark")
    expect(palette).to_be_hidden()
    expect(box).to_have_value("")
    shot("refreshed")


def test_typing_filters_and_enter_runs_the_first_match(page: Page, live, models, screen):
    chat_id = _chat(live, models)
    page.goto(f"{live.url}/chats/{chat_id}")
    box = page.locator("#composer-input")
    box.focus()
    page.keyboard.type("/ref")
    options = page.locator("#slash-list [role=option]:visible")
    expect(options).to_have_count(1)
    expect(options).to_contain_text("/refresh")
    assert _chosen(page) == "refresh"
    page.keyboard.press("Enter")
    expect(page.locator("#message-list .refresh-mark")).to_have_count(1)
    expect_in_sight(page, "#message-list .refresh-mark")

    # An alias finds its command; Tab completes one that takes an argument, for the note to follow.
    page.keyboard.type("/lemb")
    expect(options).to_have_count(1)
    expect(options).to_contain_text("/remember TEXT")
    page.keyboard.press("Tab")
    expect(box).to_have_value("/remember ")
    expect(page.locator("#slash-palette")).to_be_hidden()
    expect(box).to_be_focused()
    page.keyboard.type("the anvil is cold")
    page.locator("#send-button").click()
    expect(page.locator("#message-list .local-notice")).to_have_count(1)
    expect(page.locator("#message-list .local-notice")).to_contain_text("note 1 of 30")

    # A command the filter starts comes before one that merely contains it: "/mem" is /memory.
    box.focus()
    page.keyboard.type("/mem")
    expect(options).to_have_count(2)
    assert _chosen(page) == "memory"
    page.keyboard.press("Escape")
    box.fill("")

    # Nothing matches: the list says so, and Esc closes it.
    box.focus()
    page.keyboard.type("/zzz")
    expect(page.locator("#slash-empty")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator("#slash-palette")).to_be_hidden()
    expect(box).to_have_value("/zzz")


def test_a_tap_on_a_command_runs_it(page: Page, live, models, screen):
    chat_id = _chat(live, models)
    page.goto(f"{live.url}/chats/{chat_id}")
    page.locator("#composer-input").fill("/")
    option = page.locator("#slash-option-memory")
    expect(option).to_be_visible()
    if screen == "phone":
        option.tap()
    else:
        option.click()
    expect(page.locator("#message-list .local-notice")).to_have_count(1)
    expect_in_sight(page, "#message-list .local-notice:last-child")
    expect(page.locator("#slash-palette")).to_be_hidden()
