"""Issue 14, Advanced Memory → Problems and Fix in the browser, desktop and phone: the accent dot on the
chat page's Chat Settings button and the notice announced once per set of problems, the problems listed
above the settings, Fix with its progress to "Advanced Memory fixed N scenes" (a hand-edited recap left
for review), Pause processing / Resume processing, and the same dot on Access memories."""

import json
import threading
from concurrent.futures import ThreadPoolExecutor

from playwright.sync_api import Page, expect

from tests.support.model_server import Reply
from tests.support.scenes import stored_scene


def _chat(live, models) -> int:
    with live.client() as c:
        r = c.post(
            "/api/connections",
            json={"name": "Local test", "base_url": models.base_url, "model": "test-model", "kind": "openai"},
        )
        assert r.status_code == 201, r.text
        char = c.post("/api/characters", json={"name": "Aria", "first_mes": "The road is long."}).json()
        chat = c.post("/api/chats", json={"character_ids": [char["id"]], "name": "Road"}).json()
        r = c.put(
            f"/api/chats/{chat['id']}/options",
            json={"settings": {"advanced_memory": True, "adv_check_interval": 100}},
        )
        assert r.status_code == 200, r.text
    chat_id = chat["id"]
    # Scene 1: its messages changed since the recap; scene 2: its recap failed; scene 3: edited by hand, changed.
    stored_scene(
        live,
        chat_id,
        [("You", "The bridge is out."), ("Aria", "We climb down.")],
        state="written",
        summary="They climbed down to the river.",
        fingerprint="written-from-older-messages",
    )
    stored_scene(
        live,
        chat_id,
        [("You", "Night falls."), ("Aria", "We camp.")],
        state="failed",
        reason="The helper's answer was not JSON.",
    )
    stored_scene(
        live,
        chat_id,
        [("You", "Morning."), ("Aria", "On we go.")],
        state="written",
        manual=True,
        summary="My own note: they set off at dawn.",
        fingerprint="written-from-older-messages",
    )
    return chat_id


def _recap(text: str, gate: threading.Event | None = None) -> Reply:
    return Reply(json.dumps({"summary": text, "participants": ["Aria"]}), gate=gate)


def test_problems_dot_notice_fix_and_pause(page: Page, live, models, shot, screen):
    chat_id = _chat(live, models)
    page.goto(f"{live.url}/chats/{chat_id}")
    expect(page.locator("#settings-button .problem-dot")).to_be_visible()
    notice = page.locator("#scene-problems-notice")
    expect(notice).to_contain_text("Advanced Memory: 3 scenes have problems — Fix in Chat Settings")
    shot("dot-and-notice")

    page.reload()  # the same set is announced once
    expect(page.locator("#settings-button .problem-dot")).to_be_visible()
    # Once this page has weighed the set (else a check for no notice proves nothing, and clearing the
    # memory below could come before it and be undone by it).
    expect(page.locator("#settings-button [data-announce-checked]")).to_have_count(1)
    expect(page.locator("#scene-problems-notice")).to_have_count(0)

    page.evaluate("localStorage.clear()")
    page.reload()
    page.locator("#scene-problems-notice").get_by_role("button", name="Show").click()
    problems = page.locator("#scenes-problems")
    expect(problems.locator("#scenes-problems-list li")).to_have_count(3)
    expect(problems.locator("#scenes-problems-list")).to_contain_text(
        "Its messages or names changed since the recap"
    )
    expect(problems.locator("#scenes-problems-list")).to_contain_text("The helper's answer was not JSON.")
    expect(problems.locator("#scenes-problems-list li").nth(2)).to_contain_text("needs your review")
    problems.scroll_into_view_if_needed()
    shot("problems")

    # The first recap is held at the model until the page has shown Fix at work.
    held = threading.Event()
    models.script(
        _recap("They climbed down to the river, rope first.", held), _recap("They camped under the stars.")
    )
    problems.locator("#scenes-fix").click()
    expect(page.locator("#scenes-fix-running")).to_be_visible()
    expect(page.locator("#scenes-fix-step")).to_contain_text("Fixing scene")
    shot("fixing")
    held.set()
    done = page.locator("#scenes-fix-done")
    expect(done).to_have_text("Advanced Memory fixed 2 scenes; need your review: scene 3.", timeout=15_000)
    expect(page.locator("#scenes-problems-list li")).to_have_count(1)
    expect(page.locator("#scenes-fix")).to_have_count(0)  # nothing left Fix may touch
    # The dot loads again when Fix ends: still there (scene 3 is yours), and a smaller set is not announced.
    expect(page.locator("#settings-button .problem-dot")).to_have_attribute(
        "title", "Advanced Memory: 1 scene with problems"
    )
    expect(page.locator("#scene-problems-notice")).to_have_count(0)
    page.locator("#scenes-problems").scroll_into_view_if_needed()
    shot("fixed")

    page.locator("#scenes-pause").click()
    expect(page.locator("#scenes-paused")).to_contain_text("Processing is paused")
    expect(page.locator("#scenes-resume")).to_be_visible()
    if screen == "phone":
        assert page.locator("#scenes-resume").bounding_box()["height"] >= 44
    shot("paused")
    page.locator("#scenes-resume").click()
    expect(page.locator("#scenes-pause")).to_be_visible()
    expect(page.locator("#scenes-paused")).to_have_count(0)

    page.goto(f"{live.url}/chats/{chat_id}/scenes")  # the review item remains: the same dot
    expect(page.locator("#scenes-settings .problem-dot")).to_be_visible()
    shot("access")


