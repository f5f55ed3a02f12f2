"""Lorebook activation (issue: lorebooks, acceptance 1): keys, timing, groups, recursion, budgets."""

import time
from dataclasses import replace

import pytest

from app.lore.core.activation import (
    LoreBook,
    LoreEntry,
    ScanRequest,
    TimedState,
    compile_book,
    parse_regex_key,
    regex_key_problem,
    scan,
    scan_text,
    turn_off_unrunnable,
)


def words(text: str) -> int:
    """Token counter for tests: one token per whitespace-separated word."""
    return len(text.split())


def book(**kw) -> LoreBook:
    return LoreBook(**{"id": 1, "name": "World", **kw})


def entry(id: int, *keys: str, content: str | None = None, **kw) -> LoreEntry:
    return LoreEntry(id=id, book_id=kw.pop("book_id", 1), keys=keys, content=content or f"lore {id}", **kw)


def run(messages, entries, books=None, **kw):
    render = kw.pop("render", lambda e: e.content)
    request = ScanRequest(messages=messages, books=books or [book()], entries=entries, **kw)
    return scan(request, count=words, render=render)


def active(result) -> list[int]:
    return [a.entry.id for a in result.active]


def rejected(result) -> dict[int, str]:
    return {r.entry.id: r.reason for r in result.rejected}


# --- keys and scan depth ------------------------------------------------------------------------


def test_primary_key_in_the_newest_message_activates():
    result = run(
        ["We rode on.", "A dragon circles the tower."], [entry(1, "dragon"), entry(2, "griffin"), entry(3)]
    )
    assert active(result) == [1]
    assert result.active[0].matched_keys == ("dragon",) and result.active[0].reason == "key"
    assert result.active[0].found_at_depth == 0 and result.active[0].text == "lore 1"


def test_scan_depth_defaults_to_the_two_newest_messages_and_entries_override_it():
    messages = ["The dragon was here long ago.", "Quiet.", "Still quiet."]  # oldest first
    assert active(run(messages, [entry(1, "dragon")])) == []
    assert active(run(messages, [entry(1, "dragon", scan_depth=3)])) == [1]
    assert active(run(messages, [entry(1, "dragon")], books=[book(scan_depth=3)])) == [1]
    assert active(run(messages[:1], [entry(1, "dragon", scan_depth=0)])) == []  # 0 scans no message


@pytest.mark.parametrize(
    ("logic", "text", "fires"),
    [
        ("and_any", "dragon and gold", True),
        ("and_any", "dragon alone", False),
        ("and_all", "dragon, gold and a cave", True),
        ("and_all", "dragon and gold", False),
        ("not_any", "dragon alone", True),
        ("not_any", "dragon and a cave", False),
        ("not_all", "dragon and gold", True),
        ("not_all", "dragon, gold and a cave", False),
    ],
)
def test_secondary_key_logic(logic, text, fires):
    e = entry(1, "dragon", secondary_keys=("gold", "cave"), selective_logic=logic)
    assert active(run([text], [e])) == ([1] if fires else [])


def test_secondary_keys_are_reported_and_ignored_when_not_selective():
    e = entry(1, "dragon", secondary_keys=("gold",))
    assert run(["dragon gold"], [e]).active[0].matched_keys == ("dragon", "gold")
    assert active(run(["dragon"], [replace(e, selective=False)])) == [1]
    assert active(run(["gold"], [e])) == []  # secondary keys alone never activate


def test_regex_keys():
    e = entry(1, r"/drag(on|ons)\b/i")
    assert active(run(["Two DRAGONS fly"], [e])) == [1]
    assert active(run(["dragonfly"], [e])) == []
    assert active(run(["Two DRAGONS"], [entry(1, r"/dragons/")])) == []  # no i flag: case matters
    # Messages start after \x01 (as in SillyTavern), so a regex can anchor on who spoke.
    anchored = entry(1, r"/\x01Alice:[^\x01]*hello/")
    assert active(run(["Alice: well, hello", "Bob: hi"], [anchored])) == [1]
    assert active(run(["Bob: Alice: hello"], [anchored])) == []
    assert active(run(["Sir Tom"], [entry(1, r"/(?<title>Sir) \w+/")])) == [1]  # JS named group


