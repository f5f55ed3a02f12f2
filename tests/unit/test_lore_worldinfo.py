"""Lorebook files (issue: lorebooks, acceptance 2, the pure part): SillyTavern World Info, card
character_book and Marinara lorebooks import, export and re-import without loss; bad files are
refused with a clear message."""

import base64
import copy
import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from app.characters.core.cards import read_png_text_chunks
from app.lore.core.activation import LoreBook, LoreEntry, ScanRequest, scan
from app.lore.core.worldinfo import (
    LoreFileError,
    encode_file,
    export_character_book,
    export_marinara_lorebook,
    export_world_info,
    parse_character_book,
    parse_lore_file,
    parse_marinara_lorebook,
    parse_world_info,
)

ROOT = Path(__file__).resolve().parents[2]
SERAPHINA_PNG = ROOT / "tests" / "fixtures" / "default_Seraphina.png"
ELDORIA = ROOT / "tests" / "fixtures" / "Eldoria.json"  # SillyTavern's sample World Info
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def eldoria_bytes() -> bytes:
    return ELDORIA.read_bytes()


def seraphina_books() -> dict[str, dict]:
    chunks = read_png_text_chunks(SERAPHINA_PNG.read_bytes())
    return {k: json.loads(base64.b64decode(v))["data"]["character_book"] for k, v in chunks.items()}


def ids_cleared(entries):
    return [replace(e, extra={}) for e in entries]


# Every documented World Info field, none at its default, in the order a recent SillyTavern writes.
FULL_ENTRY = {
    "uid": 7,
    "key": ["dragon", "/wyrms?/i"],
    "keysecondary": ["gold", "cave"],
    "comment": "Dragons",
    "content": "Dragons hoard {{random:gold,gems}}.",
    "constant": True,
    "vectorized": True,
    "selective": False,
    "selectiveLogic": 3,
    "addMemo": True,
    "order": 250,
    "position": 4,
    "disable": True,
    "ignoreBudget": True,
    "excludeRecursion": True,
    "preventRecursion": True,
    "matchPersonaDescription": True,
    "matchCharacterDescription": True,
    "matchCharacterPersonality": False,
    "matchCharacterDepthPrompt": True,
    "matchScenario": True,
    "matchCreatorNotes": False,
    "delayUntilRecursion": 2,
    "probability": 35,
    "useProbability": False,
    "depth": 6,
    "outletName": "",
    "group": "beasts, lairs",
    "groupOverride": True,
    "groupWeight": 40,
    "scanDepth": 8,
    "caseSensitive": True,
    "matchWholeWords": False,
    "useGroupScoring": True,
    "automationId": "qr-7",
    "role": 2,
    "sticky": 3,
    "cooldown": 5,
    "delay": 9,
    "triggers": ["normal", "swipe"],
    "displayIndex": 12,
    "characterFilter": {"isExclude": True, "names": ["Seraphina"], "tags": []},
    "extensions": {"chub": {"id": 1}},
    "myToolField": {"kept": [1, 2]},
}


def full_world_info() -> dict:
    second = {
        "uid": 3,
        "key": ["elf"],
        "keysecondary": [],
        "comment": "",
        "content": "Elves.",
        "constant": False,
        "selective": True,
        "order": 100,
        "position": 0,
        "disable": False,
        "role": None,
        "sticky": None,
        "cooldown": None,
        "delay": None,
        "probability": None,
        "delayUntilRecursion": True,
        "scanDepth": None,
        "caseSensitive": None,
        "matchWholeWords": None,
        "useGroupScoring": None,
        "groupWeight": None,
    }
    return {
        "entries": {"7": copy.deepcopy(FULL_ENTRY), "3": second},
        "originalData": {"name": "Old card book"},
    }


# --- SillyTavern World Info ----------------------------------------------------------------------


