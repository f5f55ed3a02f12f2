"""Presets: their checks, the chat's choices, and how the builder arranges a prompt by one. Literal
expectations, written from the rules (app/presets/core/model.py, app/prompt/core/arrangement.py)."""

from dataclasses import replace

import pytest

from app.chats.core.window import HistoryMessage
from app.presets.core.model import (
    Choice,
    ChoiceOption,
    Preset,
    PresetError,
    Section,
    check_preset,
    chosen_values,
)
from app.prompt.core.arrangement import DEFAULT_PRESET, MARKERS
from app.prompt.core.builder import CardSnapshot, DepthNote, DynamicBlock, PromptContext, build

ARIA = CardSnapshot(1, "Aria", description="{{char}} is a bard.", personality="warm", scenario="A tavern.")


def ctx(preset=None, values=None, **kw) -> PromptContext:
    base = dict(
        mode="roleplay",
        characters=(ARIA,),
        speaker=ARIA,
        user_name="Rowan",
        persona_description="A knight.",
        messages=tuple(
            HistoryMessage(i, "user" if i % 2 else "assistant", "Rowan" if i % 2 else "Aria", f"message {i}")
            for i in range(1, 7)
        ),
        context_size=8192,
        reply_reserve=512,
        preset=preset,
        preset_values=values or {},
    )
    base.update(kw)
    return PromptContext(**base)


def marker(marker_id, name=None, **kw):
    return Section(id=marker_id, name=name or marker_id, marker=marker_id, **kw)


def text(section_id, content, **kw):
    return Section(id=section_id, name=kw.pop("name", section_id.title()), content=content, **kw)


def test_the_default_preset_is_the_layout_and_builds_what_no_preset_builds():
    assert [s.marker for s in DEFAULT_PRESET.sections] == list(MARKERS)
    check_preset(DEFAULT_PRESET, MARKERS)
    note = DepthNote("Keep it short.", depth=2)
    extra = dict(
        depth_notes=(note,),
        dynamic=(DynamicBlock("recalled_memories", "Recalled memories", "[Aria remembers the rain.]"),),
        current_time="Monday, 7 December 2026, 18:00",
    )
    assert build(ctx(None, **extra)) == build(ctx(DEFAULT_PRESET, **extra))


def test_a_preset_orders_roles_wraps_and_fills_its_choices():
    preset = Preset(
        name="Mine",
        wrap="xml",
        sections=(
            text("role", "You narrate in {{pov}}, {{tense}}."),
            marker("character", "Characters"),
            marker("persona", "Persona"),
            text("ask", "Stay with {{char}}.", role="user"),
            marker("chat_history"),
            text("format", "End on an action.", name="Output Format"),
        ),
        choices=(
            Choice("pov", "Point of view?", (ChoiceOption("1", "Second", "second person"),)),
            Choice("tense", "Tense?", (ChoiceOption("p", "Past", "past tense"), ChoiceOption("n", "Now", "present tense"))),
        ),
    )  # fmt: skip # one section or choice per line
    check_preset(preset, MARKERS)
    values = chosen_values(preset.choices, {"tense": ["n"]})
    p = build(ctx(preset, values))
    assert p.messages[0] == {
        "role": "system",
        "content": "<role>\nYou narrate in second person, present tense.\n</role>\n\n"
        "<characters>\nAria is a bard.\nAria's personality: warm\n</characters>\n\n"
        "<persona>\nAbout Rowan: A knight.\n</persona>",
    }
    # Text with another role is its own message. The scenario is not named: it ends the part before the
    # history, where the cache marker ends the whole prefix. With no main prompt section, the preset's
    # "role" stands for Sugo's.
    assert p.messages[1] == {"role": "user", "content": "<ask>\nStay with Aria.\n</ask>"}
    assert p.messages[2] == {
        "role": "system",
        "content": "<scenario>\nScenario: A tavern.\n</scenario>",
        "cache": True,
    }
    assert [m["content"] for m in p.messages[3:9]] == [f"message {i}" for i in range(1, 7)]
    assert p.messages[9] == {
        "role": "system",
        "content": "<output_format>\nEnd on an action.\n</output_format>",
    }
    assert len(p.messages) == 10
    assert not any("next reply" in m["content"] for m in p.messages)


