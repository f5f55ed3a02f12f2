"""Who answers in a group chat (app/chats/core/turns.py): SillyTavern's four activation strategies and
mute (`../shared/reference/groups-and-tools.md` §1.3), with the random source injected: a seeded
`random.Random`, or `Rolls` where a test needs to say what each roll gives."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from app.characters.core.cards import talkativeness
from app.chats.core.turns import (
    DEFAULT_TALKATIVENESS,
    Member,
    Spoken,
    Strategy,
    Turn,
    list_order,
    manual_order,
    natural_order,
    pooled_order,
    speakers,
    words,
)

ARIA, BRAM, CLEO = 1, 2, 3
USER = Spoken(None)


def group(**overrides: dict) -> list[Member]:
    members = {ARIA: Member(ARIA, "Aria"), BRAM: Member(BRAM, "Bram"), CLEO: Member(CLEO, "Cleo Vance")}
    for key, changes in overrides.items():
        member_id = {"aria": ARIA, "bram": BRAM, "cleo": CLEO}[key]
        members[member_id] = Member(**{**members[member_id].__dict__, **changes})
    return list(members.values())


class Rolls(random.Random):
    """Every talkativeness roll gives `roll`; shuffles keep the order; a random pick takes the first."""

    def __init__(self, roll: float) -> None:
        super().__init__(0)
        self.roll = roll

    def random(self) -> float:
        return self.roll

    def shuffle(self, x) -> None:  # noqa: ARG002  (kept in order)
        return None

    def choice(self, seq):
        return seq[0]


def said(text: str) -> Turn:
    return Turn(text, user_input=True)


AUTO = Turn("", user_input=False)  # auto mode or an empty send: nobody typed this turn


# --- natural order --------------------------------------------------------------------------------


def test_members_named_in_the_message_answer_first_in_the_order_they_are_named():
    silent = group(aria={"talkativeness": 0}, bram={"talkativeness": 0}, cleo={"talkativeness": 0})
    turn = said("Vance, what did you see? And you, ARIA?")
    assert natural_order(silent, [USER], turn, Rolls(0.99)) == [CLEO, ARIA]


def test_a_name_matches_only_as_a_whole_word():
    silent = group(aria={"talkativeness": 0}, bram={"talkativeness": 0}, cleo={"talkativeness": 0})
    # "Ariana" and "Brambles" name nobody; nobody drawn, so one member is picked (the first here).
    assert natural_order(silent, [USER], said("Ariana brought Brambles."), Rolls(0.99)) == [ARIA]
    assert words("Cleo-Vance's (cat)") == ["cleo", "vance", "s", "cat"]


def test_talkativeness_one_always_answers_and_zero_never_answers_by_chance():
    members = group(aria={"talkativeness": 1.0}, bram={"talkativeness": 0.0}, cleo={"talkativeness": 0.0})
    for seed in range(300):
        assert natural_order(members, [USER], said("Good evening."), random.Random(seed)) == [ARIA]


def test_a_roll_below_the_talkativeness_draws_the_member():
    members = group(aria={"talkativeness": 0.3}, bram={"talkativeness": 0.7}, cleo={"talkativeness": 0.5})
    assert natural_order(members, [USER], said("Hm."), Rolls(0.6)) == [BRAM]
    assert natural_order(members, [USER], said("Hm."), Rolls(0.4)) == [BRAM, CLEO]
    assert natural_order(members, [USER], said("Hm."), Rolls(0.2)) == [ARIA, BRAM, CLEO]


def test_mentions_come_before_the_rolls_and_nobody_answers_twice():
    members = group(aria={"talkativeness": 1.0}, bram={"talkativeness": 1.0}, cleo={"talkativeness": 1.0})
    assert natural_order(members, [USER], said("Cleo, then Bram, then Cleo again."), Rolls(0.5)) == [
        CLEO,
        BRAM,
        ARIA,
    ]


def test_the_last_speaker_does_not_answer_itself_when_no_user_input_started_the_turn():
    chatty = group(aria={"talkativeness": 1.0}, bram={"talkativeness": 1.0}, cleo={"talkativeness": 1.0})
    history = [USER, Spoken(ARIA), Spoken(BRAM)]
    assert natural_order(chatty, history, AUTO, Rolls(0.5)) == [ARIA, CLEO]
    # Not even when named in the activation text (in auto mode, the last message).
    assert natural_order(chatty, history, Turn("Bram laughs.", user_input=False), Rolls(0.5)) == [ARIA, CLEO]
    # Self-responses allowed, or a turn the user started: the last speaker may answer.
    assert natural_order(chatty, history, AUTO, Rolls(0.5), allow_self_responses=True) == [ARIA, BRAM, CLEO]
    assert natural_order(chatty, history, said("Go on."), Rolls(0.5)) == [ARIA, BRAM, CLEO]


def test_when_nobody_is_drawn_one_member_answers_a_talkative_one_other_than_the_last_speaker():
    members = group(aria={"talkativeness": 0.0}, bram={"talkativeness": 0.2}, cleo={"talkativeness": 0.1})
    assert natural_order(members, [USER], said("Hm."), Rolls(0.99)) == [BRAM]  # Aria never talks
    assert natural_order(members, [USER, Spoken(BRAM)], AUTO, Rolls(0.99)) == [CLEO]  # Bram spoke last
    quiet = group(aria={"talkativeness": 0.0}, bram={"talkativeness": 0.0}, cleo={"talkativeness": 0.0})
    assert natural_order(quiet, [USER], said("Hm."), Rolls(0.99)) == [ARIA]  # all silent: anyone
    alone = [Member(ARIA, "Aria")]
    assert natural_order(alone, [USER, Spoken(ARIA)], AUTO, Rolls(0.99)) == [ARIA]  # nobody else can


def test_talkativeness_half_draws_each_member_about_half_the_time_with_a_seeded_source():
    members = group()  # the default, 0.5 each
    rng = random.Random(20261203)
    drawn: Counter[int] = Counter()
    turns = 2000
    for _ in range(turns):
        drawn.update(natural_order(members, [USER], said("The tide is out."), rng))
    for member in (ARIA, BRAM, CLEO):
        assert 0.45 < drawn[member] / turns < 0.6, drawn  # a little over half: the no-one-drawn pick
    # The same seed gives the same turns.
    again = random.Random(20261203)
    first = [natural_order(members, [USER], said("x"), random.Random(7)) for _ in range(3)]
    assert first == [natural_order(members, [USER], said("x"), random.Random(7)) for _ in range(3)]
    assert natural_order(members, [USER], said("x"), again) == natural_order(
        members, [USER], said("x"), random.Random(20261203)
    )


# --- list, pooled, manual -------------------------------------------------------------------------


def test_list_order_is_every_unmuted_member_once_in_the_groups_order():
    assert list_order(group()) == [ARIA, BRAM, CLEO]
    assert list_order(group(bram={"muted": True})) == [ARIA, CLEO]


def test_pooled_picks_one_member_who_has_not_spoken_since_the_users_last_message():
    members = group()
    assert pooled_order(members, [USER, Spoken(ARIA), Spoken(BRAM)], Rolls(0.5)) == [CLEO]
    # Who spoke before the user's last message does not count.
    assert pooled_order(members, [Spoken(ARIA), USER, Spoken(BRAM)], Rolls(0.5)) == [ARIA]
    # Everyone has spoken: anyone but the last speaker.
    assert pooled_order(members, [USER, Spoken(ARIA), Spoken(BRAM), Spoken(CLEO)], Rolls(0.5)) == [ARIA]
    assert pooled_order(members, [USER, Spoken(CLEO), Spoken(BRAM), Spoken(ARIA)], Rolls(0.5)) == [BRAM]
    # Exactly one, whatever the seed; never a muted member.
    muted = group(cleo={"muted": True})
    for seed in range(100):
        picked = pooled_order(muted, [USER], random.Random(seed))
        assert len(picked) == 1 and picked[0] in (ARIA, BRAM)


def test_manual_answers_nobody_on_the_users_message_and_one_member_in_auto_mode():
    members = group(aria={"muted": True})
    assert manual_order(members, said("Hello all."), Rolls(0.5)) == []
    assert manual_order(members, AUTO, Rolls(0.5)) == [BRAM]
    for seed in range(50):
        assert manual_order(members, AUTO, random.Random(seed))[0] in (BRAM, CLEO)


# --- mute and a member asked for ------------------------------------------------------------------


@pytest.mark.parametrize("strategy", list(Strategy))
def test_a_muted_member_never_answers_by_itself(strategy):
    members = group(
        aria={"talkativeness": 1.0, "muted": True}, bram={"talkativeness": 1.0}, cleo={"talkativeness": 1.0}
    )
    for seed in range(100):
        for turn in (said("Aria, are you there?"), AUTO):
            picked = speakers(strategy, members, [USER, Spoken(BRAM)], turn, random.Random(seed))
            assert ARIA not in picked


def test_a_member_asked_for_answers_alone_muted_or_not():
    members = group(aria={"muted": True})
    for strategy in Strategy:
        assert speakers(strategy, members, [USER], said("Bram?"), Rolls(0.0), forced=ARIA) == [ARIA]
        assert speakers(strategy, members, [USER], said("Bram?"), Rolls(0.0), forced=99) == []


def test_the_strategies_are_chosen_by_name():
    members = group(aria={"talkativeness": 0}, bram={"talkativeness": 0}, cleo={"talkativeness": 0})
    history = [USER, Spoken(ARIA)]
    assert speakers(Strategy("natural"), members, history, said("Bram!"), Rolls(0.9)) == [BRAM]
    assert speakers(Strategy("list"), members, history, said("Bram!"), Rolls(0.9)) == [ARIA, BRAM, CLEO]
    assert speakers(Strategy("pooled"), members, history, said("Bram!"), Rolls(0.9)) == [BRAM]
    assert speakers(Strategy("manual"), members, history, said("Bram!"), Rolls(0.9)) == []
    with pytest.raises(ValueError):
        Strategy("smart-ish")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0.8, 0.8),
        ("0.25", 0.25),
        (1, 1.0),
        (0, 0.0),
        (2, 1.0),
        (-1, 0.0),
        (None, DEFAULT_TALKATIVENESS),
        ("chatty", DEFAULT_TALKATIVENESS),
        (float("nan"), DEFAULT_TALKATIVENESS),
        ([0.3], DEFAULT_TALKATIVENESS),
    ],
)
def test_a_cards_talkativeness_is_read_as_a_number_from_zero_to_one(value, expected):
    assert talkativeness(value) == expected
