"""Issue 14, Chat Settings → Advanced Memory Recall: the switch and its values saved and shown again, a
budget over the maximum refused with its sentence (nothing saved), and Prepare existing history on a
30-message chat with the test model server as the helper: the step and progress while it runs, the
scenes written at the end, Cancel half-way then Resume, a failed step with Retry. Desktop and phone."""

import threading

from playwright.sync_api import Page, expect

from tests.integration.test_scene_prepare import _checks, _ends, _recap, _recaps
from tests.support.model_server import Reply

MESSAGES = 30  # the greeting and 29 more; interval 5: windows 1–10, 11–20, 21–30
ENDS = ([8], [18], [25])  # 26–30 stay the open scene
SCENES = [(1, 8), (9, 18), (19, 25)]
WINDOWS = [(1, 10), (11, 20), (21, 30)]


def _chat(live, models, *, advanced: bool = False) -> int:
    """A Roleplay chat of 30 messages and a connection to the test model server (the helper)."""
    with live.client() as c:
        r = c.post(
            "/api/connections",
            json={"name": "Local test", "base_url": models.base_url, "model": "test-model", "kind": "openai"},
        )
        assert r.status_code == 201, r.text
        char = c.post("/api/characters", json={"name": "Aria", "first_mes": "The road is long."}).json()
        chat = c.post("/api/chats", json={"character_ids": [char["id"]], "name": "Road"}).json()
        for i in range(2, MESSAGES + 1):
            assert (
                c.post(
                    f"/api/chats/{chat['id']}/messages", json={"content": f"Step {i} along the road."}
                ).status_code
                == 201
            )
        if advanced:
            r = c.put(
                f"/api/chats/{chat['id']}/options",
                json={"settings": {"advanced_memory": True, "adv_check_interval": 5}},
            )
            assert r.status_code == 200, r.text
    return chat["id"]


def _settings(live, chat_id: int) -> dict:
    with live.client() as c:
        return c.get(f"/api/chats/{chat_id}").json()["settings"]


def _scenes(live, chat_id: int) -> list[tuple[int, int, str]]:
    with live.client() as c:
        return [
            (s["first_number"], s["last_number"], s["state"])
            for s in c.get(f"/api/chats/{chat_id}/scenes").json()
        ]


def _open(page: Page, live, chat_id: int):
    page.goto(f"{live.url}/chats/{chat_id}/settings")
    section = page.locator("#advanced-memory")
    section.scroll_into_view_if_needed()
    return section


def test_turn_advanced_memory_on_with_values_and_save(page: Page, live, models, shot):
    chat_id = _chat(live, models)
    section = _open(page, live, chat_id)
    expect(section.locator("#advanced-memory-on")).not_to_be_checked()
    expect(section.locator("#advanced-memory-note")).to_contain_text("standard Memory Recall inserts nothing")
    expect(section.locator("#adv-max-context")).to_have_value("65000")
    expect(section.locator("#adv-budget")).to_have_value("6500")
    expect(section.locator("#adv-budget-hint")).to_contain_text(
        "recommended: at least 10% of the maximum (6,500)"
    )
    expect(section.locator("#adv-helper-resolved")).to_contain_text(
        "Local test · test-model (this chat's connection)"
    )
    expect(section.locator("#scenes-prepare-off")).to_contain_text(
        "Turn on Advanced Memory Recall above and Save settings first"
    )
    expect(section.locator("#scenes-prepare-start")).to_be_disabled()
    expect(section.locator("#scenes-link")).to_have_attribute("href", f"/chats/{chat_id}/scenes")
    shot("off")

    section.locator("#advanced-memory-on").check()
    section.locator("#adv-max-context").fill("32000")
    section.locator("#adv-budget").fill("4000")
    section.locator("#adv-helper").select_option(label="Local test · test-model")
    section.locator("#adv-max-scenes").fill("4")
    section.locator("#adv-check-interval").fill("7")
    section.locator("#adv-excerpt-min").fill("2")
    section.locator("#adv-excerpt-max").fill("6")
    page.locator("#chat-settings-form").get_by_role("button", name="Save settings").click()
    expect(page.locator("#chat-settings-form .notice-ok")).to_be_visible()
    settings = _settings(live, chat_id)
    assert settings["advanced_memory"] is True and settings["adv_helper_connection_id"] == 1
    assert [
        settings[k]
        for k in (
            "adv_max_context",
            "adv_budget",
            "adv_max_scenes",
            "adv_check_interval",
            "adv_excerpt_min",
            "adv_excerpt_max",
        )
    ] == [32000, 4000, 4, 7, 2, 6]

    page.reload()
    section = page.locator("#advanced-memory")
    section.scroll_into_view_if_needed()
    expect(section.locator("#advanced-memory-on")).to_be_checked()
    for field, value in (
        ("max-context", "32000"),
        ("budget", "4000"),
        ("max-scenes", "4"),
        ("check-interval", "7"),
        ("excerpt-min", "2"),
        ("excerpt-max", "6"),
    ):
        expect(section.locator(f"#adv-{field}")).to_have_value(value)
    expect(section.locator("#adv-helper")).to_have_value("1")
    expect(section.locator("#adv-budget-hint")).to_contain_text("(3,200)")
    expect(section.locator("#adv-helper-resolved")).not_to_contain_text("this chat's connection")
    expect(section.locator("#scenes-prepare-start")).to_be_enabled()
    expect(section.locator("#scenes-prepare-helper")).to_contain_text(
        "Helper model: Local test · test-model."
    )
    shot("saved")