def test_no_problems_no_dot_and_the_list_says_so(page: Page, live, models, shot):
    chat_id = _chat(live, models)
    with live.client() as c:
        for scene in c.get(f"/api/chats/{chat_id}/scenes").json():
            assert c.delete(f"/api/chats/{chat_id}/scenes/{scene['id']}/summary").status_code == 200
    page.goto(f"{live.url}/chats/{chat_id}")
    expect(page.locator("#settings-button .problem-dot-slot")).to_have_count(1)
    expect(page.locator("#settings-button .problem-dot")).to_have_count(0)
    expect(page.locator("#scene-problems-notice")).to_have_count(0)
    page.goto(f"{live.url}/chats/{chat_id}/settings")
    expect(page.locator("#scenes-problems-none")).to_contain_text("No problems")
    page.locator("#scenes-problems").scroll_into_view_if_needed()
    shot("none")


def test_a_fix_that_ends_with_the_panel_closed_is_announced_with_show(page: Page, live, models, shot):
    chat_id = _chat(live, models)
    page.goto(f"{live.url}/chats/{chat_id}")
    page.locator("#scene-problems-notice").get_by_role("button", name="Show").click()
    expect(page.locator("#scenes-problems-list li")).to_have_count(3)
    # The first recap is held at the model until the panel is closed: a Fix that ended with the panel
    # still open is told by its list, not by the notice this test is about.
    held = threading.Event()
    models.script(
        _recap("They climbed down to the river, rope first.", held), _recap("They camped under the stars.")
    )
    page.locator("#scenes-fix").click()
    expect(page.locator("#scenes-fix-running")).to_be_visible()
    page.locator("#settings-panel [data-close-panel]").click()
    expect(page.locator("#scenes-problems")).to_be_hidden()
    held.set()
    notice = page.locator("#scene-fix-notice")
    expect(notice).to_contain_text(
        "Advanced Memory fixed 2 scenes; need your review: scene 3.", timeout=15_000
    )
    shot("fix-ended-closed")
    notice.get_by_role("button", name="Show").click()
    expect(page.locator("#scenes-fix-done")).to_be_visible()
    page.reload()  # told once per run
    expect(page.locator("#settings-button .problem-dot")).to_be_visible()
    expect(page.locator("#scene-fix-notice")).to_have_count(0)


def test_a_scene_check_unreadable_twice_offers_treating_its_batch_as_having_no_scene_end(
    page: Page, live, models, shot
):
    """Issue 21: the check after a reply whose answer cannot be read, asked once more, stays under Memory
    problems with "Treat this batch as having no scene end" beside Fix."""
    from app.memory.scenes.checks import check_scenes

    with live.client() as c:
        r = c.post(
            "/api/connections",
            json={"name": "Local test", "base_url": models.base_url, "model": "test-model", "kind": "openai"},
        )
        assert r.status_code == 201, r.text
        char = c.post("/api/characters", json={"name": "Aria", "first_mes": "The road is long."}).json()
        chat_id = c.post("/api/chats", json={"character_ids": [char["id"]], "name": "Road"}).json()["id"]
        r = c.put(
            f"/api/chats/{chat_id}/options",
            json={"settings": {"advanced_memory": True, "adv_check_interval": 3}},
        )
        assert r.status_code == 200, r.text
        for i in range(2, 7):
            assert (
                c.post(
                    f"/api/chats/{chat_id}/messages", json={"content": f"Step {i} along the road."}
                ).status_code
                == 201
            )
    models.script("The scene ends at the river.", '{"scenes": [{"title": "The river"}]}')
    # On a thread of its own, as after a reply: Playwright keeps an event loop running in this one.
    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(check_scenes, live.services, chat_id).result(60).status == "failed"
    page.goto(f"{live.url}/chats/{chat_id}/settings")
    problems = page.locator("#scenes-problems")
    item = problems.locator("#scenes-problems-list li")
    # The panel loads itself after the page (its placeholder swaps out on load): scrolling the
    # placeholder raced that swap and met a detached element. Its list is there once loaded.
    expect(item).to_have_count(1)
    item.scroll_into_view_if_needed()
    expect(item).to_contain_text("The scene check of messages 1–6 failed:")
    skip = problems.get_by_role("button", name="Treat this batch as having no scene end")
    expect(skip).to_be_in_viewport()
    expect(problems.locator("#scenes-fix")).to_be_visible()
    shot("unreadable-check")
    skip.click()
    expect(problems.locator("#scenes-problems-none")).to_be_in_viewport()
    expect(problems.locator("#scenes-check-skip")).to_have_count(0)
    shot("skipped")
    with live.client() as c:
        assert c.get(f"/api/chats/{chat_id}/scenes/problems").json()["problems"] == []
