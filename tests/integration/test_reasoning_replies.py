"""Reasoning models and empty answers over real HTTP (issue 21 items 4 and 5): Sugo on 127.0.0.1 against
the test model server playing R1/QwQ-style models (`<think>` in the text), OpenAI-compatible servers
with a reasoning field, and Anthropic extended thinking."""

import json

import pytest
from alembic import command
from sqlalchemy import text

from app.connections.providers import complete_chat_blocking
from app.connections.providers.base import GenerationParams, ProviderConfig
from app.generation.reasoning import EMPTY_REPLY, ONLY_THINKING
from app.platform.db import make_engine
from app.platform.migrate import alembic_config, upgrade_database
from tests.conftest import add_character, add_connection, new_chat, read_sse
from tests.support.model_server import Reply
from tests.support.waiting import wait_for

THOUGHT = "The user greets Aria; she should bow and ask about the road."
SAID = 'Aria bows low. "Safe travels, friend?"'


def _chat(api, models, **connection):
    add_connection(api, models, **connection)
    char = add_character(api)
    return new_chat(api, [char["id"]])["id"]


def _generate(api, chat_id, action="send", content="Hello there", **extra):
    r = api.post(f"/api/chats/{chat_id}/generate", json={"action": action, "content": content, **extra})
    assert r.status_code == 200, r.text
    return read_sse(r)


def _last(api, chat_id):
    return api.get(f"/api/chats/{chat_id}/messages").json()[-1]


def _said(events):
    return "".join(d["text"] for e, d in events if e == "token")


def _thought(events):
    return "".join(d["text"] for e, d in events if e == "reasoning")


def _sent(models) -> str:
    return json.dumps(models.last_request.json)


class TestThinkBlocks:
    def test_a_think_block_is_split_out_streamed_apart_and_stored_with_the_version(self, api, models):
        chat_id = _chat(api, models)
        # 3-character deltas: every tag arrives cut in pieces
        models.script(Reply(text=f"<think>{THOUGHT}</think>\n\n{SAID}", chunk_size=3))
        events = _generate(api, chat_id)
        assert _said(events) == SAID
        assert not any("<" in d["text"] and "think" in d["text"] for e, d in events if e == "token")
        assert _thought(events).strip() == THOUGHT
        assert [e for e, _ in events if e == "thought"] == ["thought"]
        assert events[-1][0] == "done"
        last = _last(api, chat_id)
        assert last["content"] == SAID and last["status"] == "ok"
        version = last["swipes"][0]
        assert version["reasoning"] == THOUGHT and isinstance(version["reasoning_ms"], int)

    def test_the_reasoning_is_not_in_the_next_requests_history(self, api, models):
        chat_id = _chat(api, models)
        models.script(Reply(text=f"<think>{THOUGHT}</think>{SAID}", chunk_size=5))
        _generate(api, chat_id)
        _generate(api, chat_id, content="And then?")
        sent = models.last_request.json["messages"]
        assert {"role": "assistant", "content": SAID} in sent
        assert "greets Aria" not in _sent(models) and "think>" not in _sent(models)

    def test_an_unclosed_block_is_the_rest_of_the_answer(self, api, models):
        chat_id = _chat(api, models)
        models.script(Reply(text="Aria nods. <think>Maybe I should also mention the", chunk_size=4))
        events = _generate(api, chat_id)
        assert _said(events).strip() == "Aria nods."
        last = _last(api, chat_id)
        assert last["content"].strip() == "Aria nods." and last["status"] == "ok"
        assert last["swipes"][0]["reasoning"] == "Maybe I should also mention the"

    def test_a_closer_without_an_opener_moves_what_streamed_into_the_reasoning(self, api, models):
        # a template that put <think> in the prompt: the answer starts inside the block
        chat_id = _chat(api, models)
        models.script(Reply(text=f"{THOUGHT}\n</think>\n\n{SAID}", chunk_size=6))
        events = _generate(api, chat_id)
        rewrite = [d for e, d in events if e == "rewrite"]
        assert rewrite == [{"text": "", "reasoning": THOUGHT}]
        after = events[[e for e, _ in events].index("rewrite") + 1 :]
        assert _said(after) == SAID
        last = _last(api, chat_id)
        assert last["content"] == SAID and last["swipes"][0]["reasoning"] == THOUGHT

    def test_reasoning_tags_already_in_a_stored_reply_are_not_sent_back(self, api, models):
        chat_id = _chat(api, models)
        _generate(api, chat_id)
        reply = _last(api, chat_id)
        edited = f"<thinking>{THOUGHT}</thinking>{SAID}"
        assert (
            api.patch(f"/api/chats/{chat_id}/messages/{reply['id']}", json={"content": edited}).status_code
            == 200
        )
        _generate(api, chat_id, content="Go on")
        assert {"role": "assistant", "content": SAID} in models.last_request.json["messages"]
        assert "greets Aria" not in _sent(models)


