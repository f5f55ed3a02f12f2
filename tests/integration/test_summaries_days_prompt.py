"""The day summaries source gives the prompt it gave when it grouped every message of the chat in Python
(issue 23): the same blocks, messages, notes and counts, for random Conversation chats (messages over a
month, some hidden, day and week summaries, any tail and rollover hour). The old source is kept here, as
it was, to compare with."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlmodel import Session

from app.chats.service import get_chat, new_message
from app.memory.days import service as conversation
from app.memory.days.core import days
from app.memory.days.models import DaySummary, WeekSummary
from app.memory.days.source import DaySummarySource
from app.memory.summaries.core.prompts import day_block, important_memories, week_block
from app.platform.timeutil import utcnow
from app.prompt.core.builder import DynamicBlock
from app.prompt.service import build_chat_prompt
from app.prompt.sources import Contribution, PromptSources, Turn
from tests.conftest import add_character, new_chat
from tests.support.live import LiveSugo


class OldDaySummarySource(DaySummarySource):
    """The source before issue 23: every message of the chat grouped by day in Python."""

    def contribute(self, turn: Turn) -> Contribution | None:
        if turn.chat.mode != "conversation":
            return None
        chat_id = turn.chat.id
        dayrows = {r.day: r for r in conversation.day_rows(turn.session, chat_id)}
        weekrows = {r.week: r for r in conversation.week_rows(turn.session, chat_id)}
        if not dayrows and not weekrows:
            return None
        grouped = conversation.chat_days(turn.session, turn.chat)
        tail = min(turn.settings.summary_recent_tail, days.MAX_TAIL)
        plan = days.conversation_plan(grouped, dayrows, weekrows, conversation.today_of(turn.chat), tail=tail)
        if not plan.weeks and not plan.days:
            return None
        covered = {d.day for d in grouped if d.day in plan.days or days.week_start(d.day) in plan.weeks}
        kept = set(plan.tail_ids)
        turn.scratch[self.name] = {
            i for d in grouped if d.day in covered for i in d.message_ids if i not in kept
        }
        parts = [week_block(w, weekrows[w].summary) for w in plan.weeks]
        parts += [day_block(d, dayrows[d].summary) for d in plan.days]
        memories = important_memories(
            [(w, weekrows[w].key_details) for w in plan.weeks],
            [(d, dayrows[d].key_details) for d in plan.days],
        )
        text = "\n\n".join(parts + ([memories] if memories else []))
        window = {m.id for m in turn.history.messages}
        left_out = len(turn.scratch[self.name] & window)
        tail = sum(i in window for i in plan.tail_ids)
        return Contribution(
            fixed=(DynamicBlock("older_short_term_memory", "Day summaries", text),),
            note=f"Day summaries: {len(plan.weeks)} week and {len(plan.days)} day summaries sent; "
            f"{left_out} summarised messages left out, {tail} kept as the recent tail.",
        )


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    with LiveSugo(tmp_path_factory.mktemp("days") / "data", start_scheduler=False) as live:
        with live.client() as api:
            live.character = add_character(api)["id"]
            yield live


def _prompt(live: LiveSugo, chat_id: int, source: DaySummarySource):
    services = dataclasses.replace(live.services, sources=PromptSources([source]))
    with Session(live.engine) as session:
        prompt, _ = build_chat_prompt(session, get_chat(session, chat_id), services=services)
    return prompt


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    hours=st.lists(st.integers(0, 30 * 24), min_size=1, max_size=120),
    hidden=st.sets(st.integers(0, 119), max_size=10),
    summarised=st.sets(st.integers(0, 30), max_size=20),
    weeks=st.sets(st.integers(1, 5), max_size=2),
    tail=st.integers(0, 15),
    rollover=st.integers(0, 11),
    limit=st.sampled_from([20, 80]),
)
def test_the_prompt_is_the_one_every_message_gave(
    live, hours, hidden, summarised, weeks, tail, rollover, limit
):
    with live.client() as api:
        chat_id = new_chat(api, [live.character], mode="conversation")["id"]
        options = {
            "summary_recent_tail": tail,
            "summary_rollover_hour": rollover,
            "recent_message_limit": limit,
        }
        api.put(f"/api/chats/{chat_id}/options", json={"settings": options}).raise_for_status()
    now = utcnow()
    with live.session() as s:
        for n, hour in enumerate(hours):  # ids not in time order: a message's day is its time's
            m = new_message(chat_id, "user" if n % 2 else "assistant", "x", [f"message {n}"])
            m.created_at, m.hidden = now - timedelta(hours=hour, minutes=n % 60), n in hidden
            s.add(m)
        today = conversation.today_of(get_chat(s, chat_id))
        for n in summarised:
            s.add(
                DaySummary(
                    chat_id=chat_id, day=today - timedelta(days=n), summary=f"Day {n}.", key_details=[f"d{n}"]
                )
            )
        for w in weeks:
            monday = days.week_start(today) - timedelta(weeks=w)
            s.add(WeekSummary(chat_id=chat_id, week=monday, summary=f"Week {w}.", key_details=[f"w{w}"]))
        s.commit()
    old, new = _prompt(live, chat_id, OldDaySummarySource()), _prompt(live, chat_id, DaySummarySource())
    assert new.messages == old.messages
    assert (new.notes, new.sources_left_out, new.history_total) == (
        old.notes,
        old.sources_left_out,
        old.history_total,
    )
