"""Conditional prompt blocks and tool macros: literal texts in, literal texts out."""

import logging
import re
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from app.chats.core.window import HistoryMessage
from app.prompt.core.builder import CardSnapshot, DynamicBlock, PromptContext, build
from app.prompt.core.conditionals import render_conditionals
from app.prompt.core.macros import TOOL_MACROS, MacroContext, ToolView, expand_macros, tool_view

MEMORY = ToolView(
    names=frozenset({"create_long_term_memory", "update_long_term_memory", "web_search"}),
    families=frozenset({"memory", "web_search"}),
    macros={
        "memory_tool": "create_long_term_memory",
        "memory_update_tool": "update_long_term_memory",
        "web_search_tool": "web_search",
    },
    capabilities={"tool_use": True, "self_teaching": True, "web_search": True, "url_fetch": False},
)
NOTHING = ToolView()


def ex(text, tools=MEMORY, context=None):
    ctx = context or MacroContext({}, random_seed=1, tools=tools)
    return expand_macros(text, char="Aria", user="Rowan", context=ctx)


# TomoriBot's own cases (tests/…/toolPromptMacros.test.ts), with Sugo's tool names.


def test_capability_tool_and_family_branches():
    text = (
        "A{{if capability:self_teaching}}B{{else}}C{{/if}}{{if tool:fetch_url}}D{{/if}}"
        "{{if tool_family:web_search}}F{{/if}}E"
    )
    assert ex(text) == "ABFE"
    assert ex(text, NOTHING) == "ACE"


def test_negation_and_nesting():
    text = "{{if !capability:self_teaching}}off{{else}}on{{if tool:update_long_term_memory}}+update{{/if}}{{/if}}"
    assert ex(text) == "on+update"
    assert ex(text, NOTHING) == "off"
    deep = "{{if tool:web_search}}1{{if !tool:x}}2{{if tool_family:memory}}3{{else}}no{{/if}}{{/if}}{{/if}}"
    assert ex(deep) == "123"
    assert ex("{{IF Tool:WEB_SEARCH}}yes{{ELSE}}no{{/IF}}") == "yes"  # case-insensitive, like every macro


def test_a_chosen_branch_keeps_its_whitespace():
    assert ex("before\n{{if capability:web_search}}  kept\n{{/if}}after") == "before\n  kept\nafter"
    assert ex("{{if tool:web_search}}one\n\n\n\ntwo{{/if}}") == "one\n\n\n\ntwo"


def test_unknown_names_are_false_even_negated_and_logged_once(caplog):
    context = MacroContext({}, tools=MEMORY)
    with caplog.at_level(logging.DEBUG, logger="app.prompt.core.macros"):
        text = "{{if !capability:not_real}}unsafe{{else}}fallback{{/if}}"
        assert ex(text, context=context) == "fallback"
        assert ex(text, context=context) == "fallback"
        assert ex("{{if !tool_family:not_a_family}}unsafe{{/if}}|", context=context) == "|"
    assert context.condition_warnings == {
        "Unknown prompt condition: !capability:not_real",
        "Unknown prompt condition: !tool_family:not_a_family",
    }
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warned == sorted(context.condition_warnings)  # each once; the repeat went to debug
    # A tool name is never unknown: it is declared this turn or it is not.
    assert ex("{{if !tool:never_heard_of}}not declared{{/if}}") == "not declared"


def test_tomoribot_capabilities_sugo_leaves_out_are_known_and_false():
    assert ex("{{if !capability:image_generation}}no images{{else}}images{{/if}}") == "no images"
    assert ex("{{if capability:voice_message}}voice{{/if}}.") == "."


def test_malformed_blocks_are_left_out_with_the_text_around_kept():
    for text in (
        "before{{if capability:self_teaching}}hidden{{else extra}}fallback{{/if}}after",
        "before{{if tool:a}}x{{else}}y{{else}}z{{/if}}after",  # one {{else}} per block
        "before{{if capability: self_teaching}}hidden{{/if}}after",  # does not parse
        "before{{if}}hidden{{/if}}after",
        "before{{if tool:a and tool:b}}hidden{{/if}}after",  # no and/or
        "before{{if tool:web_search}}hidden{{/if tool:web_search}}after",
    ):
        assert ex(text) == "beforeafter", text
    assert ex("a{{if tool:web_search}}b{{if bad}}c{{/if}}d{{/if}}e") == "abde"  # only the bad one goes


def test_stray_tags_are_dropped():
    assert ex("a{{/if}}b{{else}}c") == "abc"


