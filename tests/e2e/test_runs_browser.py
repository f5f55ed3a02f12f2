"""Issue 21, items 12 and 13, in the browser at desktop and phone sizes: Delete all memories while Prepare
existing history runs is refused with a sentence in view, and nothing is deleted; Generate pressed during a
Backfill waits its turn ("Waiting for Backfill to finish…", beside the button), then writes its summary
once the Backfill ends, and Cancel drops a waiting one."""

import json
import threading

from playwright.sync_api import Page, expect

from app.chats.models import Message
from tests.e2e.test_summaries_browser import _chat, _connect, _entries
from tests.support.model_server import Reply
from tests.support.waiting import wait_for


def _ends(*numbers: int) -> str:
    return json.dumps({"ends": [{"messageNumber": n} for n in numbers]})


def _preparing_chat(live, models) -> int:
    """A Roleplay chat of 20 messages with Advanced Memory on (windows of 10), its Prepare mid-way: the
    first window closed scene 1–8, the second window's answer is held."""
    chat_id = _chat(live, 0)
    _connect(live, models)
    with live.client() as c:
        settings = {"advanced_memory": True, "adv_check_interval": 5}
        assert c.put(f"/api/chats/{chat_id}/options", json={"settings": settings}).status_code == 200
    with live.session() as s:
        for n in range(2, 21):
            name, role = ("You", "user") if n % 2 == 0 else ("Aria", "assistant")
            s.add(
                Message(
                    chat_id=chat_id,
                    role=role,
                    name=name,
                    content=f"Line {n}: we walk on.",
                    swipes=[{"content": f"Line {n}: we walk on.", "status": "ok"}],
                )
            )
        s.commit()
    models.script(_ends(8), Reply(_ends(), gate=threading.Event()))
    with live.client() as c:
        assert c.post(f"/api/chats/{chat_id}/scenes/prepare").status_code == 202
        wait_for(
            lambda: len([r for r in models.requests if r.path.endswith("/chat/completions")]) == 2,
            timeout=60,
            what="the second window asked",
        )
        assert len(c.get(f"/api/chats/{chat_id}/scenes").json()) == 1
    return chat_id


def test_delete_all_memories_is_refused_while_prepare_runs(page: Page, live, models, shot):
    chat_id = _preparing_chat(live, models)
    page.goto(f"{live.url}/chats/{chat_id}/scenes")
    expect(page.locator("#scene-list .scene-card")).to_have_count(1)
    asked = []
    page.once("dialog", lambda d: (asked.append(d.message), d.accept()))
    page.locator("#scenes-delete-all").click()
    error = page.locator("#scenes-error")
    expect(error).to_contain_text(
        "Prepare existing history is running in this chat: wait for it to finish or Cancel it"
    )
    expect(error).to_contain_text("then delete all memories. Nothing was changed.")
    expect(error).to_be_in_viewport()
    expect(page.locator("#scene-list .scene-card")).to_have_count(1)
    assert asked and "Delete all 1 scene" in asked[0]
    shot("refused")
    with live.client() as c:
        assert len(c.get(f"/api/chats/{chat_id}/scenes").json()) == 1


def test_generate_during_a_backfill_waits_its_turn_then_writes_and_cancel_drops_it(
    page: Page, live, models, shot
):
    chat_id = _chat(live, 69)  # 70 messages; older than the tail of 10: 60, two Backfill steps
    _connect(live, models)
    first = threading.Event()
    models.script(
        Reply("The first fifty steps along the road.", gate=first),
        "The next ten steps along the road.",
        "The last two steps of the road.",
    )
    with live.client() as c:
        assert c.post(f"/api/chats/{chat_id}/summaries/backfill").status_code == 202
    page.goto(f"{live.url}/chats/{chat_id}/settings")
    section = page.locator("#chat-summary")
    expect(section.locator("#summary-backfill-running")).to_be_visible()
    generate = section.locator("#summary-generate")
    generate.scroll_into_view_if_needed()
    expect(generate).to_be_enabled()  # it used to be disabled here, and refused with 400 over JSON
    section.locator("#summary-last").fill("2")
    generate.click()
    waiting = section.locator("#summary-waiting")
    expect(waiting).to_contain_text(
        "Waiting for Backfill to finish… then the summary of messages 69–70 is written."
    )
    expect(waiting).to_be_in_viewport()
    expect(section.locator("#summary-generate")).to_be_disabled()  # one waits at a time
    shot("waiting")

    first.set()  # the Backfill's first step answers; it ends, then the waiting Generate runs
    expect(waiting).to_have_count(0)
    expect(section.locator(".summary-item")).to_have_count(3)
    assert [(e["first_position"], e["last_position"]) for e in _entries(live, chat_id)] == [
        (1, 50),
        (51, 60),
        (69, 70),
    ]

    # Cancel: a Generate waiting behind another run is dropped, nothing is asked for it.
    held = threading.Event()
    models.script(Reply("Steps one to five.", gate=held))
    with live.client() as c:
        assert (
            c.post(
                f"/api/chats/{chat_id}/summaries/generate", json={"scope": "range", "start": 1, "end": 5}
            ).status_code
            == 202
        )
    section.locator("#summary-last").fill("3")
    section.locator("#summary-generate").click()
    expect(waiting).to_contain_text("Waiting for the summary of messages 1–5 to finish…")
    waiting.locator("#summary-waiting-cancel").click()
    expect(waiting).to_have_count(0)
    held.set()
    expect(section.locator(".summary-item")).to_have_count(4)
    with live.client() as c:
        assert c.get(f"/api/chats/{chat_id}/summaries/generate").json()["status"] in ("running", "done")
    assert [(e["first_position"], e["last_position"]) for e in _entries(live, chat_id)] == [
        (1, 50),
        (1, 5),
        (51, 60),
        (69, 70),
    ]
