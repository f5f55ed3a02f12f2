"""Advanced Memory's scene recaps (issue 14): a closed scene's recap written by the helper model (the test
model server over HTTP) into real SQLite, once, in saved parts for a big scene, resumed after a restart,
never cut, never stored over the earlier recap on failure, never dropping a speaker silently."""

from __future__ import annotations

import json
import threading
from datetime import timedelta

import pytest
from sqlmodel import select

from app.chats.models import Message
from app.memory.scenes import writer
from app.memory.scenes.core.recap import DEFAULT_COMBINE_PROMPT, DEFAULT_RECAP_PROMPT
from app.memory.scenes.models import Scene, SceneRecapPart, SceneState
from app.platform.timeutil import utcnow
from tests.conftest import add_character, add_connection, new_chat
from tests.support.live import LiveSugo
from tests.support.model_server import Reply
from tests.support.scenes import stored_scene


def answer(summary: str, participants=("Aria",), timeframe: str = "") -> str:
    return json.dumps({"summary": summary, "participants": list(participants), "timeframe": timeframe})


def _chat(api, models, *names: str) -> int:
    add_connection(api, models)
    return new_chat(api, [add_character(api, n)["id"] for n in (names or ("Aria",))])["id"]


def _get(sugo, scene_id: int) -> Scene:
    with sugo.session() as s:
        return s.get(Scene, scene_id)


def _parts(sugo, scene_id: int) -> list[SceneRecapPart]:
    with sugo.session() as s:
        return list(
            s.exec(
                select(SceneRecapPart)
                .where(SceneRecapPart.scene_id == scene_id)
                .order_by(SceneRecapPart.part)
            )
        )


def _calls(models, prompt: str | None = None) -> list[dict]:
    """The helper requests received (their JSON bodies), optionally only those with this system prompt."""
    bodies = [r.json for r in models.requests if r.path.endswith("/chat/completions")]
    return [b for b in bodies if prompt is None or b["messages"][0]["content"].startswith(prompt)]


SMALL = [
    ("You", "Aria, the bridge is out.\nDate: 12 March"),
    ("Aria", "*Aria ties the rope.* We cross here."),
    ("You", "Fine."),
]


def test_a_small_scene_is_written_once(sugo, api, models):
    chat_id = _chat(api, models)
    scene_id = stored_scene(sugo, chat_id, SMALL)
    models.script(answer("Aria and the user crossed the broken bridge by rope.", ("Aria", "You")))
    assert writer.write_recap(sugo.services, scene_id) == "written"
    scene = _get(sugo, scene_id)
    assert (scene.state, scene.reason, scene.check_who) == ("written", "", False)
    assert scene.summary == "Aria and the user crossed the broken bridge by rope."
    assert scene.participants == ["Aria"]
    assert scene.timeframe == "Date: 12 March"  # the helper gave none: the anchor in the text
    assert scene.fingerprint
    request = _calls(models)[0]
    assert "#2 You: Aria, the bridge is out." in request["messages"][1]["content"]
    assert request["max_tokens"] >= 8196

    assert writer.write_recap(sugo.services, scene_id) == "skipped: already written"
    assert len(_calls(models)) == 1