def test_unclosed_blocks_drop_everything_from_their_opening_tag():
    assert ex("before{{if capability:self_teaching}}hidden") == "before"
    assert ex("a{{if tool:web_search}}b{{if tool:web_search}}c{{/if}}d") == "a"
    assert ex("a{{if tool:web_search}}b{{/if}}c{{if tool:x}}d{{else}}e") == "abc"


def test_an_empty_block_takes_one_blank_line_separator_with_it():
    assert ex("intro.\n\n{{if tool:absent}}skipped{{/if}}\n\noutro.") == "intro.\n\noutro."
    assert (
        ex("intro.\n\n{{if tool:absent}}a{{/if}}{{if tool:absent}}b{{/if}}\n\noutro.") == "intro.\n\noutro."
    )
    assert ex("intro.\n\n{{if tool:web_search}}kept{{/if}}\n\noutro.") == "intro.\n\nkept\n\noutro."
    assert ex("before {{if tool:absent}}gone{{/if}} after") == "before  after"  # inline: nothing to collapse
    assert ex("intro.\n \n{{if tool:absent}}x{{/if}}\t\n\noutro.") == "intro.\n \noutro."
    # A paragraph whose block is inside a chosen branch collapses there too.
    nested = "{{if tool:web_search}}A\n\n{{if tool:absent}}B{{/if}}\n\nC{{/if}}"
    assert ex(nested) == "A\n\nC"


def test_legacy_handlebars_blocks_stay_as_written():
    for text in ("{{#if self_teaching}}legacy{{/if}}", "{{#if a}}x{{else}}y{{/if}}", "{{#each xs}}{{/each}}"):
        assert ex(text) == text
    assert ex("{{#each xs}}{{if tool:web_search}}A{{else}}B{{/if}}{{/each}}") == "{{#each xs}}A{{/each}}"
    assert ex("{{if tool:web_search}}{{#if x}}keep{{/if}}{{/if}}") == "{{#if x}}keep{{/if}}"
    assert ex("{{if tool:absent}}{{#if x}}gone{{/if}}{{/if}}!") == "!"
    assert ex("{{#if x}}unclosed {{char}}") == "{{#if x}}unclosed Aria"
    assert ex("{{unless x}}") == "{{unless x}}"


def test_conditionals_run_before_other_macros_and_macros_run_inside_the_chosen_branch():
    variables = {}
    context = MacroContext(variables, tools=MEMORY)
    text = "{{if tool:absent}}{{setvar::x::1}}{{else}}{{setvar::y::{{char}}}}{{/if}}[{{getvar::y}}]"
    assert ex(text, context=context) == "[Aria]"
    assert variables == {"y": "Aria"}
    assert ex("{{setvar::v::{{if tool:web_search}}on{{else}}off{{/if}}}}{{getvar::v}}") == "on"
    # A tag inside a comment is not read; the comment still disappears.
    assert ex("{{// {{if tool:absent}} unclosed }}rest") == "rest"
    assert ex("{{if tool:web_search}}{{// note}}A{{/if}}") == "A"


def test_without_a_context_nothing_is_evaluated():
    text = "{{if tool:web_search}}A{{else}}B{{/if}} {memory_tool} {{user}}"
    assert (
        expand_macros(text, char="Aria", user="Rowan")
        == "{{if tool:web_search}}A{{else}}B{{/if}} {memory_tool} Rowan"
    )


def test_with_no_tool_information_tools_are_false_and_capabilities_read_as_off():
    assert ex("{{if !tool:web_search}}offline{{/if}}", None) == "offline"
    assert ex("{{if tool_family:memory}}m{{else}}no memory{{/if}}", None) == "no memory"
    assert ex("{{if capability:tool_use}}tools{{else}}talk only{{/if}}", None) == "talk only"
    assert ex("{{if !capability:tool_use}}talk only{{/if}}", None) == "talk only"
    assert (
        ex("{{if capability:time_awareness}}t{{/if}}", ToolView(capabilities={"time_awareness": True})) == "t"
    )


# Tool macros.


def test_tool_macros_name_the_declared_function():
    text = "Use {memory_tool}; fix with {memory_update_tool}; look up with {WEB_SEARCH_TOOL}."
    assert (
        ex(text) == "Use create_long_term_memory; fix with update_long_term_memory; look up with web_search."
    )


def test_missing_tools_read_as_plain_words_naming_no_function():
    text = " ".join("{" + name + "}" for name in TOOL_MACROS) + " {pin_tool} {timestamp_refresh_tool}"
    out = ex(text, NOTHING)
    assert "{" not in out and "_" not in out and "(not available now)" in out
    assert ex("{web_search_tool}", NOTHING) == "a web search (not available now)"
    assert ex("{memory_tool}", None) == TOOL_MACROS["memory_tool"]
    for function in ("create_long_term_memory", "web_search", "fetch_url", "create_task", "read_document"):
        assert function not in out


