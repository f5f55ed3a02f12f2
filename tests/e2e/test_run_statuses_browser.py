"""Issue 21 items 14 and 19, the run panels of Chat Settings at both sizes: each status is in sight after
its button is pressed (Missing Summaries' Backfill, Prepare, Fix, Re-scan; Chat Summary and Rebuild have
their own files), and a status line is said only while it is true: "Added 3 summaries" not at every later
opening of Chat Settings, no "Starting… (0 of 0 days)", no "No problems" while Fix works, no second error
when Cancel lands just after Prepare failed, and the memory receipt under the last reply opens in sight,
above the message box."""

import json
import threading
from datetime import UTC, datetime, time, timedelta

from playwright.sync_api import Page, expect
from sqlmodel import Session

from app.chats.models import Message
from app.chats.service import new_message
from app.memory.days import service as conversation
from app.memory.days.core.days import chat_day
from app.memory.scenes.models import Scene, SceneState
from app.platform.timeutil import utcnow
from tests.integration.test_scene_prepare import _ends, _recap
from tests.support.model_server import Reply
from tests.support.scenes import stored_scene
from tests.support.sight import expect_in_sight


def _connect(live, models) -> int:
    with live.client() as c:
        r = c.post(
            "/api/connections",
            json={"name": "Local test", "base_url": models.base_url, "model": "test-model", "kind": "openai"},
        )
        assert r.status_code == 201, r.text
        return r.json()["id"]


def _character(live) -> int:
    with live.client() as c:
        return c.post("/api/characters", json={"name": "Aria", "first_mes": "The road is long."}).json()["id"]


def _settings_panel(page: Page, live, chat_id: int):
    """Chat Settings on the chat page: a side panel on a desktop, a sheet on a phone."""
    page.goto(f"{live.url}/chats/{chat_id}")
    page.click("#settings-button")
    expect(page.locator("#chat-settings-form")).to_be_visible()
    return page.locator("#settings-panel")


# Conversation chats: Missing Summaries' Backfill -------------------------------------------------------


def _conversation(live, models, days_back: int = 3) -> int:
    _connect(live, models)
    with live.client() as c:
        chat_id = c.post(
            "/api/chats", json={"character_ids": [_character(live)], "name": "Talk", "mode": "conversation"}
        ).json()["id"]
    today = chat_day(utcnow(), conversation.local_zone(), 4)
    with Session(live.engine) as session:
        for back in range(days_back, 0, -1):
            day = today - timedelta(days=back)
            at = datetime.combine(day, time(10)).astimezone().astimezone(UTC)
            session.add(
                Message(
                    chat_id=chat_id,
                    role="user",
                    name="You",
                    content=f"Talk of {day}",
                    created_at=at,
                    updated_at=at,
                )
            )
        session.commit()
    return chat_id


def _day(n: int) -> str:
    return json.dumps({"summary": f"Summary number {n}.", "keyDetails": [f"detail {n}"]})


def test_day_backfill_shows_its_progress_in_sight_and_its_result_once(page: Page, live, models, shot):
    chat_id = _conversation(live, models)
    panel = _settings_panel(page, live, chat_id)
    held = threading.Event()
    models.script(Reply(_day(1), gate=held), _day(2), _day(3), _day(4))
    panel.locator("#backfill-start").click()
    progress = panel.locator("#backfill-progress")
    expect(progress).to_contain_text("of 3 days")
    expect(progress).not_to_contain_text("0 of 0")
    expect_in_sight(page, "#backfill-progress")
    expect_in_sight(page, "#backfill-stop")
    shot("running")
    held.set()
    expect(panel.locator("#backfill-result")).to_have_text("Added 3 summaries")
    expect_in_sight(page, "#backfill-result")
    shot("done")
    # Chat Settings opened again, later: the run's sentence is no news any more; the panel says how things are.
    page.reload()
    page.click("#settings-button")
    expect(page.locator("#missing-count")).to_have_text("Every finished day has a summary.")
    expect(page.locator("#backfill-result")).to_have_count(0)