def test_real_world_info_file_round_trips_byte_for_byte():
    raw = eldoria_bytes()
    lore = parse_lore_file(raw, name="Eldoria")
    assert lore.format == "sillytavern" and lore.book.name == "Eldoria" and len(lore.entries) == 4
    first = lore.entries[0]
    assert (first.id, first.title, first.keys) == (
        0,
        "eldoria",
        ("eldoria", "wood", "forest", "magical forest"),
    )
    assert first.position == "before_char" and first.role == "system" and first.recursion and first.enabled
    assert "{{user}}" in first.content  # macros stay in the text for the renderer
    assert encode_file(export_world_info(lore.book, lore.entries)) == raw
    again = parse_lore_file(encode_file(export_world_info(lore.book, lore.entries)), name="Eldoria")
    assert again == lore


def test_imported_entries_activate():
    lore = parse_lore_file(eldoria_bytes(), name="Eldoria")
    book = replace(lore.book, id=1)
    entries = [replace(e, book_id=1) for e in lore.entries]
    result = scan(
        ScanRequest(["We walk into the Forest."], [book], entries), count=len, render=lambda e: e.content
    )
    assert [a.entry.title for a in result.active] == ["eldoria"]


def test_every_documented_field_maps_and_round_trips():
    doc = full_world_info()
    lore = parse_world_info(doc, name="Bestiary")
    dragon, elf = lore.entries
    assert (
        dragon.id == 7
        and dragon.keys == ("dragon", "/wyrms?/i")
        and dragon.secondary_keys == ("gold", "cave")
    )
    expected = dict(
        title="Dragons",
        content="Dragons hoard {{random:gold,gems}}.",
        selective_logic="and_all",
        case_sensitive=True,
        match_whole_words=False,
        constant=True,
        enabled=False,
        order=250,
        position="at_depth",
        depth=6,
        role="assistant",
        probability=35,
        use_probability=False,
        scan_depth=8,
        sticky=3,
        cooldown=5,
        delay=9,
        group="beasts, lairs",
        group_weight=40,
        group_override=True,
        recursion=False,
        exclude_recursion=True,
        delay_until_recursion=2,
        selective=False,
        use_group_scoring=True,
    )
    assert {k: getattr(dragon, k) for k in expected} == expected
    assert (elf.role, elf.sticky, elf.probability, elf.group_weight, elf.delay_until_recursion) == (
        "system",
        0,
        100,
        100,
        1,
    )
    assert elf.scan_depth is None and elf.case_sensitive is None and elf.recursion
    exported = export_world_info(lore.book, lore.entries)
    assert exported == doc
    assert list(exported["entries"]["7"]) == list(FULL_ENTRY)  # the file's key order too
    assert parse_world_info(exported, name="Bestiary") == lore


def test_edits_after_import_are_written_and_unknown_fields_stay():
    lore = parse_world_info(full_world_info(), name="Bestiary")
    dragon = replace(lore.entries[0], role="user", enabled=True, title="Great dragons", sticky=0)
    elf = replace(lore.entries[1], probability=60, position="after_char", delay_until_recursion=0)
    out = export_world_info(lore.book, [dragon, elf])["entries"]
    assert (out["7"]["role"], out["7"]["disable"], out["7"]["comment"], out["7"]["sticky"]) == (
        1,
        False,
        "Great dragons",
        0,
    )
    assert out["7"]["characterFilter"] == FULL_ENTRY["characterFilter"] and out["7"]["myToolField"] == {
        "kept": [1, 2]
    }
    assert (out["3"]["probability"], out["3"]["position"], out["3"]["delayUntilRecursion"]) == (60, 1, False)
    assert out["3"]["cooldown"] is None and out["3"]["role"] is None  # untouched fields keep the file's null
    reread = parse_world_info({"entries": out}, name="Bestiary").entries
    assert ids_cleared(reread) == ids_cleared([dragon, elf])


def test_uids_survive_new_database_ids_and_collisions_are_resolved():
    lore = parse_world_info(full_world_info(), name="Bestiary")
    stored = [replace(e, id=900 + i, book_id=5) for i, e in enumerate(lore.entries)]
    new = LoreEntry(id=7, book_id=5, content="Made in Sugo", keys=("sugo",))
    out = export_world_info(lore.book, [*stored, new])["entries"]
    assert list(out) == ["7", "3", "8"] and out["8"]["uid"] == 8 and out["8"]["content"] == "Made in Sugo"