def test_regex_keys_match_every_spelling_their_pattern_allows():
    # Regex keys are prefiltered by the text they open with; these must all still match.
    assert active(run(["ДРАКОН идёт"], [entry(1, "/дракон/i")])) == [1]
    assert active(run(["a DRAKON"], [entry(1, "/dra(g|k)on/i")])) == [1]
    assert active(run(["Dragon!"], [entry(1, r"/\bdragons?\b/i")])) == [1]
    assert active(run(["color"], [entry(1, "/colou?r/")])) == [1]
    assert active(run(["a cat"], [entry(1, "/dog|cat/")])) == [1]
    assert active(run(["Kelvin \u212a"], [entry(1, "/k$/i")])) == [1]  # the Kelvin sign folds to k
    assert active(run(["a dog"], [entry(1, "/dra(g|k)on/i")])) == []


def test_invalid_regex_is_reported_and_matched_as_text():
    result = run(["see /(unclosed/ now"], [entry(1, "/(unclosed/")])
    assert active(result) == [1]
    assert [(p.entry_id, p.key) for p in result.problems] == [(1, "/(unclosed/")]
    assert "not a valid regular expression" in result.problems[0].message
    assert active(run(["see (unclosed now"], [entry(1, "/(unclosed/")])) == []
    # An unescaped slash inside makes it a plain key, as in SillyTavern.
    assert parse_regex_key("/a/b/i") is None and parse_regex_key("dragon") is None
    assert parse_regex_key(r"/a\/b/i").search("A/B")


def test_a_catastrophic_regex_key_scans_in_linear_time():
    # `(a+)+$` against a run of "a" ending in "b" takes Python's backtracking `re` about 2^n steps:
    # 2.6 s at 25 characters on this machine, doubling with each one more. RE2 runs in time linear
    # in the text, so this takes milliseconds; 1 s is a generous bound for a loaded machine.
    evil = "a" * 26 + "b"
    started = time.monotonic()
    result = run([evil], [entry(1, "/(a+)+$/"), entry(2, "/(x+x+)+y/i")])
    assert time.monotonic() - started < 1.0
    assert active(result) == [] and result.problems == []
    assert active(run(["aaaa"], [entry(1, "/(a+)+$/")])) == [1]


def test_javascript_flags_map_to_re2():
    assert active(run(["DRAGON"], [entry(1, "/dragon/i")])) == [1]
    assert active(run(["one\ntwo"], [entry(1, "/^two$/")])) == []
    assert active(run(["one\ntwo"], [entry(1, "/^two$/m")])) == [1]
    assert active(run(["one\ntwo"], [entry(1, "/one.two/")])) == []
    assert active(run(["one\ntwo"], [entry(1, "/one.two/s")])) == [1]
    assert active(run(["a dragon"], [entry(1, "/dragon/gu")])) == [1]
    # Sticky: a fresh regex matches where the scanned text starts (after SillyTavern's \x01).
    assert active(run(["dragon here"], [entry(1, "/\\x01dragon/y")])) == [1]
    assert active(run(["a dragon"], [entry(1, "/dragon/y")])) == []
    assert active(run(["caf\u00e9"], [entry(1, "/caf\\u00e9/")])) == [1]  # JavaScript's \uXXXX


