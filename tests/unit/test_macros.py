"""Macro expansion: literal texts in, literal texts out."""

import time
from datetime import datetime

from app.prompt.core.macros import MAX_EXPANSION_CHARS, MAX_VALUE_CHARS, MacroContext, expand_macros

NOW = datetime(2026, 11, 30, 15, 7)


def ex(text, variables=None, **kw):
    kw.setdefault("now", NOW)
    kw.setdefault("random_seed", 1)
    ctx = MacroContext(variables if variables is not None else {}, **kw)
    return expand_macros(text, char="Aria", user="Rowan", context=ctx)


def test_without_a_context_only_char_and_user_expand():
    rest = "{{random::a}} {{roll:1d6}} {{// x}} {{time}} {{setvar::a::b}}"
    assert expand_macros("{{Char}} <BOT> {{ user }} <user> " + rest, char="A", user="B") == "A A B B " + rest


def test_char_and_user_in_all_spellings():
    assert (
        ex("{{char}} {{CHAR}} {{ User }} <BOT> <CHAR> <USER> <usEr>")
        == "Aria Aria Rowan Aria Aria Rowan Rowan"
    )
    assert ex("{{{user}}} {{user::x}} <BOTS>") == "{Rowan} {{user::x}} <BOTS>"


def test_unknown_and_unbalanced_macros_stay_as_written():
    assert ex("{{foo}} {{ noop }} }} {{user") == "{{foo}} {{ noop }} }} {{user"
    assert ex("{{foo::{{user}}}}") == "{{foo::Rowan}}"  # the inner one still runs
    assert ex("{{user}} {{unclosed {{char}} tail") == "Rowan {{unclosed Aria tail"
    assert ex("plain text") == "plain text"
    assert ex("") == ""


def test_time_and_date_come_from_now():
    assert ex("{{time}} on {{DATE}}") == "3:07 PM on November 30, 2026"
    assert ex("{{time}}|{{date}}", now=datetime(2026, 3, 5, 0, 0)) == "12:00 AM|March 5, 2026"
    assert ex("{{time}}", now=datetime(2026, 3, 5, 12, 30)) == "12:30 PM"
    assert ex("{{time_UTC+2}} {{time::x}}") == "{{time_UTC+2}} {{time::x}}"


def test_time_without_now_reads_the_clock():
    ctx = MacroContext({})
    assert expand_macros("{{date}}", char="A", user="B", context=ctx).endswith(str(datetime.now().year))


def test_random_is_reproducible_with_a_seed_and_varies_between_seeds():
    text = "{{random::a::b::c::d}}"
    assert ex(text, random_seed=7) == ex(text, random_seed=7)
    assert {ex(text, random_seed=s) for s in range(60)} == {"a", "b", "c", "d"}
    unseeded = {expand_macros(text, char="", user="", context=MacroContext({})) for _ in range(60)}
    assert unseeded == {"a", "b", "c", "d"}


def test_random_list_forms():
    assert {ex("{{random: x , y }}", random_seed=s) for s in range(40)} == {"x", "y"}  # commas trim
    assert {ex("{{Random:a\\,b,c}}", random_seed=s) for s in range(40)} == {"a,b", "c"}
    assert {ex("{{random:: x:: y}}", random_seed=s) for s in range(40)} == {" x", " y"}  # "::" keeps spaces
    # SillyTavern: "::" after the name but none in the list means commas separate.
    assert {ex("{{random::a,b}}", random_seed=s) for s in range(40)} == {"a", "b"}
    assert ex("{{random::only}}") == "only"
    assert ex("{{random::}} {{random}} {{random a,b}}") == "{{random::}} {{random}} {{random a,b}}"


def test_random_and_roll_follow_one_seeded_stream_per_call():
    a = ex("{{random::1::2::3::4::5::6}}{{random::1::2::3::4::5::6}}{{roll:1d6}}", random_seed=3)
    assert a == ex("{{random::1::2::3::4::5::6}}{{random::1::2::3::4::5::6}}{{roll:1d6}}", random_seed=3)
    assert len({ex("{{random::1::2::3::4::5::6}}" * 8, random_seed=s) for s in range(5)}) == 5


def test_pick_is_stable_for_the_same_chat_text_and_place():
    options = "::".join(str(i) for i in range(20))
    text = f"{{{{pick::{options}}}}} and {{{{pick::{options}}}}} and {{{{pick::{options}}}}}"
    first = ex(text, pick_seed="chat-1", random_seed=1)
    assert first == ex(text, pick_seed="chat-1", random_seed=99)  # not tied to the random seed
    picks = [ex(text, pick_seed=f"chat-{i}").split(" and ") for i in range(10)]
    assert len({p[0] for p in picks}) > 1  # another chat picks differently
    assert any(p[0] != p[1] for p in picks)  # so does another place in the same text
    # Other text around it does not move an earlier pick.
    alone = ex(f"{{{{pick::{options}}}}}", pick_seed="c")
    assert ex(f"Hi. {{{{pick::{options}}}}}", pick_seed="c") == "Hi. " + alone


def test_pick_legacy_comma_form():
    assert {ex("{{PICK:a, b}}", pick_seed=str(s)) for s in range(40)} == {"a", "b"}