def test_a_book_made_in_sugo_round_trips_through_world_info():
    book = LoreBook(
        id=3,
        name="Mine",
        token_budget=500,
        entry_limit=7,
        recursive=True,
        max_depth=5,
        scan_depth=4,
        case_sensitive=True,
        match_whole_words=False,
        use_group_scoring=True,
        description="Notes",
    )
    entries = [
        LoreEntry(
            id=10,
            book_id=3,
            title="A",
            content="a",
            keys=("x", "/y/i"),
            secondary_keys=("z",),
            selective_logic="not_all",
            position="before_examples",
            role="user",
            recursion=True,
            sticky=2,
        ),
        LoreEntry(
            id=11,
            book_id=3,
            content="b",
            constant=True,
            position="after_examples",
            group="g",
            group_override=True,
            use_probability=False,
            probability=10,
            delay_until_recursion=3,
        ),
    ]
    lore = parse_lore_file(encode_file(export_world_info(book, entries)), name="Mine")
    assert lore.book == replace(book, id=0)
    assert ids_cleared(lore.entries) == [replace(e, book_id=0) for e in entries]


# --- character_book ---------------------------------------------------------------------------------


@pytest.mark.parametrize("chunk", ["chara", "ccv3"])
def test_card_character_book_round_trips_exactly(chunk):
    raw = seraphina_books()[chunk]
    lore = parse_character_book(raw)
    assert lore.format == "character_book" and lore.book.name == "Eldoria" and len(lore.entries) == 4
    assert lore.entries[0].keys == ("eldoria", "wood", "forest", "magical forest")
    assert lore.entries[0].use_group_scoring is False and lore.entries[0].recursion
    exported = export_character_book(lore.book, lore.entries)
    assert json.dumps(exported) == json.dumps(raw)  # same values, same key order
    assert parse_character_book(exported) == lore


def test_card_book_and_world_info_describe_the_same_entries():
    card = parse_character_book(seraphina_books()["chara"])
    world = parse_lore_file(eldoria_bytes(), name="Eldoria")
    card_values = [replace(e, extra={}, use_group_scoring=None) for e in card.entries]
    assert card_values == ids_cleared(world.entries)
    # Converting carries SillyTavern's unmodelled fields across (displayIndex <-> display_index).
    as_world = export_world_info(card.book, card.entries)["entries"]["2"]
    assert (
        as_world["displayIndex"] == 2 and as_world["automationId"] == "" and as_world["vectorized"] is False
    )
    as_card = export_character_book(world.book, world.entries)["entries"][3]["extensions"]
    assert as_card["display_index"] == 3 and as_card["role"] == 0


def test_a_plain_v2_book_from_another_tool():
    raw = {
        "name": "Tavern lore",
        "description": "d",
        "scan_depth": 5,
        "token_budget": 900,
        "recursive_scanning": True,
        "extensions": {"agnai": {"v": 1}},
        "entries": [
            {
                "keys": ["Inn"],
                "content": "The inn.",
                "extensions": {},
                "enabled": True,
                "insertion_order": 3,
                "case_sensitive": True,
                "name": "Inn",
                "priority": 10,
                "position": "after_char",
                "secondary_keys": ["ale"],
                "selective": True,
            }
        ],
    }
    lore = parse_character_book(raw)
    (inn,) = lore.entries
    assert (lore.book.scan_depth, lore.book.token_budget, lore.book.recursive) == (5, 900, True)
    assert (inn.id, inn.title, inn.case_sensitive, inn.order, inn.position) == (
        0,
        "Inn",
        True,
        3,
        "after_char",
    )
    assert inn.recursion  # SillyTavern's default: entries recurse unless prevent_recursion says otherwise
    assert export_character_book(lore.book, lore.entries) == raw