class TestProviderReasoning:
    @pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
    def test_an_openai_compatible_reasoning_field(self, api, models, field):
        chat_id = _chat(api, models)
        models.script(Reply(text=SAID, reasoning=THOUGHT, reasoning_field=field, chunk_size=7))
        events = _generate(api, chat_id)
        assert _said(events) == SAID and _thought(events) == THOUGHT
        last = _last(api, chat_id)
        assert last["content"] == SAID and last["swipes"][0]["reasoning"] == THOUGHT
        _generate(api, chat_id, content="And then?")
        assert "greets Aria" not in _sent(models)

    def test_anthropic_thinking_blocks(self, api, models):
        chat_id = _chat(api, models, kind="anthropic", base_url=models.anthropic_base_url)
        models.script(Reply(text=SAID, reasoning=THOUGHT, chunk_size=7))
        events = _generate(api, chat_id)
        assert _said(events) == SAID and _thought(events) == THOUGHT
        last = _last(api, chat_id)
        assert last["content"] == SAID and last["swipes"][0]["reasoning"] == THOUGHT
        _generate(api, chat_id, content="And then?")
        assert "greets Aria" not in _sent(models)

    @pytest.mark.parametrize("kind", ["openai", "anthropic"])
    def test_whole_answers_carry_the_reasoning_for_helpers(self, models, kind):
        # the helpers' calls (summaries, scene checks, recaps) tell "only thinking" from "empty" by it
        base = models.base_url if kind == "openai" else models.anthropic_base_url
        config = ProviderConfig(kind=kind, base_url=base, model="test-model")
        models.script(Reply(text="The recap.", reasoning=THOUGHT))
        done = complete_chat_blocking(config, [{"role": "user", "content": "Sum up"}], GenerationParams())
        assert (done.text, done.reasoning) == ("The recap.", THOUGHT)


class TestNothingSaid:
    def test_a_reply_that_is_only_thinking_is_a_failed_version(self, api, models):
        chat_id = _chat(api, models)
        models.script(Reply(text=f"<think>{THOUGHT}</think>\n", chunk_size=8))
        events = _generate(api, chat_id)
        assert events[-1] == (
            "error",
            {"message_id": events[0][1]["message_id"], "kind": "only_thinking", "message": ONLY_THINKING},
        )
        last = _last(api, chat_id)
        assert (last["status"], last["error"], last["content"]) == ("error", ONLY_THINKING, "")
        assert last["swipes"][0]["reasoning"] == THOUGHT  # what the model was doing stays readable
        _generate(api, chat_id, content="Hello?")
        assert "greets Aria" not in _sent(models)

    def test_only_a_reasoning_field_is_only_thinking_too(self, api, models):
        chat_id = _chat(api, models)
        models.script(Reply(text="", reasoning=THOUGHT))
        _generate(api, chat_id)
        assert (_last(api, chat_id)["status"], _last(api, chat_id)["error"]) == ("error", ONLY_THINKING)

    @pytest.mark.parametrize("answer", ["", "  \n\n "])
    def test_an_empty_answer_is_a_failed_version_left_out_of_later_prompts(self, api, models, answer):
        chat_id = _chat(api, models)
        models.script(Reply(text=answer))
        events = _generate(api, chat_id)
        assert events[-1][0] == "error" and events[-1][1]["kind"] == "empty"
        failed = _last(api, chat_id)
        assert (failed["status"], failed["error"], failed["content"]) == ("error", EMPTY_REPLY, "")
        _generate(api, chat_id, content="Anyone there?")
        roles = [m["role"] for m in models.last_request.json["messages"]]
        assert roles.count("assistant") == 1  # the greeting only: the failed reply is left out

    def test_a_new_version_that_says_nothing_fails_and_the_old_one_comes_back_whole(self, api, models):
        chat_id = _chat(api, models)
        models.script(Reply(text=SAID))
        _generate(api, chat_id)
        reply = _last(api, chat_id)
        models.script(Reply(text="<think>nothing to add"))
        _generate(api, chat_id, action="swipe", content=None)
        now = _last(api, chat_id)
        assert now["active_swipe"] == 1 and (now["status"], now["error"]) == ("error", ONLY_THINKING)
        back = api.post(f"/api/chats/{chat_id}/messages/{reply['id']}/swipe", json={"index": 0}).json()
        assert (back["status"], back["content"]) == ("ok", SAID)
        assert back["swipes"][1]["reasoning"] == "nothing to add"


