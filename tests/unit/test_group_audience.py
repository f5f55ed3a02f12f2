"""Who can see a message in a group chat (app/chats/core/audience.py)."""

import pytest

from app.chats.core.audience import Audience, Viewer, audience_of, checked_hidden_for, sees

ARIA, BRAM, CLEO, NARRATOR = 1, 2, 3, 4


def test_an_open_message_is_seen_by_everyone():
    for me in (ARIA, BRAM, NARRATOR, None):
        assert sees(Viewer(me, NARRATOR), Audience())


def test_a_message_hidden_from_one_character_is_hidden_from_it_alone_the_narrator_included():
    hidden = Audience(hidden_for=frozenset({BRAM}))
    assert not sees(Viewer(BRAM, NARRATOR), hidden)
    assert sees(Viewer(ARIA, NARRATOR), hidden) and sees(Viewer(NARRATOR, NARRATOR), hidden)
    assert not sees(Viewer(NARRATOR, NARRATOR), Audience(hidden_for=frozenset({NARRATOR})))


def test_a_whisper_is_seen_by_its_recipient_its_author_and_the_narrator():
    users = Audience(whisper_to=ARIA)
    assert sees(Viewer(ARIA, NARRATOR), users) and sees(Viewer(NARRATOR, NARRATOR), users)
    assert not sees(Viewer(BRAM, NARRATOR), users) and not sees(Viewer(CLEO, None), users)
    from_cleo = Audience(whisper_to=ARIA, author=CLEO)
    assert sees(Viewer(CLEO, None), from_cleo) and not sees(Viewer(BRAM, None), from_cleo)
    # Hidden from its own recipient: the explicit hide wins.
    assert not sees(Viewer(ARIA, None), Audience(hidden_for=frozenset({ARIA}), whisper_to=ARIA))


def test_a_viewer_without_a_character_sees_what_is_not_hidden_from_anyone_named():
    assert sees(Viewer(None), Audience(whisper_to=ARIA))


def test_stored_values_that_do_not_read_as_ids_are_left_out():
    audience = audience_of([BRAM, "x", True, -1, 2.5], "Aria", None)
    assert audience == Audience(hidden_for=frozenset({BRAM}))
    assert audience_of(None, None, None).private is False
    assert audience_of({"a": 1}, ARIA, CLEO) == Audience(whisper_to=ARIA, author=CLEO)


def test_hidden_for_keeps_members_in_the_groups_order_once_and_refuses_strangers():
    assert checked_hidden_for([CLEO, ARIA, CLEO], [ARIA, BRAM, CLEO]) == [ARIA, CLEO]
    assert checked_hidden_for([], [ARIA, BRAM]) is None
    with pytest.raises(ValueError, match="Character 9 is not in this chat"):
        checked_hidden_for([9], [ARIA, BRAM])
    with pytest.raises(ValueError, match="at most 64"):
        checked_hidden_for([ARIA] * 65, [ARIA])


def test_a_merged_reply_sees_what_at_least_one_member_sees():
    party = Viewer(None, NARRATOR, party=(ARIA, BRAM))
    assert sees(party, Audience(hidden_for=frozenset({BRAM})))
    assert not sees(party, Audience(hidden_for=frozenset({ARIA, BRAM})))
    assert sees(party, Audience(whisper_to=ARIA)) and not sees(party, Audience(whisper_to=CLEO))
    assert not party.sees_all and Viewer(None, ARIA, party=(ARIA, BRAM)).sees_all