def test_a_book_made_in_sugo_round_trips_through_a_card():
    book = LoreBook(id=1, name="B", entry_limit=9, max_depth=2, match_whole_words=False, scan_depth=6)
    entries = [
        LoreEntry(id=4, book_id=1, content="c", keys=("k",), position="at_depth", depth=2, role="assistant")
    ]
    lore = parse_character_book(json.loads(json.dumps(export_character_book(book, entries))))
    assert lore.book == replace(book, id=0) and ids_cleared(lore.entries) == [replace(entries[0], book_id=0)]


# --- Marinara -----------------------------------------------------------------------------------------


def marinara_file() -> dict:
    return {
        "type": "marinara_lorebook",
        "version": 1,
        "exportedAt": "2026-09-01T12:00:00.000Z",
        "data": {
            "lorebook": {
                "id": "lb1",
                "name": "Realm",
                "description": "",
                "category": "world",
                "scanDepth": 3,
                "tokenBudget": 1024,
                "recursiveScanning": "true",
                "maxRecursionDepth": 4,
                "entryLimit": 50,
                "tags": ["x"],
            },
            "entries": [
                {
                    "id": "e1",
                    "lorebookId": "lb1",
                    "folderId": "f1",
                    "name": "Castle",
                    "content": "A castle.",
                    "keys": ["castle", "keep"],
                    "secondaryKeys": ["stone"],
                    "enabled": True,
                    "constant": False,
                    "selective": True,
                    "selectiveLogic": "not",
                    "probability": None,
                    "scanDepth": None,
                    "matchWholeWords": True,
                    "caseSensitive": False,
                    "useRegex": False,
                    "position": 2,
                    "depth": 3,
                    "order": 5,
                    "role": "user",
                    "sticky": None,
                    "cooldown": 2,
                    "delay": None,
                    "group": "",
                    "groupWeight": None,
                    "preventRecursion": False,
                    "locked": True,
                    "ephemeral": 3,
                    "schedule": {"activeTimes": ["night"]},
                },
                {
                    "id": "e2",
                    "lorebookId": "lb1",
                    "folderId": None,
                    "name": "Runes",
                    "content": "Runes.",
                    "keys": ["rune\\w*", "a/b"],
                    "secondaryKeys": [],
                    "enabled": False,
                    "constant": False,
                    "selective": False,
                    "selectiveLogic": "and",
                    "probability": 40,
                    "matchWholeWords": False,
                    "caseSensitive": False,
                    "useRegex": True,
                    "position": 7,
                    "order": 100,
                    "role": "system",
                },
            ],
            "folders": [{"id": "f1", "name": "Places", "enabled": True, "parentFolderId": None, "order": 0}],
        },
    }


def test_marinara_lorebook_maps_and_round_trips():
    doc = marinara_file()
    lore = parse_lore_file(json.dumps(doc).encode())
    castle, runes = lore.entries
    assert lore.format == "marinara" and lore.book.name == "Realm"
    assert (lore.book.scan_depth, lore.book.token_budget, lore.book.recursive, lore.book.max_depth) == (
        3,
        1024,
        True,
        4,
    )
    assert lore.book.entry_limit == 50
    assert (castle.selective_logic, castle.position, castle.role, castle.cooldown, castle.recursion) == (
        "not_any",
        "at_depth",
        "user",
        2,
        True,
    )
    assert runes.keys == ("/rune\\w*/i", "/a\\/b/i") and runes.probability == 40 and not runes.recursion
    assert runes.position == "before_char" and not runes.enabled  # an outlet has no Sugo place
    exported = export_marinara_lorebook(lore.book, lore.entries, now=NOW)
    assert exported == doc | {"exportedAt": "2026-11-30T12:00:00.000Z"}
    assert parse_marinara_lorebook(exported) == lore


def test_marinara_regex_keys_match():
    lore = parse_marinara_lorebook(marinara_file())
    runes = replace(lore.entries[1], enabled=True, book_id=1, probability=100)
    result = scan(
        ScanRequest(["Old RUNESTONES here"], [replace(lore.book, id=1)], [runes]),
        count=len,
        render=lambda e: e.content,
    )
    assert [a.entry.title for a in result.active] == ["Runes"]


