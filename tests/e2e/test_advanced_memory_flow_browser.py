"""Issue 14, acceptance 4, as one user's path at desktop and phone sizes: turn Advanced Memory on, watch
Prepare existing history's progress, open Access memories and edit a summary, run Fix on a scene whose
message changed, then read the memory receipt under a new reply."""

import threading

from playwright.sync_api import Page, expect

from tests.e2e.test_scenes_settings_browser import ENDS, SCENES, _chat, _open, _scenes
from tests.integration.test_scene_prepare import _ends, _recap
from tests.support.model_server import Reply


def test_enable_prepare_access_edit_fix_and_read_a_receipt(page: Page, live, models, shot):
    chat_id = _chat(live, models)

    # Advanced Memory on, saved.
    section = _open(page, live, chat_id)
    section.locator("#advanced-memory-on").check()
    page.locator("#chat-settings-form").get_by_role("button", name="Save settings").click()
    expect(page.locator("#chat-settings-form .notice-ok")).to_be_visible()

    # Prepare existing history: its steps on screen, then the scenes written.
    section = _open(page, live, chat_id)
    # The first window and the first recap are held at the model until the page has shown their step.
    finding, recapping = threading.Event(), threading.Event()
    models.script(
        Reply(_ends(ENDS[0]), gate=finding),
        *[_ends(e) for e in ENDS[1:]],
        Reply(_recap(1), gate=recapping),
        _recap(2),
        _recap(3),
    )
    section.locator("#scenes-prepare-start").click()
    expect(section.locator("#scenes-prepare-step")).to_have_text("Finding scenes: messages 1–10 of 30")
    finding.set()
    expect(section.locator("#scenes-prepare-step")).to_have_text("Writing recap 1 of 3")
    recapping.set()
    expect(section.locator("#scenes-prepare-done")).to_contain_text(
        "History prepared: 3 scenes, 3 recaps written."
    )
    assert _scenes(live, chat_id) == [(a, b, "written") for a, b in SCENES]

    # Access memories: edit the first scene's summary.
    section.locator("#scenes-link").click()
    cards = page.locator("#scene-list .scene-card")
    expect(cards).to_have_count(3)
    first = cards.nth(0)
    first.get_by_role("button", name="Edit summary").click()
    first.locator("textarea[name=summary]").fill(
        "Aria and the traveller set out along the long road at dawn."
    )
    first.get_by_role("button", name="Save").click()
    expect(first.locator(".scene-manual")).to_have_text("Manually edited")
    shot("edited")

    # A message of the second scene changes: a problem; Fix recaps it again (the edited one is left alone).
    with live.client() as c:
        messages = c.get(f"/api/chats/{chat_id}/messages").json()
        assert (
            c.patch(
                f"/api/chats/{chat_id}/messages/{messages[11]['id']}",
                json={"content": "Step 12: we find a hidden ford."},
            ).status_code
            == 200
        )
    section = _open(page, live, chat_id)
    problems = page.locator("#scenes-problems")
    expect(problems.locator("#scenes-problems-list li")).to_have_count(1)
    models.script('{"summary": "Aria and the traveller found a hidden ford.", "participants": ["Aria"]}')
    problems.locator("#scenes-fix").click()
    expect(page.locator("#scenes-fix-done")).to_have_text("Advanced Memory fixed 1 scene.")
    problems.scroll_into_view_if_needed()
    shot("fixed")
    with live.client() as c:
        recaps = [s["summary"] for s in c.get(f"/api/chats/{chat_id}/scenes").json()]
    assert recaps[:2] == [
        "Aria and the traveller set out along the long road at dawn.",
        "Aria and the traveller found a hidden ford.",
    ]

    # A new reply carries its memory receipt.
    page.goto(f"{live.url}/chats/{chat_id}")
    models.script("We walk on toward the hills.")
    page.fill("#composer-input", "Where does the road lead?")
    page.click("#send-button")
    reply = page.locator("article.msg-assistant").last
    expect(reply.locator(".msg-text")).to_contain_text("We walk on toward the hills.")
    receipt = reply.locator(".receipt")
    expect(receipt.locator("summary")).to_contain_text("Memory · Context: ~")
    expect(receipt.locator("summary")).to_contain_text("of 65,000 tokens")
    receipt.locator("summary").click()
    expect(receipt.locator("li").first).to_be_visible()
    receipt.scroll_into_view_if_needed()
    shot("receipt")