def test_keys_re2_cannot_run_are_named_with_the_reason():
    assert "backreference" in regex_key_problem(r"/(a)\1/")
    assert "backreference" in regex_key_problem(r"/(?<x>a)\k<x>/")
    assert "lookahead" in regex_key_problem("/dragon(?!fly)/")
    assert "lookbehind" in regex_key_problem("/(?<!a)b/")
    assert regex_key_problem("/dragon/i") is None and regex_key_problem("dragon") is None
    entries, notes = turn_off_unrunnable([entry(1, r"/(a)\1/", title="Echo"), entry(2, "dragon")])
    assert [e.enabled for e in entries] == [False, True] and entries[0].keys == (r"/(a)\1/",)
    echo = r"/(a)\1/"
    assert notes == [
        f"Entry “Echo” was turned off: its key {echo} cannot be used, {regex_key_problem(echo)}."
    ]


def test_case_sensitivity_per_entry_and_per_book():
    assert active(run(["the Rose"], [entry(1, "rose")])) == [1]
    assert active(run(["the Rose"], [entry(1, "rose", case_sensitive=True)])) == []
    assert active(run(["the Rose"], [entry(1, "rose")], books=[book(case_sensitive=True)])) == []
    assert active(run(["the Rose"], [entry(1, "Rose")], books=[book(case_sensitive=True)])) == [1]
    assert active(
        run(["the rose"], [entry(1, "Rose", case_sensitive=False)], books=[book(case_sensitive=True)])
    ) == [1]


def test_whole_words():
    assert active(run(["a category"], [entry(1, "cat")])) == []
    assert active(run(["a category"], [entry(1, "cat", match_whole_words=False)])) == [1]
    assert active(run(["a category"], [entry(1, "cat")], books=[book(match_whole_words=False)])) == [1]
    assert active(run(["the cat's tail"], [entry(1, "cat")])) == [1]
    assert active(run(["the magical forest"], [entry(1, "magical forest")])) == [1]
    assert active(run(["the magical forests"], [entry(1, "magical forest")])) == []
    assert active(run(["Jean-Luc smiled"], [entry(1, "jean-luc")])) == [1]
    assert active(run(["走进magical forest。"], [entry(1, "magical forest")])) == [1]
    assert active(run(["the magical forest_x"], [entry(1, "magical forest")])) == []
    # Unicode words: a Cyrillic key is a whole word too, not a prefix of a longer word.
    assert active(run(["Вижу дракона"], [entry(1, "дракон")])) == []
    assert active(run(["Вижу дракон!"], [entry(1, "дракон")])) == [1]


def test_cjk_keys_match_as_substrings_and_cjk_text_bounds_latin_words():
    assert active(run(["这是魔法森林"], [entry(1, "魔法")])) == [1]
    assert active(run(["東京タワーに行った"], [entry(1, "タワー")])) == [1]
    assert active(run(["드래곤이 나타났다"], [entry(1, "드래곤")])) == [1]  # Korean particle attached
    assert active(run(["我见到了Alice。"], [entry(1, "alice")])) == [1]
    assert active(run(["我见到了Alicette。"], [entry(1, "alice")])) == []


def test_disabled_entries_never_fire_and_entries_without_keys_only_as_constants():
    entries = [entry(1, "dragon", enabled=False), entry(2, "dragon", constant=True, enabled=False), entry(3)]
    assert active(run(["dragon"], entries)) == []
    assert active(run(["dragon"], [entry(3, constant=True)])) == [3]


def test_entries_of_books_not_scanned_are_ignored():
    assert active(run(["dragon"], [entry(1, "dragon", book_id=2)])) == []


def test_position_depth_and_role_travel_with_the_active_entry():
    e = entry(1, "dragon", position="at_depth", depth=2, role="assistant")
    a = run(["dragon"], [e]).active[0]
    assert (a.entry.position, a.entry.depth, a.entry.role) == ("at_depth", 2, "assistant")


# --- order of admission and budgets ---------------------------------------------------------------


def test_constants_first_then_key_matches_each_by_order():
    entries = [
        entry(1, "dragon", order=5),
        entry(2, "dragon", order=1),
        entry(3, constant=True, order=900),
        entry(4, constant=True, order=50),
    ]
    result = run(["dragon"], entries)
    assert active(result) == [4, 3, 2, 1]
    assert [a.reason for a in result.active] == ["constant", "constant", "key", "key"]