def test_a_backfill_that_has_not_counted_its_days_yet_says_so(page: Page, live, models, shot):
    chat_id = _conversation(live, models)
    # The moment between Backfill's start and its plan (the thread has not counted the days yet), held
    # still: a run registered as Backfill registers it, before its thread reads the chat.
    progress = live.services.day_backfills.begin(chat_id)
    try:
        panel = _settings_panel(page, live, chat_id)
        line = panel.locator("#backfill-progress")
        expect(line).to_have_text("Looking for the days to summarise…")
        expect(line).not_to_contain_text("0 of 0")
        line.scroll_into_view_if_needed()
        shot("looking")
    finally:
        progress.running = False


# Advanced Memory: Prepare, Fix, Re-scan -----------------------------------------------------------------


def _roleplay(live, models, messages: int = 30) -> int:
    _connect(live, models)
    with live.client() as c:
        chat_id = c.post("/api/chats", json={"character_ids": [_character(live)], "name": "Road"}).json()[
            "id"
        ]
        r = c.put(
            f"/api/chats/{chat_id}/options",
            json={"settings": {"advanced_memory": True, "adv_check_interval": 5}},
        )
        assert r.status_code == 200, r.text
    with Session(live.engine) as s:
        for i in range(2, messages + 1):
            s.add(
                new_message(
                    chat_id,
                    "user" if i % 2 else "assistant",
                    "You" if i % 2 else "Aria",
                    [f"Step {i} along the road."],
                )
            )
        s.commit()
    return chat_id


def test_prepare_shows_its_step_in_sight_and_a_late_cancel_adds_no_second_error(
    page: Page, live, models, shot
):
    chat_id = _roleplay(live, models)
    panel = _settings_panel(page, live, chat_id)
    held = threading.Event()
    models.script(Reply(_ends([8]), gate=held), Reply(status=400, error="The helper is overloaded."))
    panel.locator("#scenes-prepare-start").click()
    expect(panel.locator("#scenes-prepare-running")).to_be_visible()
    expect_in_sight(page, "#scenes-prepare-running")
    shot("running")
    held.set()
    failed = panel.locator("#scenes-prepare-failed")
    expect(failed).to_contain_text("overloaded")
    expect_in_sight(page, "#scenes-prepare-failed")
    # The Cancel of a panel that still showed the run when it failed: the request it sends, as it sends it.
    # htmx.ajax's promise settles once the answer is on the page: what is there now is all it brought (read
    # once, not awaited: an error toast goes away by itself after 9 s).
    page.evaluate(
        """url => htmx.ajax("POST", url, {source: "#scenes-prepare", target: "#scenes-prepare", swap: "outerHTML"})""",
        f"/chats/{chat_id}/scenes/prepare/cancel",
    )
    assert page.locator("#toasts .toast").all_inner_texts() == []
    expect(panel.locator("#scenes-prepare-failed")).to_have_count(1)
    expect(failed).to_contain_text("Prepare stopped:")
    shot("failed-once")


def _failed_scenes(live, chat_id: int, count: int) -> None:
    for n in range(count):
        stored_scene(
            live,
            chat_id,
            [("You", f"Night {n} falls."), ("Aria", f"We camp, night {n}.")],
            state="failed",
            reason="The helper's answer was not JSON.",
        )


