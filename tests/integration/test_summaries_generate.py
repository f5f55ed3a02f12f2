"""Generate (issue 12): the chat's connection writes a Chat Summary entry from the active swipes of the
scope, hidden messages skipped; a bad answer writes nothing, changes nothing, and is shown with Retry;
Review outputs holds the entry inactive until it is approved."""

from __future__ import annotations

import time

from tests.conftest import add_character, add_connection, new_chat, read_sse
from tests.support.live import LiveSugo
from tests.support.model_server import Reply

RECAP = "Rowan and Aria crossed the salt flats and lost the map."


def _chat(api, models, n: int = 6) -> tuple[int, list[dict]]:
    add_connection(api, models)
    chat = new_chat(api, [add_character(api)["id"]])
    for i in range(2, n + 2):
        assert (
            api.post(
                f"/api/chats/{chat['id']}/messages", json={"content": f"Step {i} along the road."}
            ).status_code
            == 201
        )
    return chat["id"], api.get(f"/api/chats/{chat['id']}/messages").json()


def _wait(api, chat_id: int) -> dict:
    """Poll until the run ends (no timing claim: the bound only stops a hung test)."""
    for _ in range(600):
        status = api.get(f"/api/chats/{chat_id}/summaries/generate").json()
        if status["status"] not in ("running", "waiting"):
            return status
        time.sleep(0.05)
    raise AssertionError("the summary run never finished")


def _generate(api, chat_id: int, **scope) -> dict:
    r = api.post(f"/api/chats/{chat_id}/summaries/generate", json=scope)
    assert r.status_code == 202, r.text
    assert r.json()["status"] == "running" and r.json()["job_id"]
    return _wait(api, chat_id)