def test_constants_are_admitted_before_key_matches_when_the_budget_is_tight():
    entries = [
        entry(1, "dragon", order=1, content="k " * 60),
        entry(2, constant=True, order=999, content="c " * 60),
    ]
    result = run(["dragon"], entries, books=[book(token_budget=100)])
    assert active(result) == [2]
    assert [(s.entry.id, s.reason) for s in result.skipped] == [(1, "lorebook budget")]


def test_a_3000_token_entry_never_fits_2048_but_a_smaller_later_entry_does():
    big = entry(1, "dragon", order=1, content="w " * 3000)
    small = entry(2, "dragon", order=2, content="w " * 500)
    result = run(["a dragon"], [big, small])
    assert active(result) == [2]
    (skip,) = result.skipped
    assert (skip.entry.id, skip.tokens, skip.book_used, skip.chat_used) == (1, 3000, 0, 0)
    assert (skip.reason, skip.matched_keys, skip.book.name) == ("lorebook budget", ("dragon",), "World")
    assert result.book_used == {1: 500} and result.chat_used == 500


def test_skipped_entries_report_how_much_was_used_and_which_budget():
    books = [book(id=1, token_budget=100), book(id=2, name="Characters", token_budget=0)]
    entries = [
        entry(1, "a", content="w " * 80, order=1),
        entry(2, "a", content="w " * 30, order=2),  # 80 + 30 > 100: lorebook budget
        entry(3, "a", content="w " * 50, order=1, book_id=2),  # 80 + 50 > 120: chat budget
        entry(4, "a", content="w " * 20, order=2, book_id=2),  # fits both
    ]
    result = run(["a"], entries, books=books, chat_token_budget=120)
    assert active(result) == [1, 4]
    # Admission runs by order across books: 1 (order 1), 3 (order 1, book 2), 2, 4.
    assert [(s.entry.id, s.reason, s.book_used, s.chat_used) for s in result.skipped] == [
        (3, "chat budget", 0, 80),
        (2, "lorebook budget", 80, 80),
    ]
    both = run(["a"], entries[:2], books=[book(token_budget=100)], chat_token_budget=100)
    assert [(s.entry.id, s.reason) for s in both.skipped] == [(2, "lorebook and chat budgets")]


def test_zero_budgets_are_unlimited():
    entries = [entry(i, "a", content=f"w{i} " * 5000) for i in range(1, 4)]
    assert active(run(["a"], entries, books=[book(token_budget=0)], chat_token_budget=0)) == [1, 2, 3]
    assert active(run(["a"], entries, books=[book(token_budget=0)])) == [1]  # chat default 8192


def test_entry_limit():
    entries = [entry(i, "a") for i in range(1, 6)]
    result = run(["a"], entries, books=[book(entry_limit=3)])
    assert active(result) == [1, 2, 3]
    assert [(s.entry.id, s.reason) for s in result.skipped] == [(4, "entry limit"), (5, "entry limit")]
    assert len(run(["a"], entries, books=[book(entry_limit=0)]).active) == 1  # clamped to 1..1000


def test_render_runs_once_per_activated_entry_before_counting_and_empty_entries_are_not_listed():
    calls = []

    def render(e):
        calls.append(e.id)
        return {1: "  ", 2: "Rendered {{char}} text"}.get(e.id, e.content)

    counted = []

    def count(text):
        counted.append(text)
        return words(text)

    request = ScanRequest(["a"], [book()], [entry(1, "a"), entry(2, "a"), entry(3, "b")])
    result = scan(request, count=count, render=render)
    assert calls == [1, 2]  # entry 3 did not match: its macros never ran
    assert counted == ["Rendered {{char}} text"]
    assert active(result) == [2] and result.active[0].text == "Rendered {{char}} text"
    assert rejected(result) == {1: "empty"}


# --- probability -----------------------------------------------------------------------------------