class TestContinue:
    def test_a_continuation_that_is_only_thinking_leaves_the_reply_as_it_was(self, api, models):
        chat_id = _chat(api, models)
        models.script(Reply(text=SAID, reasoning="First thought."))
        _generate(api, chat_id)
        before = _last(api, chat_id)
        models.script(Reply(text="<think>What else could she say?</think>  "))
        events = _generate(api, chat_id, action="continue", content=None)
        assert events[-1][0] == "error" and events[-1][1]["message"] == ONLY_THINKING
        after = _last(api, chat_id)
        assert after["content"] == before["content"] == SAID and after["status"] == "ok"
        assert after["swipes"] == before["swipes"]

    def test_a_continuation_adds_its_text_to_the_reply_and_its_reasoning_to_the_versions(self, api, models):
        chat_id = _chat(api, models)
        models.script(Reply(text="Aria bows.", reasoning="First thought."))
        _generate(api, chat_id)
        models.script(Reply(text="<think>Now the road.</think> She points north.", chunk_size=4))
        events = _generate(api, chat_id, action="continue", content=None)
        assert _said(events) == " She points north." and "Now the road." in _thought(events)
        after = _last(api, chat_id)
        assert after["content"] == "Aria bows. She points north." and after["status"] == "ok"
        assert after["swipes"][0]["reasoning"] == "First thought.\n\nNow the road."


class TestImpersonate:
    def test_only_the_text_reaches_the_composer(self, api, models):
        chat_id = _chat(api, models)
        models.script(Reply(text="<think>Rowan would be curt.</think>I nod.", chunk_size=4))
        events = _generate(api, chat_id, action="impersonate", content=None)
        assert _said(events) == "I nod." and not _thought(events)


def test_the_migration_moves_reasoning_out_of_stored_replies(tmp_path):
    engine = make_engine(tmp_path / "old.db")
    cfg = alembic_config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "7c9e1b3d5f8a")
        conn.execute(
            text(
                "insert into chat (id, name, mode, settings, st_header, next_speaker, variables, lore_timed,"
                " lore_last_scan, created_at, updated_at, last_message_at) values (1, 'Old', 'roleplay', '{}',"
                " '{}', 0, '{}', '{}', '{}', '2024-01-01', '2024-01-01', '2024-01-01')"
            )
        )
        rows = [
            (
                1,
                "assistant",
                f"<think>{THOUGHT}</think>{SAID}",
                [
                    {"content": "Older version.", "status": "ok"},
                    {"content": f"<think>{THOUGHT}</think>{SAID}", "status": "ok"},
                ],
                1,
            ),
            (2, "assistant", "<THINK>only this", [{"content": "<THINK>only this", "status": "ok"}], 0),
            (
                3,
                "user",
                "<think>the user's own words</think>",
                [{"content": "<think>the user's own words</think>"}],
                0,
            ),
            (
                4,
                "assistant",
                "I think the reasoning is sound.",
                [{"content": "I think the reasoning is sound."}],
                0,
            ),
        ]
        for id_, role, content, swipes, active in rows:
            conn.execute(
                text(
                    "insert into message (id, chat_id, role, kind, name, content, swipes, active_swipe, hidden,"
                    " status, st_extra, created_at, updated_at) values (:id, 1, :role, 'message', 'A', :c, :s,"
                    " :a, 0, 'ok', '{}', '2024-01-01', '2024-01-01')"
                ),
                {"id": id_, "role": role, "c": content, "s": json.dumps(swipes), "a": active},
            )
    upgrade_database(engine)
    with engine.connect() as conn:
        got = {
            r[0]: (r[1], json.loads(r[2]), r[3], r[4])
            for r in conn.execute(text("select id, content, swipes, status, error from message"))
        }
    content, swipes, status, _ = got[1]
    assert content == SAID and status == "ok"
    assert swipes[0] == {"content": "Older version.", "status": "ok"}
    assert swipes[1]["content"] == SAID and swipes[1]["reasoning"] == THOUGHT
    content, swipes, status, error = got[2]
    assert (content, status, error) == ("", "error", ONLY_THINKING) and swipes[0]["reasoning"] == "only this"
    assert got[3][0] == "<think>the user's own words</think>"  # a user's text is theirs
    assert got[4][0] == "I think the reasoning is sound."


