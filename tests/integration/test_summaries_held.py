"""Issue 21, items 7 and 8, over real HTTP with the test model server: a prose refusal is kept inactive,
waiting for review with its reason, and never reaches the next reply's prompt; a JSON answer cut off
mid-string (finish_reason "stop") is asked again with twice the room and the second answer is stored; a
Conversation day's JSON refusal leaves the day missing with its reason."""

from __future__ import annotations

import json
from datetime import UTC, datetime, time, timedelta

from sqlmodel import Session

from app.chats.models import Message
from app.memory.days import runs as day_runs
from app.memory.days import service as conversation
from app.memory.days.core.days import chat_day
from app.platform.timeutil import utcnow
from tests.conftest import add_character, add_connection, new_chat, read_sse
from tests.support.model_server import Reply
from tests.support.waiting import wait_for

STORY = [
    "We reach the ruined abbey at dusk; the bells of Saint Corwin hang silent in the tower.",
    "*Aria lights a lantern and kneels by the altar.* There's a brass key wedged under this stone.",
    "A hooded monk steps out of the shadows and names himself Brother Tobin. He warns us the crypt floods at midnight.",
    "We follow Tobin down the spiral stairs into the crypt, the key cold in my pocket.",
]
RECAP = (
    "At the ruined abbey of Saint Corwin, Aria found a brass key under the altar; Brother Tobin warned that the "
    "crypt floods at midnight and led the way down into it."
)
REFUSAL = "I would rather not say."


def _chat(api, models) -> int:
    add_connection(api, models)
    chat = new_chat(api, [add_character(api)["id"]])
    for text in STORY:
        assert api.post(f"/api/chats/{chat['id']}/messages", json={"content": text}).status_code == 201
    return chat["id"]


def _generate(api, chat_id: int, **scope) -> dict:
    r = api.post(f"/api/chats/{chat_id}/summaries/generate", json=scope)
    assert r.status_code == 202, r.text
    return wait_for(
        lambda: (
            (s := api.get(f"/api/chats/{chat_id}/summaries/generate").json())["status"] != "running" and s
        ),
        timeout=60,
        what="the summary run to end",
    )


def _reply_prompt(api, models, chat_id: int) -> str:
    """Send a message and return the whole prompt the model was asked with."""
    models.script("*The water rises around their ankles.*")
    events = read_sse(
        api.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": "What now, Tobin?"})
    )
    assert events[-1][0] == "done", events
    sent = [r for r in models.requests if r.path.endswith("/chat/completions")][-1].json
    return "\n".join(
        m["content"] if isinstance(m["content"], str) else json.dumps(m["content"]) for m in sent["messages"]
    )


def test_a_refusal_waits_for_review_with_its_reason_and_stays_out_of_the_prompt(api, models):
    chat_id = _chat(api, models)
    models.script(REFUSAL)
    done = _generate(api, chat_id, scope="range", start=2, end=5)
    assert done["status"] == "done", done
    entry = api.get(f"/api/chats/{chat_id}/summaries/{done['entry_id']}").json()
    assert entry["content"] == REFUSAL and entry["origin"] == "model"
    assert entry["awaiting_review"] and not entry["active"]
    assert "mentions none of the names, places or words" in entry["review_reason"]

    page = api.get(f"/chats/{chat_id}/summaries").text
    assert "Held for review: It mentions none of the names, places or words" in page and "Approve" in page

    prompt = _reply_prompt(api, models, chat_id)
    assert REFUSAL not in prompt and "Summary of earlier events" not in prompt

    # Approved, it is the user's choice: it goes in, and the reason is gone.
    assert api.post(f"/api/chats/{chat_id}/summaries/{entry['id']}/approve").json()["review_reason"] == ""
    assert REFUSAL in _reply_prompt(api, models, chat_id)


def test_a_real_summary_is_active_at_once(api, models):
    chat_id = _chat(api, models)
    models.script(RECAP)
    done = _generate(api, chat_id, scope="range", start=2, end=5)
    entry = api.get(f"/api/chats/{chat_id}/summaries/{done['entry_id']}").json()
    assert entry["active"] and not entry["awaiting_review"] and entry["review_reason"] == ""
    assert RECAP in _reply_prompt(api, models, chat_id)