def test_probability_is_seeded_per_generation():
    e = entry(1, "a", probability=50)
    outcomes = [bool(run(["a"], [e], seed=seed).active) for seed in range(400)]
    assert 150 < sum(outcomes) < 250
    assert outcomes == [bool(run(["a"], [e], seed=seed).active) for seed in range(400)]  # reproducible
    lost = next(seed for seed, fired in enumerate(outcomes) if not fired)
    assert rejected(run(["a"], [e], seed=lost)) == {1: "probability"}
    assert active(run(["a"], [replace(e, use_probability=False)], seed=lost)) == [1]
    assert all(not run(["a"], [replace(e, probability=0)], seed=s).active for s in range(50))
    assert all(run(["a"], [replace(e, probability=100)], seed=s).active for s in range(50))


def test_rolls_do_not_depend_on_other_entries():
    e = entry(1, "a", probability=50)
    alone = [bool(run(["a"], [e], seed=s).active) for s in range(100)]
    crowded = [1 in active(run(["a"], [entry(9, "a", probability=30), e], seed=s)) for s in range(100)]
    assert alone == crowded


# --- timed effects -----------------------------------------------------------------------------------


def test_sticky_keeps_an_entry_active_for_n_messages_without_its_key():
    e = entry(1, "dragon", sticky=3)
    first = run(["dragon"], [e], message_count=10)
    assert first.timed == {1: TimedState(started_at=10, sticky_until=13, cooldown_until=13)}
    later = run(["nothing"], [e], message_count=12, timed=first.timed)
    assert active(later) == [1] and later.active[0].reason == "sticky"
    assert later.timed == first.timed  # re-triggering or staying sticky does not extend it
    assert active(run(["nothing"], [e], message_count=13, timed=first.timed)) == []
    assert run(["nothing"], [e], message_count=13, timed=first.timed).timed == {}


def test_sticky_skips_the_probability_roll():
    e = entry(1, "dragon", sticky=4, probability=1)
    timed = {1: TimedState(10, 14, 14)}
    assert active(run(["nothing"], [e], message_count=12, timed=timed, seed=3)) == [1]


def test_cooldown_blocks_refiring_then_expires():
    e = entry(1, "dragon", cooldown=4)
    first = run(["dragon"], [e], message_count=10)
    assert first.timed == {1: TimedState(10, 10, 14)}
    blocked = run(["dragon"], [e], message_count=12, timed=first.timed)
    assert active(blocked) == [] and rejected(blocked) == {1: "cooldown"}
    assert active(run(["dragon"], [e], message_count=14, timed=blocked.timed)) == [1]


def test_cooldown_starts_after_sticky_ends():
    e = entry(1, "dragon", sticky=2, cooldown=2)
    timed = run(["dragon"], [e], message_count=4).timed
    assert run(["dragon"], [e], message_count=5, timed=timed).active[0].reason == "sticky"
    assert rejected(run(["dragon"], [e], message_count=6, timed=timed)) == {1: "cooldown"}
    assert active(run(["dragon"], [e], message_count=8, timed=timed)) == [1]


def test_a_swipe_redoes_the_turn_as_if_the_effect_never_started():
    e = entry(1, "dragon", cooldown=5)
    first = run(["dragon"], [e], message_count=10)
    swipe = run(["dragon"], [e], message_count=10, timed=first.timed)  # same point in the chat
    assert active(swipe) == [1] and swipe.timed == first.timed


def test_effects_of_entries_not_scanned_survive_until_they_expire():
    timed = {7: TimedState(2, 4, 9)}
    assert run(["x"], [entry(1, "a")], message_count=6, timed=timed).timed == timed
    assert run(["x"], [entry(1, "a")], message_count=9, timed=timed).timed == {}


def test_delay_holds_an_entry_until_the_chat_has_enough_messages():
    e = entry(1, "dragon", delay=5)
    assert rejected(run(["dragon"], [e], message_count=4)) == {1: "delay"}
    assert active(run(["dragon"], [e], message_count=5)) == [1]