def test_aliases_and_an_mcp_replacement():
    view = ToolView(
        names=frozenset({"manage_message", "message_metadata", "mcp_search__brave"}),
        macros={
            "manage_message_tool": "manage_message",
            "message_metadata_tool": "message_metadata",
            "web_search_tool": "mcp_search__brave",
        },
    )
    assert ex("{pin_tool} {timestamp_refresh_tool} {web_search_tool}", view) == (
        "manage_message message_metadata mcp_search__brave"
    )


def test_unknown_tool_macros_and_json_stay_as_written():
    text = '{something_tool} {memory} {"a": {"b": [1, 2]}} {{memory_tool}} {{{user}}} { memory_tool }'
    assert (
        ex(text) == '{something_tool} {memory} {"a": {"b": [1, 2]}} {{memory_tool}} {Rowan} { memory_tool }'
    )


def test_tool_macro_output_is_never_rescanned():
    view = ToolView(macros={"memory_tool": "{{user}}"})
    assert ex("{memory_tool}", view) == "{{user}}"
    context = MacroContext({"x": "{memory_tool} {{if tool:web_search}}A{{/if}}"}, tools=MEMORY)
    assert ex("{{getvar::x}}", context=context) == "{memory_tool} {{if tool:web_search}}A{{/if}}"


def test_evaluation_before_tool_macros_keeps_missing_tools_out_of_the_prompt():
    text = "{{if tool:create_long_term_memory}}Use {memory_tool} when a detail matters.{{/if}}"
    assert ex(text) == "Use create_long_term_memory when a detail matters."
    assert ex(text, NOTHING) == ""


@dataclass(frozen=True)
class FakeTool:
    name: str
    family: str
    macro: str | None
    source: str = "built-in"


def test_tool_view_prefers_an_mcp_replacement_and_keeps_families():
    tools = [
        FakeTool("web_search", "web_search", "web_search_tool"),
        FakeTool("mcp_kagi__search", "web_search", "web_search_tool", source="mcp:kagi"),
        FakeTool("mcp_other__search", "web_search", "web_search_tool", source="mcp:other"),
        FakeTool("create_long_term_memory", "memory", "memory_tool"),
        FakeTool("mcp_notes__add", "mcp", None, source="mcp:notes"),
    ]
    view = tool_view(tools, capabilities={"tool_use": True})
    assert view.macros == {"web_search_tool": "mcp_kagi__search", "memory_tool": "create_long_term_memory"}
    assert view.families == {"web_search", "memory", "mcp"}
    assert "mcp_notes__add" in view.names and view.capabilities == {"tool_use": True}
    assert tool_view(tools[:1], capabilities={}).macros == {"web_search_tool": "web_search"}


# Hostile input: structure, not time.


def test_hostile_input_stays_bounded_and_keeps_its_structure():
    n = 30_000  # deep enough to break any recursion; linear work keeps it to about a second
    assert ex("{{if tool:web_search}}a" * n + "{{/if}}" * n) == "a" * n  # deep nesting, all kept
    assert ex("{{if tool:absent}}a" * n + "{{/if}}" * n) == ""
    assert ex("x{{if tool:web_search}}" * n) == "x"  # every one unclosed
    assert ex("{{else}}{{/if}}" * n) == ""
    assert ex("{{if " + " " * n + "tail") == "{{if " + " " * n + "tail"
    assert ex("{{#if x}}" * n) == "{{#if x}}" * n
    assert ex("{{//c}}" * n + "{{if tool:web_search}}A{{/if}}") == "A"
    assert ex("{memory_tool}" * 10_000) == "create_long_term_memory" * 10_000  # within the budget
    long_condition = "{{if tool:" + "a" * n + "}}x{{/if}}!"
    context = MacroContext({}, tools=MEMORY)
    assert ex(long_condition, context=context) == "!"
    assert ex("{{if " + "?" * n + "}}x{{/if}}!", context=context) == "!"
    assert all(len(w) < 200 for w in context.condition_warnings)


