"""The capabilities, message_metadata and manage_message tools, run through Tool.run with a real
ToolContext over a live Sugo: what they list, what they change, what they refuse."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from pydantic import ValidationError
from sqlmodel import select

from app.chats import service as chats
from app.chats.core.limits import MAX_MESSAGE_BYTES
from app.chats.models import Message
from app.platform.timeutil import as_utc
from app.prompt.sources import PromptSource
from app.sources import default_sources
from app.tools.builtin import builtin_tools
from app.tools.registry import ToolContext, ToolError, ToolResult
from tests.conftest import add_character, new_chat
from tests.support.live import LiveSugo

TOOLS = {tool.name: tool for tool in builtin_tools()}


class ChangeRecorder(PromptSource):
    """Hears of every change to written messages, as Memory Recall does."""

    name = "change_recorder"
    label = "Change recorder"

    def __init__(self) -> None:
        self.changed: list[int] = []

    def messages_changed(self, services, chat_id: int) -> None:
        self.changed.append(chat_id)


@pytest.fixture
def recorder() -> ChangeRecorder:
    return ChangeRecorder()


@pytest.fixture
def live(tmp_path, recorder):
    sources = default_sources()
    sources.register(recorder)
    with LiveSugo(tmp_path / "data", sources=sources) as sugo:
        yield sugo


def run(tool_name: str, ctx: ToolContext, **arguments) -> ToolResult:
    tool = TOOLS[tool_name]
    result = tool.run(ctx, tool.args.model_validate(arguments))
    assert isinstance(result, ToolResult)
    return result


def _chat_with_turns(live: LiveSugo, turns: int = 6) -> dict:
    """A chat with Aria and Brom: Aria's greeting, then user and Aria turns by turns, then Brom's line;
    the last message stands for the reply being written."""
    with live.client() as api:
        aria = add_character(api, "Aria")
        brom = add_character(api, "Brom", first_mes="")
        chat = new_chat(api, [aria["id"], brom["id"]])
    with live.session() as session:
        row = chats.get_chat(session, chat["id"])
        for i in range(turns):
            chats.add_user_message(session, row, f"User line {i}: " + "tide " * 40)
            session.add(
                chats.new_message(row.id, "assistant", "Aria", [f"Aria line {i}"], character_id=aria["id"])
            )
            session.flush()
        session.add(chats.new_message(row.id, "assistant", "Brom", ["Brom grunts."], character_id=brom["id"]))
        writing = chats.new_message(row.id, "assistant", "Aria", [""], character_id=aria["id"])
        writing.status = "streaming"
        session.add(writing)
        session.commit()
        ids = [m.id for m in chats.list_messages(session, row.id)]
    return {"chat": chat, "aria": aria["id"], "brom": brom["id"], "ids": ids, "writing": ids[-1]}


def _ctx(live: LiveSugo, setup: dict, **overrides) -> ToolContext:
    values = {
        "services": live.services,
        "chat_id": setup["chat"]["id"],
        "character_id": setup["aria"],
        "persona_id": None,
        "message_id": setup["writing"],
        "now": datetime.now(UTC),
    }
    return ToolContext(**{**values, **overrides})


def _message(live: LiveSugo, message_id: int) -> Message | None:
    with live.session() as session:
        return session.exec(select(Message).where(Message.id == message_id)).first()


def test_capabilities_name_the_declared_tools_the_missing_ones_with_why_and_the_model(live, models):
    with live.client() as api:
        api.post("/api/connections", json={"name": "Local", "base_url": models.base_url, "model": "tiny-7b"})
    setup = _chat_with_turns(live, turns=1)
    ctx = _ctx(
        live,
        setup,
        declared=("review_capabilities", "message_metadata"),
        missing={"web_search": "off in Tools & Permissions", "manage_message": "off in Tools & Permissions"},
    )
    text = run("review_capabilities", ctx).text
    assert "Tools on this turn: review_capabilities, message_metadata." in text
    assert (
        "Not available: manage_message (off in Tools & Permissions), web_search (off in Tools & Permissions)."
        in text
    )
    assert "Model: tiny-7b." in text
    assert run("review_capabilities", _ctx(live, setup)).text.startswith("No tools on this turn.")


def test_metadata_lists_the_newest_turns_ids_speakers_roles_and_times_with_short_previews(live):
    setup = _chat_with_turns(live)
    ctx = _ctx(live, setup)
    text = run("message_metadata", ctx, count=5).text
    lines = text.splitlines()
    assert lines[0].startswith("The chat's 5 newest messages, oldest first; times in the server's time zone")
    listed = [int(re.match(r"#(\d+) ", line).group(1)) for line in lines[1:]]
    # The five before the reply being written, oldest first; never the reply itself.
    assert listed == setup["ids"][-6:-1]
    assert setup["writing"] not in listed
    brom_line = lines[-1]
    assert "Brom (assistant)" in brom_line and "yours" not in brom_line
    assert any("Aria (assistant, yours)" in line for line in lines)
    user_line = next(line for line in lines if "(user)" in line)
    assert re.search(r"written \d{4}-\d\d-\d\d \d\d:\d\d", user_line)
    # A preview, never the whole text: 80 characters at most between the quotes.
    preview = user_line.split("“", 1)[1].rstrip("”")
    assert len(preview) == 80 and preview.endswith("…")

    everything = run("message_metadata", ctx, count=30).text.splitlines()
    assert len(everything) == 1 + len(setup["ids"]) - 1  # all but the reply being written
    with pytest.raises(ValidationError):
        TOOLS["message_metadata"].args.model_validate({"count": 31})


def test_manage_message_edits_the_characters_own_message_through_the_users_change_path(live, recorder):
    setup = _chat_with_turns(live)
    aria_last = setup["ids"][-3]  # Aria's last finished line (then Brom's, then the reply being written)
    result = run(
        "manage_message", _ctx(live, setup), message_id=aria_last, action="edit", content="Aria, corrected."
    )
    assert result.text == f"Message #{aria_last} edited."
    assert result.notice == f"Aria edited message #{aria_last}."
    stored = _message(live, aria_last)
    assert stored.content == "Aria, corrected." and stored.swipes[stored.active_swipe]["edited_at"]
    assert recorder.changed == [setup["chat"]["id"]]
    with live.client() as api:
        shown = api.get(f"/api/chats/{setup['chat']['id']}/messages").json()
    assert any(m["id"] == aria_last and m["content"] == "Aria, corrected." for m in shown)
    # message_metadata now says it was edited.
    listing = run("message_metadata", _ctx(live, setup), count=3).text
    assert re.search(rf"#{aria_last} .* edited \d{{4}}-", listing)


def test_manage_message_deletes_the_characters_own_message(live, recorder):
    setup = _chat_with_turns(live)
    aria_last = setup["ids"][-3]
    result = run("manage_message", _ctx(live, setup), message_id=aria_last, action="delete")
    assert result.notice == f"Aria deleted message #{aria_last}."
    assert _message(live, aria_last) is None
    assert recorder.changed == [setup["chat"]["id"]]


def test_manage_message_refuses_the_users_anothers_an_old_an_unknown_and_the_one_being_written(
    live, recorder
):
    setup = _chat_with_turns(live, turns=12)
    ctx = _ctx(live, setup)
    ids = setup["ids"]
    user_msg = ids[-4]  # the user's last line
    brom_msg = ids[-2]
    old_aria = ids[2]  # Aria's line of the first turn, more than 20 messages back
    cases = {
        user_msg: "is the user's; you may only change your own messages",
        brom_msg: "is Brom's; you may only change your own messages",
        old_aria: "older than the 20 most recent messages",
        ids[-1] + 1000: f"There is no message #{ids[-1] + 1000} in this chat.",
        setup["writing"]: "the reply being written now",
    }
    for message_id, sentence in cases.items():
        before = _message(live, message_id)
        with pytest.raises(ToolError) as refused:
            run("manage_message", ctx, message_id=message_id, action="edit", content="Overwritten.")
        assert sentence in str(refused.value)
        after = _message(live, message_id)
        assert (before and before.content) == (after and after.content)
        with pytest.raises(ToolError):
            run("manage_message", ctx, message_id=message_id, action="delete")
        assert (_message(live, message_id) is None) == (before is None)
    assert recorder.changed == []


def test_manage_message_arguments_are_checked_before_anything_runs():
    args = TOOLS["manage_message"].args
    with pytest.raises(ValidationError, match="needs the new content"):
        args.model_validate({"message_id": 1, "action": "edit"})
    with pytest.raises(ValidationError, match="needs the new content"):
        args.model_validate({"message_id": 1, "action": "edit", "content": "   "})
    with pytest.raises(ValidationError):
        args.model_validate({"message_id": 1, "action": "rewrite", "content": "x"})
    with pytest.raises(ValidationError, match="limited to 256 KB"):
        args.model_validate(
            {"message_id": 1, "action": "edit", "content": "é" * (MAX_MESSAGE_BYTES // 2 + 1)}
        )


def test_metadata_times_are_in_the_users_time_zone_once_personas_keep_one(live):
    setup = _chat_with_turns(live, turns=1)
    with live.client() as api:
        persona = api.post("/api/personas", json={"name": "Mara", "time_zone": ""}).json()
        api.put(f"/api/personas/{persona['id']}", json={"name": "Mara", "time_zone": "Asia/Tokyo"})
    text = run("message_metadata", _ctx(live, setup, persona_id=persona["id"]), count=1).text
    with live.session() as session:
        written = as_utc(session.get(Message, setup["ids"][-2]).created_at)
    assert "times in Asia/Tokyo, the user's time zone:" in text
    shown = written.astimezone(ZoneInfo("Asia/Tokyo"))
    assert f"written {shown:%Y-%m-%d %H:%M}" in text
