"""A price on every prompt source: the seam times each source's work for the turn (its history limit,
begin, contribute and history filter), and the figure is the real time, not a label: a source that
sleeps shows at least its sleep. Peek Prompt shows the times only with SUGO_DEBUG_TIMINGS=1."""

from __future__ import annotations

import time

import pytest
from sqlmodel import Session

from app.chats.service import get_chat
from app.prompt.service import build_chat_prompt
from app.prompt.sources import Contribution, PromptSource, Turn
from app.sources import default_sources
from tests.conftest import add_character, new_chat
from tests.support.live import LiveSugo

NAP_S = 0.12


class Sleepy(PromptSource):
    """Sleeps in each hook the turn calls; `nap` sets how long contribute sleeps."""

    name = "sleepy"
    label = "Sleepy"

    def __init__(self) -> None:
        self.nap = NAP_S

    def history_limit(self, session, chat, settings):
        time.sleep(NAP_S / 4)
        return None

    def contribute(self, turn: Turn) -> Contribution:
        time.sleep(self.nap)
        return Contribution(note="Sleepy: awake.")


@pytest.fixture
def sleepy() -> Sleepy:
    return Sleepy()


def _live(tmp_path, sleepy, **settings) -> LiveSugo:
    sources = default_sources()
    sources.register(sleepy)
    return LiveSugo(tmp_path / "data", sources=sources, start_scheduler=False, **settings)


def test_each_registered_source_has_its_real_time(tmp_path, sleepy):
    with _live(tmp_path, sleepy) as live, live.client() as api:
        chat_id = new_chat(api, [add_character(api)["id"]])["id"]
        with Session(live.engine) as session:
            prompt, _ = build_chat_prompt(session, get_chat(session, chat_id), services=live.services)
            timed = dict(prompt.source_ms)
            # Every registered source is priced, in registry order, the sleeper last.
            assert [name for name, _ in prompt.source_ms] == live.services.sources.names()
            assert all(ms >= 0 for ms in timed.values())
            # Its contribute and its history limit both slept: the figure holds both naps.
            assert timed["sleepy"] >= (NAP_S + NAP_S / 4) * 1000
            sleepy.nap = 3 * NAP_S
            prompt, _ = build_chat_prompt(session, get_chat(session, chat_id), services=live.services)
            assert dict(prompt.source_ms)["sleepy"] >= (3 * NAP_S + NAP_S / 4) * 1000


def test_peek_prompt_shows_source_times_only_when_asked(tmp_path, sleepy):
    with _live(tmp_path, sleepy) as live, live.client() as api:
        chat_id = new_chat(api, [add_character(api)["id"]])["id"]
        assert api.get(f"/api/chats/{chat_id}/prompt").json()["source_ms"] is None
        assert 'id="prompt-source-timings"' not in api.get(f"/chats/{chat_id}/prompt").text
    with _live(tmp_path, sleepy, debug_timings=True) as live, live.client() as api:
        timed = api.get(f"/api/chats/{chat_id}/prompt").json()["source_ms"]
        assert list(timed) == live.services.sources.names()
        assert timed["sleepy"] >= NAP_S * 1000
        page = api.get(f"/chats/{chat_id}/prompt").text
        assert 'id="prompt-source-timings"' in page
        assert 'data-source="sleepy"' in page and 'data-source="recall"' in page