def test_a_budget_over_the_maximum_is_refused_and_nothing_is_saved(page: Page, live, models, shot):
    chat_id = _chat(live, models)
    before = _settings(live, chat_id)
    section = _open(page, live, chat_id)
    section.locator("#advanced-memory-on").check()
    section.locator("#adv-max-context").fill("5000")
    section.locator("#adv-budget").fill("6000")
    page.locator("#chat-settings-form").get_by_role("button", name="Save settings").click()
    toast = page.locator("#toasts .toast")
    expect(toast).to_have_text(
        "Summary and recall budget: 6,000 tokens is more than the Maximum allowed context before "
        "compression (5,000). Lower the budget or raise the maximum."
    )
    shot("refused")
    assert _settings(live, chat_id) == before
    expect(page.locator("#chat-settings-form .notice-ok")).to_have_count(0)


def test_prepare_existing_history_shows_its_steps_and_ends_with_the_scenes_written(
    page: Page, live, models, shot
):
    chat_id = _chat(live, models, advanced=True)
    section = _open(page, live, chat_id)
    panel = section.locator("#scenes-prepare")
    expect(panel.locator("#scenes-prepare-helper")).to_contain_text("Helper model: Local test · test-model.")
    panel.scroll_into_view_if_needed()
    shot("before")
    # The first window and the first recap are held at the model until the page has shown their step:
    # a step that ended before the page looked would never be seen.
    finding, recapping = threading.Event(), threading.Event()
    models.script(
        Reply(_ends(ENDS[0]), gate=finding),
        *[_ends(e) for e in ENDS[1:]],
        Reply(_recap(1), gate=recapping),
        _recap(2),
        _recap(3),
    )
    panel.locator("#scenes-prepare-start").click()
    step = section.locator("#scenes-prepare-step")
    expect(step).to_have_text("Finding scenes: messages 1–10 of 30")
    expect(section.locator("#scenes-prepare-running progress")).to_have_attribute("max", "3")
    shot("finding")
    finding.set()
    expect(step).to_have_text("Writing recap 1 of 3")
    section.locator("#scenes-prepare").scroll_into_view_if_needed()
    shot("recapping")
    recapping.set()
    done = section.locator("#scenes-prepare-done")
    expect(done).to_have_text(
        "History prepared: 3 scenes, 3 recaps written. The newest messages stay the open scene."
    )
    expect(section.locator("#scenes-prepare-running")).to_have_count(0)
    section.locator("#scenes-prepare").scroll_into_view_if_needed()
    shot("done")
    assert _scenes(live, chat_id) == [(a, b, "written") for a, b in SCENES]
    assert _checks(models) == WINDOWS and sorted(_recaps(models)) == SCENES