def test_a_summary_answer_of_only_a_reasoning_field_is_asked_again_with_more_room(api, models):
    """The helpers read answers through the same reader: a reasoning field with no text is "only
    thinking" (asked again with twice the room), not an empty answer."""
    chat_id = _chat(api, models)
    for i in range(4):
        assert (
            api.post(f"/api/chats/{chat_id}/messages", json={"content": f"Step {i} on the road."}).status_code
            == 201
        )
    models.script(
        Reply(text="", reasoning="Let me weigh each message first..."), "They walked the road together."
    )
    r = api.post(f"/api/chats/{chat_id}/summaries/generate", json={"scope": "last", "last": 3})
    assert r.status_code == 202, r.text
    status = wait_for(
        lambda: (
            (s := api.get(f"/api/chats/{chat_id}/summaries/generate").json())["status"] != "running" and s
        ),
        timeout=60,
        what="the summary run to end",
    )
    assert status["status"] == "done", status
    budgets = [q.json["max_tokens"] for q in models.requests if q.path.endswith("/chat/completions")]
    assert budgets[-1] == 2 * budgets[-2]


def test_sillytavern_chats_bring_and_take_their_reasoning(api, models):
    """SillyTavern keeps a reply's reasoning in `extra.reasoning` (ms in `reasoning_duration`); a chat written
    without reasoning parsing has it inline. Both arrive apart from the text, and go out as SillyTavern reads it."""
    add_character(api, "Mirela")
    lines = [
        {"user_name": "Rowan", "character_name": "Mirela"},
        {
            "name": "Mirela",
            "is_user": False,
            "mes": "You're alive.",
            "swipe_id": 0,
            "swipes": ["You're alive."],
            "extra": {"reasoning": "He was unconscious for hours.", "reasoning_duration": 4200},
        },
        {"name": "Rowan", "is_user": True, "mes": "Where am I? <think>a user's own words stay</think>"},
        {"name": "Mirela", "is_user": False, "mes": f"<think>{THOUGHT}</think>\n{SAID}", "extra": {}},
        {"name": "Mirela", "is_user": False, "mes": "<think>nothing but thought", "extra": {}},
    ]
    raw = ("\n".join(json.dumps(line) for line in lines) + "\n").encode()
    chat = api.post("/api/chats/import", files={"file": ("tavern.jsonl", raw)}).json()
    msgs = api.get(f"/api/chats/{chat['id']}/messages").json()
    assert (
        msgs[0]["content"] == "You're alive."
        and msgs[0]["swipes"][0]["reasoning"] == "He was unconscious for hours."
    )
    assert msgs[0]["swipes"][0]["reasoning_ms"] == 4200
    assert msgs[1]["content"] == lines[2]["mes"]
    assert msgs[2]["content"] == SAID and msgs[2]["swipes"][0]["reasoning"] == THOUGHT
    assert (msgs[3]["status"], msgs[3]["error"], msgs[3]["content"]) == ("error", ONLY_THINKING, "")
    exported = [json.loads(x) for x in api.get(f"/api/chats/{chat['id']}/export").text.splitlines()]
    assert exported[1]["extra"]["reasoning"] == "He was unconscious for hours."
    assert exported[1]["extra"]["reasoning_duration"] == 4200
    assert exported[3]["mes"] == SAID and exported[3]["extra"]["reasoning"] == THOUGHT