def test_a_book_made_in_sugo_round_trips_through_marinara():
    book = LoreBook(id=1, name="B", token_budget=0, case_sensitive=True, use_group_scoring=True)
    entries = [
        LoreEntry(
            id=1,
            book_id=1,
            keys=("/dra(g|k)on/",),
            content="x",
            position="after_examples",
            group_override=True,
            use_probability=False,
            use_group_scoring=False,
            case_sensitive=True,
            match_whole_words=True,
            recursion=True,
            delay_until_recursion=2,
        ),
        LoreEntry(
            id=2, book_id=1, keys=("plain",), content="y", case_sensitive=False, match_whole_words=False
        ),
    ]
    lore = parse_lore_file(json.dumps(export_marinara_lorebook(book, entries, now=NOW)).encode())
    assert lore.book == replace(book, id=0)
    assert ids_cleared(lore.entries) == [replace(e, book_id=0) for e in entries]


# --- detection and refusals -----------------------------------------------------------------------------


def test_other_containers_are_detected():
    book = seraphina_books()["chara"]
    card = {"spec": "chara_card_v2", "spec_version": "2.0", "data": {"name": "S", "character_book": book}}
    assert parse_lore_file(json.dumps(card).encode()).format == "character_book"
    v3 = {"spec": "lorebook_v3", "data": book}
    assert len(parse_lore_file(json.dumps(v3).encode()).entries) == 4
    assert parse_lore_file(json.dumps(book).encode()).book.name == "Eldoria"
    assert (
        parse_lore_file(b"\xef\xbb\xbf" + json.dumps({"entries": {}}).encode(), name="Empty").book.name
        == "Empty"
    )


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (b"not json", "not a JSON lorebook"),
        (b"[1, 2]", "no JSON object"),
        (b'{"name": "x"}', "not a lorebook"),
        (b'{"spec": "chara_card_v2", "data": {"name": "x"}}', "carries no lorebook"),
        (b'{"entries": {"0": "text"}}', 'Entry "0" must be an object'),
        (b'{"entries": {"0": {"content": 5}}}', "'content' must be text, not a number"),
        (b'{"entries": {"0": {"key": {"a": 1}}}}', "'key' must be a list of keywords"),
        (b'{"entries": {"0": {"order": "soon"}}}', "'order' must be a number"),
        (b'{"entries": {"0": {"constant": "maybe"}}}', "'constant' must be true or false"),
        (
            b'{"entries": [{"keys": ["a"], "content": null, "insertion_order": []}]}',
            "Entry 1: 'insertion_order'",
        ),
        (b'{"type": "marinara_lorebook", "version": 2, "data": {}}', "version 1"),
        (b'{"type": "marinara_lorebook", "version": 1, "data": {"lorebook": {}}}', "data.entries"),
    ],
)
def test_malformed_files_are_refused_clearly(raw, words):
    with pytest.raises(LoreFileError, match=words):
        parse_lore_file(raw, name="x")


def test_size_limits_are_stated_in_the_refusal():
    huge = b'{"entries": {"0": {"content": "' + b"x" * (33 * 1024 * 1024) + b'"}}}'
    with pytest.raises(LoreFileError, match="33.0 MB; lorebook files over 32 MB"):
        parse_lore_file(huge)
    many = json.dumps({"entries": {str(i): {"key": ["k"]} for i in range(10_001)}}).encode()
    with pytest.raises(LoreFileError, match="10,001 entries; at most 10,000"):
        parse_lore_file(many)
    long_entry = json.dumps({"entries": {"0": {"content": "x" * 1_048_576}}}).encode()
    with pytest.raises(LoreFileError, match="1,048,576 characters of content; at most 100,000"):
        parse_lore_file(long_entry)
    long_key = json.dumps({"entries": [{"keys": ["k" * 5000], "content": ""}]}).encode()
    with pytest.raises(LoreFileError, match="keyword of 5,000 characters"):
        parse_lore_file(long_key)
    # 10,000 entries of 1 MB each would be ~10 GB: the size check refuses such a file before parsing.
    with pytest.raises(LoreFileError, match="over 32 MB"):
        parse_lore_file(b"{" + b" " * (32 * 1024 * 1024) + b"}")