def test_markdown_headings_a_part_turned_off_and_parts_moved_to_a_depth():
    preset = Preset(
        name="Depths",
        wrap="markdown",
        sections=(
            marker("main_prompt", "Main", content="Write as {{char}}."),
            marker("scenario", enabled=False),
            marker("character", "Character"),
            marker("chat_history"),
            marker("persona", "Persona", placement="depth", depth=2, role="user"),
            text("nudge", "Two paragraphs at most.", placement="depth", depth=0, name="Length"),
        ),
    )
    p = build(ctx(preset))
    assert p.messages[0]["content"] == (
        "## Main\nWrite as Aria.\n\n## Character\nAria is a bard.\nAria's personality: warm"
    )
    contents = [m["content"] for m in p.messages]
    assert not any("A tavern" in c for c in contents)
    assert contents[1:] == [
        "message 1",
        "message 2",
        "message 3",
        "message 4",
        "## Persona\nAbout Rowan: A knight.",
        "message 5",
        "message 6",
        "## Length\nTwo paragraphs at most.",
    ]
    assert p.messages[5]["role"] == "user"
    persona = next(b for b in p.blocks if b.kind == "persona")
    assert (persona.group, persona.depth) == ("at_depth", 2)


def test_the_cards_own_prompts_wrap_the_presets_with_original():
    preset = Preset(
        name="Own",
        sections=(
            marker("main_prompt", content="Preset main."),
            marker("chat_history"),
            marker("post_history", content="Preset after."),
        ),
    )
    card = replace(
        ARIA, system_prompt="Card: {{original}}", post_history_instructions="{{original}} Card too."
    )
    p = build(ctx(preset, characters=(card,), speaker=card))
    assert p.messages[0]["content"].startswith("Card: Preset main.")
    assert p.messages[-1] == {"role": "system", "content": "Preset after. Card too."}
    assert build(ctx(preset)).messages[-1] == {"role": "system", "content": "Preset after."}


def test_a_changing_part_above_stable_ones_warns_that_the_cache_breaks():
    recalled = (DynamicBlock("recalled_memories", "Recalled memories", "[Aria remembers the rain.]"),)
    preset = Preset(
        name="Uncached",
        sections=(marker("recalled_memories", "Memories"), marker("character"), marker("chat_history")),
    )
    p = build(ctx(preset, dynamic=recalled))
    assert p.messages[0]["content"].startswith("[Aria remembers the rain.]\n\nAria is a bard.")
    assert any("cached prompt prefix breaks" in w and "Recalled memories" in w for w in p.warnings)
    stable = (marker("main_prompt"), marker("character"), marker("scenario"), marker("persona"))
    last = Preset(name="Cached", sections=(*stable, marker("recalled_memories"), marker("chat_history")))
    assert not any("cached" in w for w in build(ctx(last, dynamic=recalled)).warnings)
    assert not any("cached" in w for w in build(ctx(None, dynamic=recalled)).warnings)


def test_choices_first_option_without_a_pick_multi_select_and_nested_choices():
    choices = (
        Choice("style", "Style?", (ChoiceOption("a", "A", "plain, {{length}}"), ChoiceOption("b", "B", "ornate"))),
        Choice("length", "Length?", (ChoiceOption("s", "Short", "short"), ChoiceOption("l", "Long", "long"))),
        Choice("genres", "Genres?", (ChoiceOption("h", "H", "horror"), ChoiceOption("r", "R", "romance"),
                                     ChoiceOption("m", "M", "mystery")), multi=True, separator=" + "),
    )  # fmt: skip # options on a line each choice
    assert chosen_values(choices, {}) == {"style": "plain, short", "length": "short", "genres": "horror"}
    picked = chosen_values(choices, {"length": ["l"], "genres": ["m", "h"], "style": ["zz"]})
    assert picked == {"style": "plain, long", "length": "long", "genres": "horror + mystery"}