# --- inclusion groups ---------------------------------------------------------------------------------


def test_one_entry_per_inclusion_group_by_weight():
    entries = [
        entry(1, "a", group="weather", group_weight=25),
        entry(2, "a", group="weather", group_weight=75),
    ]
    winners = [active(run(["a"], entries, seed=s)) for s in range(400)]
    assert all(len(w) == 1 for w in winners)
    assert 60 < sum(w == [1] for w in winners) < 140
    assert rejected(run(["a"], entries, seed=0)) in ({1: "group"}, {2: "group"})
    assert winners == [active(run(["a"], entries, seed=s)) for s in range(400)]


def test_zero_weight_never_wins_against_a_weighted_member():
    entries = [entry(1, "a", group="g", group_weight=0), entry(2, "a", group="g")]
    assert all(active(run(["a"], entries, seed=s)) == [2] for s in range(50))


def test_prioritize_inclusion_picks_the_highest_order():
    entries = [
        entry(1, "a", group="g", order=10, group_override=True),
        entry(2, "a", group="g", order=30, group_override=True),
        entry(3, "a", group="g", order=99),
    ]
    assert all(active(run(["a"], entries, seed=s)) == [2] for s in range(20))


def test_entries_in_several_groups_and_ungrouped_entries():
    entries = [
        entry(1, "a", group="x, y", group_override=True),
        entry(2, "a", group="y"),
        entry(3, "a", group="x"),
        entry(4, "a"),
    ]
    assert active(run(["a"], entries)) == [1, 4]


def test_a_sticky_member_keeps_its_group():
    entries = [entry(1, "a", group="g", sticky=5), entry(2, "a", group="g", group_override=True)]
    timed = {1: TimedState(10, 15, 15)}
    assert active(run(["a"], entries, message_count=12, timed=timed)) == [1]


def test_group_scoring_keeps_the_best_match():
    entries = [entry(1, "dragon", group="g"), entry(2, "dragon", "red", group="g")]
    scored = [
        active(run(["red dragon"], entries, books=[book(use_group_scoring=True)], seed=s)) for s in range(30)
    ]
    assert all(w == [2] for w in scored)
    per_entry = [replace(e, use_group_scoring=True) for e in entries]
    assert all(active(run(["red dragon"], per_entry, seed=s)) == [2] for s in range(30))
    unscored = {tuple(active(run(["red dragon"], entries, seed=s))) for s in range(60)}
    assert unscored == {(1,), (2,)}


# --- recursion ----------------------------------------------------------------------------------------


def chain(n: int, **kw) -> list[LoreEntry]:
    """Entry i is keyed "k{i}" and its content mentions "k{i+1}"."""
    return [entry(i, f"k{i}", content=f"see k{i + 1}", recursion=True, **kw) for i in range(1, n + 1)]


def test_recursion_finds_entries_mentioned_by_active_ones_and_stops_at_max_depth():
    result = run(["k1"], chain(6), books=[book(recursive=True, max_depth=2)])
    assert active(result) == [1, 2, 3]
    assert [a.found_at_depth for a in result.active] == [0, 1, 2]
    assert result.passes == 3
    assert active(run(["k1"], chain(20), books=[book(recursive=True, max_depth=99)])) == list(range(1, 12))


def test_each_book_has_its_own_max_depth():
    books = [book(id=1, recursive=True, max_depth=1), book(id=2, name="People", recursive=True, max_depth=3)]
    entries = [
        entry(1, "k1", content="see k2", recursion=True),
        entry(2, "k2", content="see k3 and k4", recursion=True, book_id=2),
        entry(3, "k3"),  # book 1 takes part in pass 1 only: pass 2 cannot reach it
        entry(4, "k4", book_id=2),
    ]
    result = run(["k1"], entries, books=books)
    assert [(a.entry.id, a.found_at_depth) for a in result.active] == [(1, 0), (2, 1), (4, 2)]