def test_cancel_half_way_then_resume_asks_nothing_twice(page: Page, live, models, shot):
    chat_id = _chat(live, models, advanced=True)
    section = _open(page, live, chat_id)
    # The second window is held at the model until Cancel was pressed: a window that ended before the
    # click landed would have let the third begin, and Cancel would come after it.
    second = threading.Event()
    models.script(_ends(ENDS[0]), Reply(_ends(ENDS[1]), gate=second))
    section.locator("#scenes-prepare-start").click()
    expect(section.locator("#scenes-prepare-step")).to_have_text("Finding scenes: messages 11–20 of 30")
    section.locator("#scenes-prepare-cancel").click()
    expect(section.locator("#scenes-prepare-step")).to_contain_text("(stopping after this step)")
    section.locator("#scenes-prepare").scroll_into_view_if_needed()
    shot("stopping")
    second.set()
    stopped = section.locator("#scenes-prepare-stopped")
    expect(stopped).to_contain_text(
        "Prepare was cancelled. The finished work is kept (2 scenes found, 0 recaps written)."
    )
    section.locator("#scenes-prepare").scroll_into_view_if_needed()
    shot("cancelled")
    assert _scenes(live, chat_id) == [(1, 8, "waiting"), (9, 18, "waiting")]

    models.script(_ends(ENDS[2]), _recap(1), _recap(2), _recap(3))
    stopped.get_by_role("button", name="Resume").click()
    expect(section.locator("#scenes-prepare-done")).to_contain_text(
        "History prepared: 3 scenes, 3 recaps written."
    )
    assert _scenes(live, chat_id) == [(a, b, "written") for a, b in SCENES]
    assert _checks(models) == WINDOWS  # the two windows read before Cancel were not asked again
    assert sorted(_recaps(models)) == SCENES


def test_a_failed_step_shows_its_error_and_retry_goes_on_from_it(page: Page, live, models, shot):
    chat_id = _chat(live, models, advanced=True)
    section = _open(page, live, chat_id)
    models.script(_ends(ENDS[0]), Reply(status=400, error="The helper is overloaded."))
    section.locator("#scenes-prepare-start").click()
    failed = section.locator("#scenes-prepare-failed")
    expect(failed).to_contain_text("Prepare stopped: Finding scenes in messages 11–20:")
    expect(failed).to_contain_text("overloaded")
    failed.scroll_into_view_if_needed()
    shot("failed")
    models.script(*[_ends(e) for e in ENDS[1:]], *[_recap(n) for n in range(1, 4)])
    failed.get_by_role("button", name="Retry").click()
    expect(section.locator("#scenes-prepare-done")).to_contain_text(
        "History prepared: 3 scenes, 3 recaps written."
    )
    assert _checks(models) == [WINDOWS[0], WINDOWS[1], *WINDOWS[1:]]  # only the failed window asked twice


def test_an_answer_unreadable_twice_offers_treating_the_batch_as_having_no_scene_end(
    page: Page, live, models, shot
):
    """Issue 21: a helper answering in a shape Sugo cannot read stopped Prepare for good at that batch."""
    chat_id = _chat(live, models, advanced=True)
    section = _open(page, live, chat_id)
    models.script(
        _ends(ENDS[0]), "The second scene ends on the bridge.", '{"scenes": [{"title": "The bridge"}]}'
    )
    section.locator("#scenes-prepare-start").click()
    failed = section.locator("#scenes-prepare-failed")
    expect(failed).to_contain_text("Prepare stopped: Finding scenes in messages 11–20:")
    skip = failed.get_by_role("button", name="Treat this batch as having no scene end")
    expect(skip).to_be_in_viewport()  # where the Start button was pressed, no scrolling needed
    expect(failed.get_by_role("button", name="Retry")).to_be_in_viewport()
    shot("unreadable")
    assert _checks(models) == [WINDOWS[0], WINDOWS[1], WINDOWS[1]]  # the batch was asked once more
    models.script(_ends(ENDS[2]), _recap(1), _recap(2))
    skip.click()
    done = section.locator("#scenes-prepare-done")
    expect(done).to_contain_text("History prepared: 2 scenes, 2 recaps written.")
    expect(done).to_be_in_viewport()
    shot("skipped")
    # Messages 11–20 counted as having no scene end: the second scene runs from 9 to 25.
    assert _scenes(live, chat_id) == [(1, 8, "written"), (9, 25, "written")]
    assert _checks(models) == [WINDOWS[0], WINDOWS[1], WINDOWS[1], WINDOWS[2]]
