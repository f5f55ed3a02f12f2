"""Presets in the browser (issue 28): make one from the default, add a text section and move it to the top
with the keyboard, give it a choice, pick that choice in a chat's Chat Settings and read the result in Peek
Prompt; a reply started with the composer's "Start the reply with". Desktop and phone."""

import re

from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Page, expect

AXE = Axe().axe_script


def _chat(live, models) -> int:
    with live.client() as c:
        c.post("/api/connections", json={"name": "T", "base_url": models.base_url, "model": "test-model"})
        aria = c.post("/api/characters", json={"name": "Aria", "first_mes": "Aria waves."}).json()
        return c.post("/api/chats", json={"character_ids": [aria["id"]], "name": "Tavern"}).json()["id"]


def test_make_a_preset_reorder_it_by_keyboard_pick_its_choice_and_see_it_in_peek(
    page: Page, live, models, shot
):
    chat_id = _chat(live, models)
    page.goto(f"{live.url}/presets")
    expect(page.get_by_text("No presets of your own yet")).to_be_visible()
    shot("presets-empty")
    page.get_by_role("button", name="New preset").click()
    page.wait_for_url(re.compile(r"/presets/\d+$"))
    page.get_by_label("Name", exact=True).fill("Close third")
    sections = page.locator("#preset-sections > li")
    count = sections.count()
    assert count > 10  # every marker of Sugo's default layout
    expect(sections.first.locator(".badge")).to_have_text("System, chat and character prompts")

    page.get_by_role("button", name="Add a text section").click()
    added = sections.last
    name = added.locator("[name=section_name]")
    expect(name).to_be_focused()
    name.fill("Role")
    added.get_by_label("Text", exact=True).fill("Narrate in {{pov}}.")
    # Alt+↑ from a field of the section moves it up; the field keeps the focus all the way.
    field = name.element_handle()  # the locator's "last" moves with the section
    field.focus()
    for _ in range(count):
        page.keyboard.press("Alt+ArrowUp")
    assert page.evaluate("(el) => document.activeElement === el", field)
    expect(sections.first.locator("[name=section_name]")).to_have_value("Role")
    expect(page.locator("#preset-move-status")).to_have_text(f"Role: position 1 of {count + 1}")
    # The arrow buttons move it too, and keep their focus.
    down = sections.first.get_by_role("button", name=re.compile("down$"))
    down.focus()
    page.keyboard.press("Enter")
    expect(sections.nth(1).locator("[name=section_name]")).to_have_value("Role")
    up = sections.nth(1).get_by_role("button", name=re.compile("up$"))
    expect(up).to_be_visible()
    up.click()
    expect(sections.first.locator("[name=section_name]")).to_have_value("Role")

    page.get_by_role("button", name="Add a choice").click()
    choice = page.locator("[data-choice]").first
    choice.get_by_label("Variable").fill("pov")
    choice.get_by_label("Question").fill("Point of view?")
    for label, text in (("Second", "second person"), ("Third", "third person")):
        choice.get_by_role("button", name="Add an option").click()
        option = choice.locator("[data-option]").last
        option.get_by_label("Option label").fill(label)
        option.get_by_label("Option text").fill(text)
    shot("preset-editor")
    page.get_by_role("button", name="Save preset").click()
    expect(page.get_by_text("Saved.")).to_be_in_viewport()
    expect(sections.first.locator("[name=section_name]")).to_have_value("Role")
    _no_axe_violations(page)

    page.goto(f"{live.url}/chats/{chat_id}")
    page.click("#settings-button")
    panel = page.locator("#settings-panel")
    panel.get_by_label("Prompt layout").select_option(label="Close third")
    third = panel.get_by_role("radio", name="Third")
    expect(third).to_be_visible()
    expect(panel.get_by_role("radio", name="Second")).to_be_checked()  # no pick yet: the first option
    third.check()
    third.scroll_into_view_if_needed()
    shot("chat-settings-choice")
    panel.get_by_role("button", name="Save settings").click()
    expect(panel.get_by_text("Saved.")).to_be_in_viewport()
    expect(panel.get_by_role("radio", name="Third")).to_be_checked()
    panel.get_by_role("button", name="Close Chat Settings").click()

    page.click("#peek-button")
    dialog = page.locator("#peek-dialog")
    expect(dialog.locator(".prompt-blocks")).to_contain_text("Narrate in third person.")
    shot("peek-preset")


def test_a_reply_starts_with_the_composers_words(page: Page, live, models, shot):
    chat_id = _chat(live, models)
    page.goto(f"{live.url}/chats/{chat_id}")
    page.click("#more-button")
    page.get_by_role("menuitem", name="Start the reply with…").click()
    start = page.get_by_label("Replies start with")
    expect(start).to_be_focused()
    start.fill("*Aria smiles*")
    models.script(" and pours the tea.")
    page.fill("#composer-input", "Tea?")
    page.click("#send-button")
    last = page.locator("article.msg-assistant").last
    expect(last).to_contain_text("Aria smiles and pours the tea.")
    expect(last).to_be_in_viewport()
    assert models.last_request.json["messages"][-1] == {"role": "assistant", "content": "*Aria smiles*"}
    shot("start-with")


def _no_axe_violations(page: Page) -> None:
    page.evaluate(AXE)
    found = page.evaluate("() => axe.run(document, {resultTypes: ['violations']})")["violations"]
    assert not [f"{v['id']}: {[n['target'] for n in v['nodes']]}" for v in found]