def test_recursion_is_off_by_default_per_book_and_per_entry():
    assert active(run(["k1"], chain(3))) == [1]
    no_switch = [replace(e, recursion=False) if e.id == 2 else e for e in chain(4)]
    assert active(run(["k1"], no_switch, books=[book(recursive=True)])) == [1, 2]


def test_recursion_text_may_come_from_another_book_into_a_recursive_one():
    books = [book(id=1), book(id=2, name="People", recursive=True)]
    entries = [entry(1, "k1", content="see k2", recursion=True), entry(2, "k2", book_id=2)]
    assert active(run(["k1"], entries, books=books)) == [1, 2]
    entries = [entry(1, "k1", content="see k2", recursion=True, book_id=2), entry(2, "k2")]
    assert active(run(["k1"], entries, books=books)) == [1]  # book 1 is not recursive


def test_exclude_recursion_entries_fire_from_messages_only():
    entries = [entry(1, "k1", content="see k2", recursion=True), entry(2, "k2", exclude_recursion=True)]
    assert active(run(["k1"], entries, books=[book(recursive=True)])) == [1]
    assert active(run(["k1 k2"], entries, books=[book(recursive=True)])) == [1, 2]


def test_delay_until_recursion_waits_for_its_level():
    books = [book(recursive=True, max_depth=3)]
    first = entry(1, "k1", content="see k2", recursion=True)
    delayed = entry(2, "k2", delay_until_recursion=1)
    assert [(a.entry.id, a.found_at_depth) for a in run(["k1"], [first, delayed], books=books).active] == [
        (1, 0),
        (2, 1),
    ]
    # Matched in the messages it still waits for the first recursion pass.
    result = run(["k2 and k1"], [first, delayed], books=books)
    assert [(a.entry.id, a.found_at_depth) for a in result.active] == [(1, 0), (2, 1)]
    level2 = replace(delayed, delay_until_recursion=2)
    assert [(a.entry.id, a.found_at_depth) for a in run(["k1"], [first, level2], books=books).active] == [
        (1, 0),
        (2, 2),
    ]
    stuck = run(["k2"], [delayed], books=[book()])
    assert active(stuck) == [] and rejected(stuck) == {2: "waits for recursion"}


def test_recursive_finds_count_against_every_budget():
    entries = [
        entry(1, "k1", content="see k2 " + "w " * 40, recursion=True),
        entry(2, "k2", content="see k3 " + "w " * 70, recursion=True),
        entry(3, "k3", content="w " * 10),
    ]
    result = run(["k1"], entries, books=[book(recursive=True, token_budget=100)])
    assert active(result) == [1]  # k2 is 72 tokens: 42 + 72 > 100, so k3 is never reached either
    assert [(s.entry.id, s.found_at_depth, s.reason, s.book_used) for s in result.skipped] == [
        (2, 1, "lorebook budget", 42)
    ]
    limited = run(["k1"], entries, books=[book(recursive=True, entry_limit=2)])
    assert active(limited) == [1, 2] and [(s.entry.id, s.reason) for s in limited.skipped] == [
        (3, "entry limit")
    ]
    chat = run(["k1"], entries, books=[book(recursive=True, token_budget=0)], chat_token_budget=120)
    assert active(chat) == [1, 2] and chat.skipped[0].reason == "chat budget"


def test_a_failed_roll_is_not_retried_by_recursion():
    # Entry 2 matches in the message, then again in entry 1's text on the recursion pass. Its one
    # roll is the one a scan without recursion makes: a retry would turn some losses into wins (a
    # new roll) or list the loss twice (the same roll).
    k2 = entry(2, "k2", probability=50)
    entries = [entry(1, "k1", content="see k2", recursion=True), k2]
    outcomes = set()
    for seed in range(40):
        wins = bool(run(["k2"], [k2], seed=seed).active)
        outcomes.add(wins)
        result = run(["k2 k1"], entries, books=[book(recursive=True)], seed=seed)
        assert result.passes == 2  # the recursion pass ran, over "see k2"
        found = [(a.entry.id, a.found_at_depth) for a in result.active]
        lost = [(r.entry.id, r.reason, r.found_at_depth) for r in result.rejected]
        if wins:
            assert (found, lost) == ([(1, 0), (2, 0)], []), seed
        else:
            assert (found, lost) == ([(1, 0)], [(2, "probability", 0)]), seed
    assert outcomes == {True, False}  # both kinds of seed were tried