def test_roll_gives_integers_in_range():
    assert {ex("{{roll:1d6}}", random_seed=s) for s in range(200)} == {str(i) for i in range(1, 7)}
    assert {int(ex("{{roll:d20}}", random_seed=s)) for s in range(300)} <= set(range(1, 21))
    results = {int(ex("{{ROLL:2d6+3}}", random_seed=s)) for s in range(300)}
    assert min(results) >= 5 and max(results) <= 15 and len(results) > 6
    assert {int(ex("{{roll:1d4-1}}", random_seed=s)) for s in range(100)} == {0, 1, 2, 3}
    assert 1 <= int(ex("{{roll:20}}")) <= 20
    assert 1 <= int(ex("{{roll 1d6}}")) <= 6
    assert 2 <= int(ex("{{roll:: 2 d 6 }}")) <= 12
    assert ex("{{roll:100d1}} {{roll:1d1000000}}").startswith("100 ")


def test_bad_or_oversized_rolls_stay_as_written():
    for text in (
        "{{roll:101d6}}",
        "{{roll:1d1000001}}",
        "{{roll:0d6}}",
        "{{roll:1d0}}",
        "{{roll:abc}}",
        "{{roll}}",
        "{{roll:}}",
        "{{rolls:1d6}}",
        "{{roll:1d6+}}",
        "{{roll:²}}",
    ):
        assert ex(text) == text
    huge = "{{roll:1d" + "9" * 10_000 + "}}"
    assert ex(huge) == huge


def test_setvar_and_getvar_run_left_to_right_on_the_chat_variables():
    variables = {"mood": "calm"}
    assert ex("[{{getvar::mood}}]{{setvar::mood::angry}}[{{getvar:: mood }}]", variables) == "[calm][angry]"
    assert variables == {"mood": "angry"}
    assert ex("[{{getvar::missing}}]") == "[]"
    assert ex("{{setvar::x::a::b}}{{getvar::x}}") == "a::b"  # the value is everything after the name
    assert ex("{{SetVar::x:: spaced }}|{{GETVAR::x}}|") == "| spaced |"
    malformed = "{{setvar::x}} {{setvar::::v}} {{getvar::}} {{getvar:x}}"
    assert ex(malformed) == malformed


def test_addvar_adds_numbers_and_appends_text():
    variables = {"n": "5", "f": "1.5", "t": "ab", "e": ""}
    text = "{{addvar::n::3}}{{addvar::f::0.25}}{{addvar::t::c}}{{addvar::new::2}}{{addvar::e::-4}}{{addvar::s::hi}}"
    assert ex(text, variables) == ""
    assert variables == {"n": "8", "f": "1.75", "t": "abc", "e": "-4", "new": "2", "s": "hi"}
    assert ex("{{setvar::x::0.1}}{{addvar::x::0.2}}{{getvar::x}}") == "0.3"
    assert ex("{{setvar::x::5}}{{addvar::x::x}}{{getvar::x}}") == "5x"
    assert ex("{{setvar::x::2.5}}{{addvar::x::.5}}{{getvar::x}}") == "3"
    assert ex("{{setvar::x::10}}{{addvar::x:: 1 }}{{getvar::x}}") == "11"
    big = "9" * 65  # too long to be a number: appended as text
    assert ex(f"{{{{setvar::x::{big}}}}}{{{{addvar::x::1}}}}{{{{getvar::x}}}}") == big + "1"


def test_nested_macros_expand_inside_out_once():
    assert ex("{{setvar::x::{{user}}}}Hi {{getvar::x}}") == "Hi Rowan"
    assert ex("{{setvar::Aria_mood::shy}}{{getvar::{{char}}_mood}}") == "shy"
    assert ex("{{random::{{user}}::{{user}}}}") == "Rowan"
    assert ex("{{roll:{{getvar::n}}d1}}", {"n": "3"}) == "3"
    assert ex("{{getvar::x}}", {"x": "{{user}} <BOT>"}) == "{{user}} <BOT>"  # output is never rescanned


def test_comments_expand_to_nothing_and_run_nothing():
    assert ex("a{{// note}}b") == "ab"
    assert ex("a{{ //several\nlines\n}}b") == "ab"
    variables = {}
    assert ex("a{{// off: {{setvar::x::1}} {{user}} }}b{{getvar::x}}", variables) == "ab"
    assert variables == {}
    assert ex("{{//}}{{char}}") == "Aria"
    assert ex("a {{// never closed {{user}}") == "a {{// never closed {{user}}"


def test_pathological_input_stays_linear_and_bounded():
    started = time.monotonic()
    deep = "{{a" * 100_000 + "}}" * 100_000
    assert ex(deep) == deep
    opened = "{{" * 200_000 + "{{// x" * 50_000
    assert ex(opened) == opened
    assert ex("{{user}" * 100_000) == "{{user}" * 100_000
    assert ex("<BOT>" * 100_000) == "Aria" * 100_000
    variables = {}
    out = ex("{{setvar::x::" + "y" * 1000 + "}}" + "{{getvar::x}}" * 5_000, variables)
    assert len(out) <= MAX_EXPANSION_CHARS + 5_000 * len("{{getvar::x}}")
    assert out.endswith("{{getvar::x}}") and out.startswith("y" * MAX_EXPANSION_CHARS)
    out = ex("{{setvar::x::ab}}" + "{{addvar::x::{{getvar::x}}}}" * 60 + "{{getvar::x}}", variables)
    assert MAX_VALUE_CHARS // 2 < len(variables["x"]) <= MAX_VALUE_CHARS
    assert time.monotonic() - started < 10  # quadratic work would take minutes here