# An independent, recursive reading of the same rules (TomoriBot's parse-then-render), compared on
# random soups of tags.
TAGS = {
    "{{if tool:a}}": ("if", "tool:a"),
    "{{if !tool:a}}": ("if", "!tool:a"),
    "{{if tool:b}}": ("if", "tool:b"),
    "{{if capability:nope}}": ("if", "capability:nope"),
    "{{if !capability:nope}}": ("if", "!capability:nope"),
    "{{if bad cond}}": ("if", None),
    "{{else}}": ("else", ""),
    "{{else x}}": ("else", "x"),
    "{{/if}}": ("close", ""),
}
VALUES = {
    "tool:a": True,
    "!tool:a": False,
    "tool:b": False,
    "capability:nope": False,
    "!capability:nope": False,
}


def reference(text):
    root, stack = [], []
    for token in re.split(r"(\{\{[^{}]*\}\})", text):
        if not token:
            continue
        kind, arg = TAGS.get(token, ("text", token))
        into = stack[-1][stack[-1]["branch"]] if stack else root
        if kind == "text":
            into.append(("text", token))
        elif kind == "if":
            stack.append({"cond": arg, "then": [], "else": [], "branch": "then", "bad": arg is None})
        elif kind == "else" and stack:
            frame = stack[-1]
            frame["bad"] |= bool(arg) or frame["branch"] == "else"
            frame["branch"] = "else"
        elif kind == "close" and stack:
            frame = stack.pop()
            node = (
                ("dropped",) if frame["bad"] else ("if", VALUES[frame["cond"]], frame["then"], frame["else"])
            )
            (stack[-1][stack[-1]["branch"]] if stack else root).append(node)
    return render(root)


def render(nodes):
    out, drop = "", False
    for node in nodes:
        if node[0] == "text":
            out += re.sub(r"\A[^\S\n]*\n[^\S\n]*\n", "", node[1]) if drop else node[1]
            drop = False
            continue
        branch = "" if node[0] == "dropped" else render(node[2] if node[1] else node[3])
        out += branch
        drop = branch == "" and re.search(r"\n[^\S\n]*\n[^\S\n]*\Z", out) is not None
    return out


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from([*TAGS, "x", "y", "\n", "\n\n", " ", " \n \n "]), max_size=30))
def test_the_one_pass_agrees_with_a_recursive_reading(tokens):
    text = "".join(tokens)
    view = ToolView(names=frozenset({"a"}))
    assert render_conditionals(text, view, warn=lambda _: None) == reference(text)


# The builder: prompts and card fields are templates, chat messages and tool results are data.


def test_chat_messages_and_tool_results_stay_literal_while_the_card_is_evaluated():
    template = "{{if tool:create_long_term_memory}}Use {memory_tool}.{{else}}No memory.{{/if}}"
    card = CardSnapshot(1, "Aria", description="A bard.", system_prompt="Main. " + template)
    messages = (
        HistoryMessage(1, "user", "Rowan", "Say " + template),
        HistoryMessage(2, "system", "Tool", "[web_search result] " + template + " {web_search_tool}"),
        HistoryMessage(3, "assistant", "Aria", "I wrote " + template),
    )
    ctx = PromptContext(
        mode="roleplay",
        characters=(card,),
        speaker=card,
        user_name="Rowan",
        persona_description="",
        messages=messages,
        context_size=8192,
        reply_reserve=512,
        dynamic=(DynamicBlock("recalled_memories", "Recalled", "Result: " + template),),
        macros=MacroContext({}, tools=MEMORY),
    )
    sent = build(ctx).messages
    assert sent[0]["content"].startswith("Main. Use create_long_term_memory.")
    contents = [m["content"] for m in sent[1:]]
    assert "Say " + template in contents
    assert "[web_search result] " + template + " {web_search_tool}" in contents
    assert "I wrote " + template in contents
    assert any(c == "Result: " + template for c in contents)
    without = build(PromptContext(**{**ctx.__dict__, "macros": MacroContext({}, tools=NOTHING)})).messages
    assert without[0]["content"].startswith("Main. No memory.")


SOUP = [
    *TAGS,
    "{{#if x}}",
    "{{/each}}",
    "{{#each y}}",
    "{{// c",
    "}}",
    "{{",
    "{{char}}",
    "{{setvar::v::1}}",
    "{{getvar::v}}",
    "{memory_tool}",
    "{web_search_tool}",
    "{",
    "}",
    "x",
    "\n\n",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(SOUP), max_size=40))
def test_any_mix_of_tags_comments_and_macros_expands_without_error(tokens):
    text = "".join(tokens)
    rendered = render_conditionals(text, MEMORY, warn=lambda _: None)
    assert len(rendered) <= len(text)  # blocks only ever take text away
    if "{{if" not in text and "{{else" not in text and "{{/if" not in text:
        assert rendered == text
    assert isinstance(ex(text), str)