def test_generate_reads_only_active_swipes_and_skips_hidden(api, models):
    chat_id, _ = _chat(api, models, 2)
    models.script("Discarded swipe text", "Kept swipe text")
    read_sse(api.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": "Secret plan"}))
    read_sse(api.post(f"/api/chats/{chat_id}/generate", json={"action": "swipe"}))
    messages = api.get(f"/api/chats/{chat_id}/messages").json()
    assert messages[-1]["content"] == "Kept swipe text"
    hidden = messages[2]
    api.patch(f"/api/chats/{chat_id}/messages/{hidden['id']}", json={"hidden": True})

    models.script(f"<think>Let me see.</think>{RECAP}")
    done = _generate(api, chat_id, scope="range", start=2, end=len(messages))
    assert done["status"] == "done", done
    sent = models.last_request.json
    text = "\n".join(m["content"] for m in sent["messages"])
    assert "Kept swipe text" in text and "Secret plan" in text and "Step 2 along the road." in text
    assert "Discarded swipe text" not in text and hidden["content"] not in text
    assert sent["max_tokens"] >= 8196 and not sent.get("stream")
    entry = api.get(f"/api/chats/{chat_id}/summaries/{done['entry_id']}").json()
    assert entry["content"] == RECAP and entry["origin"] == "model" and entry["active"]
    assert entry["title"] == "Rowan and Aria crossed the salt flats and…" and not entry["awaiting_review"]
    assert (entry["first_position"], entry["last_position"]) == (2, len(messages))


def test_only_thinking_is_retried_with_a_doubled_budget(api, models):
    chat_id, _ = _chat(api, models)
    models.script(Reply("<think>Hmm, long thoughts", finish_reason="length"), RECAP)
    done = _generate(api, chat_id, scope="last", last=3)
    assert done["status"] == "done"
    budgets = [r.json["max_tokens"] for r in models.requests if r.path.endswith("/chat/completions")][-2:]
    assert budgets[1] == 2 * budgets[0]


def test_bad_answers_keep_existing_entries_and_show_retry(api, models):
    chat_id, _ = _chat(api, models)
    base = f"/api/chats/{chat_id}/summaries"
    kept = api.post(
        base, json={"content": "A summary the user wrote.", "scope": "range", "start": 2, "end": 3}
    ).json()
    bad = {
        "empty answer": [Reply("   ")],
        "only thinking twice": [Reply("<think>a</think>"), Reply("<think>b</think>")],
        "cut off twice": [
            Reply("They went", finish_reason="length"),
            Reply("They went on", finish_reason="length"),
        ],
        "HTTP 500": [Reply(status=500, error="upstream exploded")],
        "connection dropped mid-answer": [Reply(RECAP, break_after_chunks=1)],
        "JSON without a summary": [Reply('```json\n{"foo": 1}\n```')],
        "broken JSON (cut off twice: asked again with twice the room)": [
            Reply('{"summary": '),
            Reply('{"summary": "Th'),
        ],
        "binary noise": [Reply("\x00\x01\x02 ~~~")],
        "no words": [Reply("... --- 123 !!!")],
    }
    for name, replies in bad.items():
        models.script(*replies)
        failed = _generate(api, chat_id, scope="range", start=2, end=3)
        assert failed["status"] == "failed" and failed["reason"], name
        assert api.get(base).json() == [api.get(f"{base}/{kept['id']}").json()], name
        assert api.get(f"{base}/{kept['id']}").json()["updated_at"] == kept["updated_at"]
        page = api.get(f"/chats/{chat_id}/summaries").text
        assert "could not be used" in page and "Retry" in page, name
    assert "Only thinking" in _retry_reason(
        api, models, chat_id, [Reply("<think>a</think>"), Reply("<think>b</think>")]
    )

    models.script(RECAP)
    r = api.post(f"{base}/generate/retry")
    assert r.status_code == 202, r.text
    done = _wait(api, chat_id)
    assert done["status"] == "done" and (done["first_position"], done["last_position"]) == (2, 3)
    assert len(api.get(base).json()) == 2


def test_a_model_that_times_out_keeps_existing_entries_and_shows_retry(tmp_path, models):
    """A real timeout: Sugo started with SUGO_MODEL_TIMEOUT_S=1, the model answers after 4 s."""
    with LiveSugo(tmp_path / "data", model_timeout_s=1.0) as sugo, sugo.client() as api:
        chat_id, _ = _chat(api, models)
        base = f"/api/chats/{chat_id}/summaries"
        kept = api.post(
            base, json={"content": "A summary the user wrote.", "scope": "range", "start": 2, "end": 3}
        ).json()
        models.script(Reply(RECAP, first_delay_s=4))
        failed = _generate(api, chat_id, scope="last", last=4)
        assert failed["status"] == "failed" and "did not answer within 1" in failed["reason"], failed
        assert api.get(base).json() == [api.get(f"{base}/{kept['id']}").json()]
        assert api.get(f"{base}/{kept['id']}").json()["updated_at"] == kept["updated_at"]
        page = api.get(f"/chats/{chat_id}/summaries").text
        assert "could not be used" in page and "did not answer within 1" in page and "Retry" in page
        models.script(RECAP)
        assert api.post(f"{base}/generate/retry").status_code == 202
        assert _wait(api, chat_id)["status"] == "done" and len(api.get(base).json()) == 2


def _retry_reason(api, models, chat_id: int, replies) -> str:
    models.script(*replies)
    assert api.post(f"/api/chats/{chat_id}/summaries/generate/retry").status_code == 202
    return _wait(api, chat_id)["reason"]


def test_a_second_generate_while_one_runs_waits_its_turn_and_a_third_is_refused(api, models):
    chat_id, _ = _chat(api, models)
    gen = f"/api/chats/{chat_id}/summaries/generate"
    models.script(Reply(RECAP, first_delay_s=3.0), "The road went on past the salt flats.")
    first = api.post(gen, json={"scope": "last", "last": 2})
    assert first.status_code == 202 and first.json()["status"] == "running"
    again = api.post(gen, json={"scope": "range", "start": 1, "end": 3})
    assert again.status_code == 202, again.text
    waiting = again.json()
    assert waiting["status"] == "waiting" and waiting["job_id"] != first.json()["job_id"]
    assert waiting["waiting_for"] == "the summary of messages {}–{}".format(
        first.json()["first_position"], first.json()["last_position"]
    )
    third = api.post(gen, json={"scope": "last", "last": 1})
    assert third.status_code == 409 and "already waiting its turn" in third.json()["detail"]
    done = _wait(api, chat_id)  # the newest run: the one that waited, started when the first let go
    assert done["status"] == "done" and done["job_id"] == waiting["job_id"], done
    entries = api.get(f"/api/chats/{chat_id}/summaries").json()
    assert [(e["first_position"], e["last_position"]) for e in entries] == [
        (1, 3),
        (first.json()["first_position"], first.json()["last_position"]),
    ]


def test_review_outputs_holds_the_entry_until_approved(api, models):
    chat_id, _ = _chat(api, models)
    assert (
        api.put(f"/api/chats/{chat_id}/options", json={"settings": {"summary_review": True}}).status_code
        == 200
    )
    models.script(RECAP)
    done = _generate(api, chat_id, scope="last", last=4)
    base = f"/api/chats/{chat_id}/summaries"
    entry = api.get(f"{base}/{done['entry_id']}").json()
    assert entry["awaiting_review"] and not entry["active"]
    read_sse(api.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": "And then?"}))
    assert RECAP not in str(models.last_request.json["messages"])
    approved = api.post(f"{base}/{entry['id']}/approve").json()
    assert approved["active"] and not approved["awaiting_review"]
    read_sse(api.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": "Next?"}))
    assert RECAP in str(models.last_request.json["messages"])
    assert api.post(f"{base}/{entry['id']}/approve").status_code == 400


def test_bad_scopes_are_refused_with_a_sentence(api, models):
    chat_id, _ = _chat(api, models, 3)
    r = api.post(f"/api/chats/{chat_id}/summaries/generate", json={"scope": "range", "start": 3, "end": 2})
    assert r.status_code == 400 and "backwards" in r.json()["detail"]
    assert api.get(f"/api/chats/{chat_id}/summaries/generate").json()["status"] == "none"