def test_a_group_that_fired_takes_no_recursive_member():
    entries = [
        entry(1, "k1", content="see k2", recursion=True, group="g"),
        entry(2, "k2", group="g"),
    ]
    result = run(["k1"], entries, books=[book(recursive=True)])
    assert active(result) == [1] and rejected(result) == {2: "group"}


# --- compiled books and the test panel -----------------------------------------------------------


def test_compiled_books_are_reused_and_a_stale_one_is_recompiled():
    b = book()
    entries = [entry(1, "dragon")]
    compiled = {1: compile_book(b, entries)}
    request = ScanRequest(["dragon"], [b], entries)
    assert active(scan(request, count=words, render=lambda e: e.content, compiled=compiled)) == [1]
    changed = [entry(1, "griffin")]
    request = ScanRequest(["dragon"], [b], changed)
    assert active(scan(request, count=words, render=lambda e: e.content, compiled=compiled)) == []


def test_compiling_from_all_entries_and_passing_them_in_another_order():
    books = [book(id=1), book(id=2, name="Other")]
    entries = [entry(1, "dragon"), entry(2, "dragon", book_id=2), entry(3, "elf")]
    compiled = {b.id: compile_book(b, entries) for b in books}
    assert [e.id for e in compiled[1].entries] == [1, 3]
    request = ScanRequest(["dragon elf"], books, list(reversed(entries)))
    # Recompiled for the new order: ties in Order follow the entries as given, book by book.
    assert active(scan(request, count=words, render=lambda e: e.content, compiled=compiled)) == [3, 1, 2]


def test_scan_text_for_the_keyword_test_panel():
    entries = [entry(1, "dragon", delay=50), entry(2, "dragon", cooldown=3), entry(3, "wyrm")]
    result = scan_text("A dragon!", [book()], entries, count=words)
    assert active(result) == [1, 2]
    assert active(scan_text("A dragon!", [book()], entries, count=words, render=lambda e: "")) == []


# --- the same text from two books ------------------------------------------------------------------


def test_an_entry_whose_text_was_already_sent_is_left_out_and_names_the_first():
    books = [book(id=1, name="Eldoria"), book(id=2, name="Eldoria (2)")]
    entries = [
        entry(1, "shadowfang", content="Shadowfangs  hunt\nat night.", title="shadowfang"),
        entry(2, "shadowfang", content=" Shadowfangs hunt at night. ", book_id=2, title="shadowfang"),
        entry(3, "glade", content="The glade is safe.", book_id=2),
    ]
    result = run(["a shadowfang in the glade"], entries, books=books)
    assert active(result) == [1, 3]
    (twin,) = result.rejected
    assert (twin.entry.id, twin.reason, twin.same_as.entry.id, twin.same_as.book.name) == (
        2,
        "same text",
        1,
        "Eldoria",
    )
    # Left out before the budgets: it takes no tokens.
    assert result.book_used == {1: 4, 2: 4} and result.chat_used == 8


def test_the_first_by_the_usual_order_is_sent_a_constant_before_a_keyword_entry():
    books = [book(id=1), book(id=2, name="Other")]
    entries = [
        entry(1, "dragon", content="Dragons sleep."),
        entry(2, content="Dragons sleep.", constant=True, book_id=2),
    ]
    result = run(["a dragon"], entries, books=books)
    assert active(result) == [2] and rejected(result) == {1: "same text"}