def test_fix_shows_its_progress_where_its_button_was_and_no_problems_only_once_fixed(
    page: Page, live, models, shot
):
    with live.client() as c:
        chat_id = c.post("/api/chats", json={"character_ids": [_character(live)], "name": "Road"}).json()[
            "id"
        ]
        c.put(
            f"/api/chats/{chat_id}/options",
            json={"settings": {"advanced_memory": True, "adv_check_interval": 100}},
        )
    _connect(live, models)
    _failed_scenes(live, chat_id, 12)  # a long list above the Fix button
    panel = _settings_panel(page, live, chat_id)
    expect(panel.locator("#scenes-problems-list li")).to_have_count(12)
    first, last = threading.Event(), threading.Event()
    recap = json.dumps({"summary": "They camped by the river.", "participants": ["Aria"]})
    models.script(Reply(recap, gate=first), *[recap] * 10, Reply(recap, gate=last))
    panel.locator("#scenes-fix").click()
    expect(panel.locator("#scenes-fix-running")).to_be_visible()
    expect_in_sight(page, "#scenes-fix-running")
    shot("fixing")
    first.set()
    # The last scene in hand: no scene is a problem any more, but Fix has not finished: not "No problems".
    expect(panel.locator("#scenes-fix-step")).to_have_text("Fixing scene 12 (12 of 12)")
    expect(panel.locator("#scenes-problems-list")).to_have_count(0)
    expect(panel.locator("#scenes-fix-running")).to_be_visible()
    expect(panel.locator("#scenes-problems-none")).to_have_count(0)
    shot("last-scene")
    last.set()
    expect(panel.locator("#scenes-fix-done")).to_contain_text("Advanced Memory fixed 12 scenes")
    expect_in_sight(page, "#scenes-fix-done")
    expect(panel.locator("#scenes-problems-none")).to_be_visible()


def test_re_scan_shows_its_step_in_sight(page: Page, live, models, shot):
    chat_id = _roleplay(live, models)
    with live.client() as c:
        ids = [m["id"] for m in c.get(f"/api/chats/{chat_id}/messages").json()]
    with live.session() as s:
        s.add(
            Scene(
                chat_id=chat_id,
                first_message_id=ids[0],
                last_message_id=ids[7],
                state="written",
                summary="Recap 1.",
                participants=["Aria"],
            )
        )
        s.add(SceneState(chat_id=chat_id, checked_through_id=ids[7]))
        s.commit()
    panel = _settings_panel(page, live, chat_id)
    held = threading.Event()
    models.script(
        Reply(_ends([]), gate=held), _ends([24]), _ends([]), _recap(2)
    )  # windows 9–18, 19–28, 29–30
    panel.locator("#scenes-rescan-start").click()
    expect(panel.locator("#scenes-rescan-running")).to_be_visible()
    expect_in_sight(page, "#scenes-rescan-running")
    shot("running")
    held.set()
    expect(panel.locator("#scenes-rescan-done")).to_contain_text("Re-scan of messages 9–30 finished.")
    expect_in_sight(page, "#scenes-rescan-done")


# The memory receipt under the last reply ----------------------------------------------------------------


def test_the_memory_receipt_of_the_last_reply_opens_above_the_message_box(page: Page, live, shot):
    with live.client() as c:
        chat_id = c.post("/api/chats", json={"character_ids": [_character(live)], "name": "Road"}).json()[
            "id"
        ]
    receipt = [
        "Context: ~3,200 of 20,000 tokens",
        "Recalled scene 2: the rope bridge, with 4 messages",
        "Recalled scene 5: the lighthouse, with 3 messages",
        "Recalled scene 7: the storm, with 5 messages",
        "Scene 9 without an excerpt: no space left",
        "Scene 11 without an excerpt: no space left",
        "Nothing else relevant among 14 earlier scenes",
    ]
    with Session(live.engine) as s:
        for i in range(2, 20):
            s.add(
                new_message(
                    chat_id, "user" if i % 2 else "assistant", "You" if i % 2 else "Aria", [f"Step {i}."]
                )
            )
        last = new_message(chat_id, "assistant", "Aria", ["The wind picks up over the valley."])
        last.swipes = [{**last.swipes[0], "receipt": receipt}]
        s.add(last)
        s.commit()
    page.goto(f"{live.url}/chats/{chat_id}")
    reply = page.locator("article.msg").last
    expect(reply.locator(".receipt summary")).to_contain_text("Memory · Context: ~3,200 of 20,000 tokens")
    reply.locator(".receipt summary").click()
    expect(reply.locator(".receipt li")).to_have_count(6)
    expect_in_sight(page, "article.msg:last-of-type .receipt")
    shot("receipt-open")
