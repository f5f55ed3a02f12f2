"""Who may recall a scene in a group chat (app/memory/scenes/core/access.py) and how the helper is told
who saw what (core/recap.py)."""

from app.chats.core.audience import Audience, Viewer
from app.memory.scenes.core import access
from app.memory.scenes.core.recap import (
    PRIVATE_PARTS,
    Recap,
    RecapPart,
    SceneMessage,
    combine_request,
    recap_request,
)

ARIA, BRAM, CLEO = 1, 2, 3
MEMBERS = {ARIA: "Aria", BRAM: "Bram", CLEO: "Cleo"}
HIDDEN_FROM_BRAM = Audience(hidden_for=frozenset({BRAM}))
WHISPER_TO_ARIA = Audience(whisper_to=ARIA)


def _scene(participants=("Aria", "Bram"), check_who=False, privates=()):
    return access.SceneAccess(7, 10, 20, tuple(participants), check_who, access.private_key(list(privates)))


def _count(n):
    return lambda scene_id: n


def test_participants_recall_a_scene_others_and_absent_characters_do_not():
    scene = _scene()
    assert access.reading(scene, Viewer(ARIA, CLEO), MEMBERS, [], _count(10)) == access.Reading(
        ("Aria",), frozenset()
    )
    assert access.reading(scene, Viewer(CLEO, None), MEMBERS, [], _count(10)) is None
    # The narrator reads every scene and every private part.
    assert access.reading(scene, Viewer(CLEO, CLEO), MEMBERS, [], _count(10)) == access.Reading(
        None, frozenset()
    )
    # Card names match ignoring case and spacing.
    assert access.reading(_scene(("  aria ",)), Viewer(ARIA), MEMBERS, [], _count(10)) is not None


def test_check_who_was_there_goes_to_everyone_and_no_participant_to_the_narrator_alone():
    assert access.reading(_scene((), check_who=True), Viewer(CLEO), MEMBERS, [], _count(3)) is not None
    nobody = _scene(())
    assert access.reading(nobody, Viewer(ARIA), MEMBERS, [], _count(3)) is None
    assert access.reading(nobody, Viewer(CLEO, CLEO), MEMBERS, [], _count(3)) is not None


def test_a_partial_reader_recalls_only_a_recap_written_knowing_who_saw_what():
    privates = [(12, HIDDEN_FROM_BRAM), (14, WHISPER_TO_ARIA)]
    scene = _scene(privates=privates)
    bram = access.reading(scene, Viewer(BRAM, CLEO), MEMBERS, privates, _count(10))
    assert bram == access.Reading(("Bram",), frozenset({12, 14}))
    aria = access.reading(scene, Viewer(ARIA, CLEO), MEMBERS, privates, _count(10))
    assert aria == access.Reading(("Aria",), frozenset())
    # A message hidden from Bram since: his recap is stale; Aria, who sees it all, still recalls it.
    now = [*privates, (16, HIDDEN_FROM_BRAM)]
    assert access.reading(scene, Viewer(BRAM, CLEO), MEMBERS, now, _count(10)) is None
    assert access.reading(scene, Viewer(ARIA, CLEO), MEMBERS, now, _count(10)) is not None
    # A scene none of whose messages the reader may see is not recalled by it.
    assert access.reading(scene, Viewer(BRAM, CLEO), MEMBERS, privates, _count(2)) is None


def test_a_merged_reply_recalls_what_one_member_remembers_marked():
    privates = [(12, HIDDEN_FROM_BRAM)]
    party = Viewer(None, None, party=(ARIA, BRAM, CLEO))
    scene = _scene(("Aria", "Bram"), privates=privates)
    got = access.reading(scene, party, MEMBERS, privates, _count(10))
    # Aria and Bram remember it, Cleo does not; an excerpt quotes what both saw.
    assert got == access.Reading(("Aria", "Bram"), frozenset({12}), ("Aria", "Bram"))
    everyone = _scene(("Aria", "Bram", "Cleo"))
    assert access.reading(everyone, party, MEMBERS, [], _count(10)) == access.Reading(
        ("Aria", "Bram", "Cleo"), frozenset(), ()
    )
    assert access.reading(_scene(()), party, MEMBERS, [], _count(10)) is None  # the narrator's alone


def test_seen_notes_keys_and_a_branch_copy():
    assert access.seen_note(HIDDEN_FROM_BRAM, MEMBERS) == "hidden from Bram"
    both = Audience(hidden_for=frozenset({BRAM, CLEO}), whisper_to=ARIA)
    assert access.seen_note(both, MEMBERS) == "whispered to Aria; hidden from Bram and Cleo"
    assert access.seen_note(Audience(hidden_for=frozenset({9})), MEMBERS) == "hidden from a former member"
    assert access.seen_note(Audience(), MEMBERS) == ""
    key = access.private_key([(14, WHISPER_TO_ARIA), (12, HIDDEN_FROM_BRAM)])
    assert (
        key == access.private_key([(12, HIDDEN_FROM_BRAM), (14, WHISPER_TO_ARIA)])
        and access.private_key([]) == ""
    )
    moved = access.remap_key(key, {12: 112, 14: 114})
    assert moved == access.private_key([(112, HIDDEN_FROM_BRAM), (114, WHISPER_TO_ARIA)])
    assert access.remap_key(key, {12: 112}) == "" and access.remap_key("not json", {}) == ""
    assert access.inside(12, 13, [(11, WHISPER_TO_ARIA), (12, WHISPER_TO_ARIA), (14, WHISPER_TO_ARIA)]) == [
        (12, WHISPER_TO_ARIA)
    ]


def test_the_helper_is_told_who_saw_what_only_when_someone_did_not():
    plain = [SceneMessage(1, "Aria", "Hello."), SceneMessage(2, "Bram", "Hi.")]
    request = recap_request(plain, first_number=1, last_number=2)
    assert PRIVATE_PARTS not in request[0]["content"] and "[" not in request[1]["content"].split("\n\n", 1)[1]
    marked = [*plain, SceneMessage(3, "Rowan", "The password is heron.", seen_by="whispered to Aria")]
    request = recap_request(marked, first_number=1, last_number=3)
    assert PRIVATE_PARTS in request[0]["content"]
    assert "#3 Rowan [whispered to Aria]: The password is heron." in request[1]["content"]
    # Combining parts keeps their private sections.
    part = RecapPart(1, 3, Recap('Shared. {{#if character == "Aria"}}Secret.{{/if}}', ("Aria",), ""))
    assert (
        PRIVATE_PARTS in combine_request([part, RecapPart(4, 5, Recap("More.", ("Aria",), ""))])[0]["content"]
    )
    assert PRIVATE_PARTS not in combine_request([RecapPart(4, 5, Recap("More.", None, ""))])[0]["content"]


def test_a_member_with_its_own_new_start_recalls_no_scene_from_before_it():
    scene = _scene(("Aria", "Bram"))  # messages 10–20
    assert access.reading(scene, Viewer(BRAM, None, start_id=15), MEMBERS, [], _count(10)) is None
    assert access.reading(scene, Viewer(BRAM, None, start_id=10), MEMBERS, [], _count(10)) is not None
    # The narrator's own new start holds too; a merged reply leaves out the members who started later.
    assert access.reading(scene, Viewer(CLEO, CLEO, start_id=21), MEMBERS, [], _count(10)) is None
    party = Viewer(None, None, party=(ARIA, BRAM, CLEO))
    got = access.reading(scene, party, MEMBERS, [], _count(10), {BRAM: 30})
    assert got is not None and got.names == ("Aria",) and got.known_only_to == ("Aria",)