def test_two_writers_at_once_make_one_call_and_one_recap(sugo, api, models):
    chat_id = _chat(api, models)
    scene_id = stored_scene(sugo, chat_id, SMALL)
    models.script(Reply(answer("One recap."), first_delay_s=0.5), answer("A second recap."))
    outcomes: list[str] = []
    threads = [
        threading.Thread(target=lambda: outcomes.append(writer.write_recap(sugo.services, scene_id)))
        for _ in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(outcomes) == ["skipped: already being written", "written"]
    assert len(_calls(models)) == 1
    assert _get(sugo, scene_id).summary == "One recap."

    # a writer of another process (or one a restart left behind) holds a scene: nothing to claim
    held = stored_scene(sugo, chat_id, [("Aria", "Later."), ("You", "Later.")], state="writing")
    assert writer.write_recap(sugo.services, held) == "skipped: already being written"
    assert len(_calls(models)) == 1 and _get(sugo, held).state == "writing"


def _big(n: int = 6) -> list[tuple[str, str]]:
    # each message ~100 tokens: with a 300-token budget, two per batch
    return [
        ("Aria" if i % 2 else "You", f"Message {i}: " + "the caravan moves slowly over the dunes " * 10)
        for i in range(n)
    ]


def test_a_big_scene_is_recapped_in_saved_parts_then_combined(sugo, api, models, monkeypatch):
    monkeypatch.setattr(writer, "INPUT_BUDGET_TOKENS", 300)
    chat_id = _chat(api, models)
    scene_id = stored_scene(sugo, chat_id, _big())
    models.script(
        answer("Part one.", timeframe="dawn"),
        answer("Part two."),
        answer("Part three.", timeframe="dusk"),
        answer("The whole crossing.", ()),
    )
    assert writer.write_recap(sugo.services, scene_id) == "written"
    assert len(_calls(models, DEFAULT_RECAP_PROMPT)) == 3
    combine = _calls(models, DEFAULT_COMBINE_PROMPT)
    assert len(combine) == 1
    assert all(p in combine[0]["messages"][1]["content"] for p in ("Part one.", "Part two.", "Part three."))
    scene = _get(sugo, scene_id)
    assert scene.summary == "The whole crossing."
    assert scene.participants == ["Aria"]  # the combine named nobody; the parts named Aria
    assert scene.timeframe == "dawn – dusk"
    parts = _parts(sugo, scene_id)
    assert [p.summary for p in parts] == ["Part one.", "Part two.", "Part three."]
    assert all(p.fingerprint for p in parts) and parts[0].participants == ["Aria"]


def test_a_restart_mid_scene_asks_only_the_parts_not_saved(sugo, api, models, monkeypatch):
    monkeypatch.setattr(writer, "INPUT_BUDGET_TOKENS", 300)
    chat_id = _chat(api, models)
    lines = _big()
    scene_id = stored_scene(sugo, chat_id, lines)
    models.script(answer("Part one."), Reply(status=500))
    outcome = writer.write_recap(sugo.services, scene_id)
    assert outcome.startswith("failed: Part 2 of 3:")
    assert [p.part for p in _parts(sugo, scene_id)] == [1]

    # the app stopped while writing: the scene was left in "writing"
    with sugo.session() as s:
        scene = s.get(Scene, scene_id)
        scene.state = "writing"
        s.add(scene)
        s.commit()
    models.reset()
    models.script(answer("Part two."), answer("Part three."), answer("The whole crossing."))
    assert writer.write_waiting_recaps(sugo.services, chat_id) == 1
    asked = [b["messages"][1]["content"] for b in _calls(models, DEFAULT_RECAP_PROMPT)]
    assert len(asked) == 2 and "Message 0:" not in asked[0] and "Message 2:" in asked[0]
    assert _get(sugo, scene_id).summary == "The whole crossing."

    # a message of part 2 changed (an edit): re-summarising asks that part again, not the others
    with sugo.session() as s:
        msg = s.exec(
            select(Message).where(Message.chat_id == chat_id, Message.content.startswith("Message 3:"))
        ).one()
        msg.content = msg.content.replace("caravan", "convoy")  # the same size: the same batches
        s.add(msg)
        scene = s.get(Scene, scene_id)
        scene.state = "waiting"
        s.add(scene)
        s.commit()
    models.reset()
    models.script(answer("Part two, edited."), answer("The crossing, turned back."))
    assert writer.write_recap(sugo.services, scene_id) == "written"
    asked = [b["messages"][1]["content"] for b in _calls(models, DEFAULT_RECAP_PROMPT)]
    assert len(asked) == 1 and "Message 3: the convoy" in asked[0]
    assert [p.summary for p in _parts(sugo, scene_id)] == ["Part one.", "Part two, edited.", "Part three."]


def test_a_cut_off_answer_is_asked_again_with_a_larger_budget(sugo, api, models):
    chat_id = _chat(api, models)
    scene_id = stored_scene(sugo, chat_id, SMALL)
    models.script(
        Reply('{"summary": "Aria and the user cro', finish_reason="length"), answer("The full recap.")
    )
    assert writer.write_recap(sugo.services, scene_id) == "written"
    first, second = _calls(models)
    assert second["max_tokens"] > first["max_tokens"]
    assert _get(sugo, scene_id).summary == "The full recap."


def test_cut_off_twice_halves_the_batch_and_never_stores_a_cut_recap(sugo, api, models, monkeypatch):
    monkeypatch.setattr(writer, "INPUT_BUDGET_TOKENS", 600)
    chat_id = _chat(api, models)
    scene_id = stored_scene(sugo, chat_id, _big(4))  # ~400 tokens: one batch of 600, two of 300
    cut = Reply('{"summary": "The caravan mov', finish_reason="length")
    models.script(cut, cut, answer("First half."), answer("Second half."), answer("The whole crossing."))
    assert writer.write_recap(sugo.services, scene_id) == "written"
    recaps = _calls(models, DEFAULT_RECAP_PROMPT)
    assert len(recaps) == 4 and "Message 3:" not in recaps[2]["messages"][1]["content"]
    assert len(_calls(models, DEFAULT_COMBINE_PROMPT)) == 1
    assert _get(sugo, scene_id).summary == "The whole crossing."


@pytest.mark.parametrize(
    ("replies", "reason"),
    [
        (["Sure! Aria smiles and keeps walking across the bridge."], "not JSON"),
        ([Reply(status=500)], "server"),
        ([""], "Empty answer"),
        (["<think>the bridge, the rope…</think>", "<think>still thinking</think>"], "Only thinking"),
        (["\x00\x01garbage\x02"], "not JSON"),
    ],
)
def test_a_failure_keeps_the_earlier_recap_and_says_why(sugo, api, models, replies, reason):
    chat_id = _chat(api, models)
    scene_id = stored_scene(
        sugo,
        chat_id,
        SMALL,
        state="waiting",
        summary="The earlier recap.",
        participants=["Aria"],
        timeframe="dusk",
        fingerprint="old",
    )
    models.script(*replies)
    outcome = writer.write_recap(sugo.services, scene_id)
    assert outcome.startswith("failed: ")
    scene = _get(sugo, scene_id)
    assert (scene.state, scene.summary, scene.participants, scene.timeframe, scene.fingerprint) == (
        "failed",
        "The earlier recap.",
        ["Aria"],
        "dusk",
        "old",
    )
    assert scene.reason and scene.reason.endswith(".") and reason.lower() in scene.reason.lower()
    assert scene.attempts == 1 and scene.next_attempt_at > utcnow() + timedelta(seconds=30)
    assert models.pending_replies == 0


def test_a_timeout_fails_the_scene(tmp_path, models):
    with LiveSugo(tmp_path / "data", model_timeout_s=0.5) as sugo, sugo.client() as api:
        chat_id = _chat(api, models)
        scene_id = stored_scene(sugo, chat_id, SMALL, summary="The earlier recap.")
        models.script(Reply(answer("Too late."), first_delay_s=3))
        assert writer.write_recap(sugo.services, scene_id).startswith("failed: ")
        scene = _get(sugo, scene_id)
        assert (scene.state, scene.summary) == ("failed", "The earlier recap.")
        assert "did not answer within 0.5 s" in scene.reason


def test_a_dropped_speaker_is_asked_again_then_flagged(sugo, api, models):
    chat_id = _chat(api, models, "Aria", "Bram")
    lines = [("You", "Who has the map?"), ("Aria", "Not me."), ("Bram", "*Bram unrolls it.* I do.")]
    scene_id = stored_scene(sugo, chat_id, lines)
    models.script(answer("Aria said she had no map."), answer("Aria again had no map."))
    assert writer.write_recap(sugo.services, scene_id) == "written"
    first, second = _calls(models)
    assert "Bram" not in first["messages"][0]["content"]
    assert (
        'must be in "participants"' in second["messages"][0]["content"]
        and "Bram" in second["messages"][0]["content"]
    )
    scene = _get(sugo, scene_id)
    assert scene.summary == "Aria again had no map."
    assert scene.check_who is True and scene.participants == ["Aria", "Bram"]

    other = stored_scene(sugo, chat_id, [("Bram", "I lead."), ("Aria", "Then lead.")])
    models.reset()
    models.script(answer("Aria let him lead."), answer("Bram led and Aria followed.", ("Aria", "Bram")))
    assert writer.write_recap(sugo.services, other) == "written"
    scene = _get(sugo, other)
    assert (scene.summary, scene.participants, scene.check_who) == (
        "Bram led and Aria followed.",
        ["Aria", "Bram"],
        False,
    )


def test_a_speaker_dropped_in_a_one_to_one_chat_is_flagged_too(sugo, api, models):
    chat_id = _chat(api, models)
    scene_id = stored_scene(sugo, chat_id, SMALL)
    models.script(answer("The user crossed alone.", ("You",)), answer("The user crossed alone.", ("You",)))
    assert writer.write_recap(sugo.services, scene_id) == "written"
    assert len(_calls(models)) == 2
    scene = _get(sugo, scene_id)
    assert (scene.participants, scene.check_who) == (["Aria"], True)


def test_a_manual_scene_is_never_claimed(sugo, api, models):
    chat_id = _chat(api, models)
    scene_id = stored_scene(sugo, chat_id, SMALL, state="waiting", manual=True, summary="My own words.")
    assert writer.write_recap(sugo.services, scene_id) == "skipped: the recap was edited by hand"
    assert writer.write_waiting_recaps(sugo.services, chat_id) == 0
    scene = _get(sugo, scene_id)
    assert (scene.state, scene.summary) == ("waiting", "My own words.")
    assert _calls(models) == []


def test_waiting_recaps_oldest_first_stop_at_a_failure_and_wait_while_paused(sugo, api, models):
    chat_id = _chat(api, models)
    first = stored_scene(sugo, chat_id, SMALL)
    second = stored_scene(sugo, chat_id, [("Aria", "Onward."), ("You", "Onward.")])
    third = stored_scene(sugo, chat_id, [("Aria", "Rest."), ("You", "Rest.")])
    models.script(answer("First."), Reply(status=500))
    assert writer.write_waiting_recaps(sugo.services, chat_id) == 1
    assert [_get(sugo, i).state for i in (first, second, third)] == ["written", "failed", "waiting"]
    assert len(_calls(models)) == 2  # the third was not asked after the failure

    with sugo.session() as s:
        s.add(SceneState(chat_id=chat_id, paused=True))
        s.commit()
    models.reset()
    assert writer.write_waiting_recaps(sugo.services, chat_id) == 0
    assert writer.write_recap(sugo.services, third) == "skipped: paused"
    assert _calls(models) == []

    with sugo.session() as s:
        s.get(SceneState, chat_id).paused = False
        s.commit()
    models.script(answer("Third."))
    assert writer.write_waiting_recaps(sugo.services, chat_id) == 1  # the failed one waits for its retry time
    assert _get(sugo, third).summary == "Third." and _get(sugo, second).state == "failed"


def test_a_recap_edited_while_the_helper_writes_is_kept(sugo, api, models):
    chat_id = _chat(api, models)
    scene_id = stored_scene(sugo, chat_id, SMALL)
    models.script(Reply(answer("The helper's recap."), first_delay_s=0.5))
    outcome: list[str] = []
    thread = threading.Thread(target=lambda: outcome.append(writer.write_recap(sugo.services, scene_id)))
    thread.start()
    for _ in range(1500):  # until the helper has the request (the bound only stops a hung test)
        if _calls(models):
            break
        thread.join(0.02)
    with sugo.session() as s:  # the user saves their own recap meanwhile
        scene = s.get(Scene, scene_id)
        scene.summary, scene.manual, scene.state = "My own words.", True, "written"
        s.add(scene)
        s.commit()
    thread.join(30)
    assert outcome == ["skipped: the recap was edited by hand meanwhile"]
    assert _get(sugo, scene_id).summary == "My own words."