@pytest.mark.parametrize(
    ("preset", "words"),
    [
        (Preset("Big", tuple(text(f"s{i}", "x") for i in range(201))), "201 sections; at most 200"),
        (Preset("Long", (text("s", "x" * 100_001),)), "100,001 characters long; at most 100,000"),
        (Preset("Odd", (marker("moon_phase"),)), "'moon_phase', which Sugo does not know"),
        (Preset("Twice", (text("s", "a"), text("s", "b"))), "needs an identifier of its own"),
        (Preset("Role", (text("s", "a", role="narrator"),)), "role 'narrator'"),
        (Preset("Recent", (text("s", "a", placement="recent"),)), "custom text: place it in the list or at a depth"),
        (Preset("Deep", (text("s", "a", placement="depth", depth=1001),)), "depth must be between 0 and 1000"),
        (Preset(" ", (text("s", "a"),)), "The preset's name is empty"),
        (Preset("Wrap", (), wrap="html"), "Unknown wrap format 'html'"),
        (Preset("History", (marker("chat_history"), replace(marker("chat_history"), id="h2"))), "only once"),
        (
            Preset("Circle", (), choices=(
                Choice("a", "A?", (ChoiceOption("1", "1", "see {{b}}"),)),
                Choice("b", "B?", (ChoiceOption("1", "1", "see {{c}}"),)),
                Choice("c", "C?", (ChoiceOption("1", "1", "back to {{a}}"),)),
            )),
            "refer to each other in a circle: a → b → c → a",
        ),
        (Preset("Macro", (), choices=(Choice("char", "?", (ChoiceOption("1", "1", "x"),)),)), "name of one of Sugo's macros"),
        (Preset("Empty", (), choices=(Choice("mood", "Mood?", ()),)), "needs between 1 and 100 options"),
    ],
)  # fmt: skip # one bad preset per line
def test_a_bad_preset_is_refused_with_the_reason(preset, words):
    with pytest.raises(PresetError) as caught:
        check_preset(preset, MARKERS)
    assert words in str(caught.value)


def test_every_registered_source_is_a_marker_and_every_marker_a_layout_slot():
    from app.prompt.core.arrangement import CORE_KINDS, default_preset, kind_of
    from app.prompt.core.layout import ORDER_OF
    from app.prompt.sources import PromptSource, PromptSources
    from app.sources import default_sources

    sources = default_sources()
    markers = sources.markers()
    for source in sources:
        assert source.kinds, f"{source.name} declares no kinds"
        assert all(kind in ORDER_OF for kind in source.kinds), source.name
        assert all(kind in {kind_of(m) for m in markers} for kind in source.kinds)
    assert {"recalled_memories", "chat_summary", "current_scene_summary", "recalled_scenes", "chat_notes",
            "older_short_term_memory", "current_time", "tool_guidance", "lore_before_char"} <= set(markers)  # fmt: skip # the issue's list
    assert "constraints" not in markers  # a slot nothing fills yet is no marker

    class Weather(PromptSource):
        name = "weather"
        kinds = ("constraints",)

    grown = PromptSources([*sources, Weather()])
    assert "constraints" in grown.markers()
    preset = default_preset(markers)
    check_preset(preset, markers)
    assert [kind_of(s.marker) for s in preset.sections][:3] == [
        k for k in ORDER_OF if k in {*CORE_KINDS, *(k for s in sources for k in s.kinds)}
    ][:3]


def test_a_prefill_ends_the_prompt_for_a_reply_only_and_openai_itself_gets_none():
    from app.connections.core.presets import allows_prefill

    p = build(ctx(None, prefill="{{char}}: "))
    assert p.messages[-1] == {"role": "assistant", "content": "Aria:"} and p.prefill == "Aria:"
    assert build(ctx(None, prefill="x", purpose="impersonate")).prefill == ""
    assert allows_prefill("anthropic", "https://api.anthropic.com/v1")
    assert allows_prefill("openai", "http://127.0.0.1:8080/v1")
    assert not allows_prefill("openai", "https://api.openai.com/v1")