def test_a_refusal_from_backfill_is_held_too_and_the_run_goes_on(api, models):
    chat_id = _chat(api, models)
    for i in range(12):
        assert (
            api.post(
                f"/api/chats/{chat_id}/messages", json={"content": f"Tobin lights candle {i} in the crypt."}
            ).status_code
            == 201
        )
    models.script(REFUSAL)
    assert api.post(f"/api/chats/{chat_id}/summaries/backfill").status_code == 202
    wait_for(
        lambda: api.get(f"/api/chats/{chat_id}/summaries/backfill").json()["status"] == "done",
        timeout=60,
        what="Backfill to finish",
    )
    (entry,) = api.get(f"/api/chats/{chat_id}/summaries").json()
    assert entry["awaiting_review"] and not entry["active"] and entry["review_reason"]


def test_a_json_answer_cut_mid_string_is_asked_again_with_twice_the_room(api, models):
    chat_id = _chat(api, models)
    before = len(models.requests)
    models.script(
        Reply(
            '{"summary": "At the ruined abbey of Saint Corwin, Aria found a brass key under the al',
            finish_reason="stop",
        ),
        Reply(json.dumps({"summary": RECAP}), finish_reason="stop"),
    )
    done = _generate(api, chat_id, scope="range", start=2, end=5)
    assert done["status"] == "done", done
    asked = [r.json["max_tokens"] for r in models.requests[before:] if r.path.endswith("/chat/completions")]
    assert len(asked) == 2 and asked[1] == 2 * asked[0]
    entry = api.get(f"/api/chats/{chat_id}/summaries/{done['entry_id']}").json()
    assert entry["content"] == RECAP and entry["active"]


def test_a_json_answer_cut_off_twice_is_reported_as_cut_off(api, models):
    chat_id = _chat(api, models)
    cut = Reply('{"summary": "At the ruined abbey of Saint Corwin, Aria', finish_reason="stop")
    models.script(cut, cut)
    failed = _generate(api, chat_id, scope="range", start=2, end=5)
    assert failed["status"] == "failed" and "never closes" in failed["reason"], failed
    assert "no summary text" not in failed["reason"]
    assert api.get(f"/api/chats/{chat_id}/summaries").json() == []


def test_a_day_summary_that_is_a_refusal_in_json_leaves_the_day_missing_with_its_reason(
    sugo, api, models, background_held
):
    """Conversation days have no review state: a JSON refusal is an unusable answer, the day stays in
    Missing Summaries with the reason, and nothing enters the prompt."""
    add_connection(api, models)
    chat_id = new_chat(api, [add_character(api)["id"]], mode="conversation")["id"]
    day = chat_day(utcnow(), conversation.local_zone(), 4) - timedelta(days=1)
    at = datetime.combine(day, time(10)).astimezone().astimezone(UTC)
    with Session(sugo.engine) as session:
        for role, name, text in (
            ("user", "You", "I finally booked the train to Lisbon for my sister's wedding."),
            ("assistant", "Aria", "Wonderful! Will you bring the blue suit from the tailor?"),
        ):
            session.add(
                Message(
                    chat_id=chat_id,
                    role=role,
                    name=name,
                    content=text,
                    swipes=[{"content": text}],
                    created_at=at,
                    updated_at=at,
                )
            )
        session.commit()
    models.script(
        json.dumps({"summary": "I'm sorry, but I can't summarize this conversation.", "keyDetails": []})
    )
    day_runs.summarize_chat(sugo.services, chat_id)
    assert api.get(f"/api/chats/{chat_id}/days").json() == []
    page = api.get(f"/chats/{chat_id}/settings").text
    assert "1 finished day lacks a summary" in page and "only the words a refusal" in page

    # A mood-level note that shares no word with the day is a summary all the same.
    models.script(json.dumps({"summary": "A bright, hopeful evening full of plans.", "keyDetails": []}))
    assert api.post(f"/api/chats/{chat_id}/days/backfill").status_code == 202
    wait_for(
        lambda: api.get(f"/api/chats/{chat_id}/days/backfill").json()["status"] == "done",
        timeout=60,
        what="the day Backfill",
    )
    assert [d["summary"] for d in api.get(f"/api/chats/{chat_id}/days").json()] == [
        "A bright, hopeful evening full of plans."
    ]
