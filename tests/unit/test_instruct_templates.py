"""SillyTavern context/instruct templates and the raw text-completion prompt: literal texts in, literal
texts out. The expected prompts are written out by hand from SillyTavern's rules (script.js `Generate`,
instruct-mode.js), not produced by the code under test."""

import json
from pathlib import Path

import pytest

from app.connections.core.builtin_templates import BUILTIN_CONTEXT_TEMPLATES, BUILTIN_INSTRUCT_TEMPLATES
from app.connections.core.raw_prompt import (
    InstructTemplate,
    Line,
    StoryFields,
    TemplateError,
    context_template_to_json,
    instruct_template_to_json,
    parse_context_template,
    parse_instruct_template,
    render_text_prompt,
)
from app.connections.core.story_string import render_story_string

PRESETS = Path(__file__).parent.parent / "fixtures" / "sillytavern" / "presets"
CONTEXT_FILES = [PRESETS / "context" / "Default.json", PRESETS / "context" / "ChatML.json"]
INSTRUCT_FILES = [PRESETS / "instruct" / "ChatML.json", PRESETS / "instruct" / "Llama 3 Instruct.json"]


def load(path):
    return json.loads(path.read_text(encoding="utf-8"))


def context(name):
    return parse_context_template(load(PRESETS / "context" / f"{name}.json"))


def instruct(name):
    return parse_instruct_template(load(PRESETS / "instruct" / f"{name}.json"))


STORY = StoryFields(
    system="Write Seraphina's next reply in a fictional chat between Seraphina and Alex.",
    description="Seraphina is a guardian of the Eldoria forest.",
    personality="warm, protective, wise",
    scenario="Alex wakes up in Seraphina's glade after a wolf attack.",
    persona="Alex is a lost traveler.",
)
EXAMPLES = [
    [
        Line("user", "Alex", "Who are you?"),
        Line("assistant", "Seraphina", "*She smiles.* I am Seraphina, guardian of this forest."),
    ]
]
HISTORY = [
    Line("assistant", "Seraphina", "*You wake in a glade.* Welcome, traveler."),
    Line("user", "Alex", "Where am I?"),
    Line("assistant", "Seraphina", "You are safe in my glade."),
]


def render(ctx, ins, history=HISTORY, examples=EXAMPLES, story=STORY, **kw):
    return render_text_prompt(
        story, examples, history, context=ctx, instruct=ins, char="Seraphina", user="Alex", **kw
    )


# ---- files ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", CONTEXT_FILES, ids=lambda p: p.stem)
def test_context_files_round_trip(path):
    original = load(path)
    back = context_template_to_json(parse_context_template(original))
    assert back == original
    assert list(back) == list(original)


@pytest.mark.parametrize("path", INSTRUCT_FILES, ids=lambda p: p.stem)
def test_instruct_files_round_trip(path):
    original = load(path)
    back = instruct_template_to_json(parse_instruct_template(original))
    assert back == original
    assert list(back) == list(original)


def test_the_fixture_files_read_as_sillytavern_wrote_them():
    chatml = instruct("ChatML")
    assert (chatml.input_sequence, chatml.output_suffix, chatml.wrap) == (
        "<|im_start|>user",
        "<|im_end|>\n",
        True,
    )
    assert (chatml.names_behavior, chatml.name, chatml.extra) == ("force", "ChatML", {})
    default = context("Default")
    assert (default.chat_start, default.example_separator, default.always_force_name2) == ("***", "***", True)


def test_builtins_parse_round_trip_and_match_the_shipped_files():
    for data in [*BUILTIN_CONTEXT_TEMPLATES.values()]:
        assert context_template_to_json(parse_context_template(data)) == dict(data)
    for data in BUILTIN_INSTRUCT_TEMPLATES.values():
        assert instruct_template_to_json(parse_instruct_template(data)) == dict(data)
    assert set(BUILTIN_INSTRUCT_TEMPLATES) == {
        "ChatML",
        "Llama 3 Instruct",
        "Mistral V7",
        "Alpaca",
        "Gemma 2",
    }
    assert list(BUILTIN_INSTRUCT_TEMPLATES["Llama 3 Instruct"].items()) == list(
        load(INSTRUCT_FILES[1]).items()
    )
    assert list(BUILTIN_INSTRUCT_TEMPLATES["ChatML"].items()) == list(load(INSTRUCT_FILES[0]).items())
    assert list(BUILTIN_CONTEXT_TEMPLATES["ChatML"].items()) == list(load(CONTEXT_FILES[1]).items())
    assert list(BUILTIN_CONTEXT_TEMPLATES["Default"].items()) == list(load(CONTEXT_FILES[0]).items())


def test_unknown_fields_are_kept_in_their_place():
    original = {"story_string": "{{description}}", "my_tool_note": {"a": [1, 2]}, "name": "Mine"}
    template = parse_context_template(original)
    assert template.extra == {"my_tool_note": {"a": [1, 2]}}
    assert list(context_template_to_json(template).items()) == list(original.items())
    data = {"input_sequence": "U", "output_sequence": "A", "bind_to_context": True, "derived": False}
    assert instruct_template_to_json(parse_instruct_template(data)) == data


def test_a_changed_field_is_written_even_when_the_file_left_it_out():
    from dataclasses import replace

    template = replace(
        parse_instruct_template({"input_sequence": "U", "output_sequence": "A"}), stop_sequence="</s>"
    )
    assert instruct_template_to_json(template) == {
        "input_sequence": "U",
        "output_sequence": "A",
        "stop_sequence": "</s>",
    }
    made = InstructTemplate(input_sequence="U", output_sequence="A")  # not from a file: every field
    assert instruct_template_to_json(made)["names_behavior"] == "force"
    assert len(instruct_template_to_json(made)) == 25


def test_older_instruct_files_are_migrated_and_still_round_trip():
    old = {
        "system_prompt": "Below is an instruction...",
        "input_sequence": "### Instruction:",
        "output_sequence": "### Response:",
        "separator_sequence": "\n\n",
        "names": False,
        "names_force_groups": True,
        "name": "Old Alpaca",
    }
    template = parse_instruct_template(old)
    assert (template.names_behavior, template.output_suffix) == ("force", "\n\n")
    assert parse_instruct_template({**old, "names": True}).names_behavior == "always"
    assert parse_instruct_template({**old, "names_force_groups": False}).names_behavior == "none"
    assert instruct_template_to_json(template) == old


@pytest.mark.parametrize(
    ("parse", "data", "reason"),
    [
        (parse_context_template, ["story_string"], "A context template must be a JSON object, not a list."),
        (parse_instruct_template, "ChatML", "An instruct template must be a JSON object, not text."),
        (parse_context_template, {"name": "X"}, "This is not a context template: it has no story_string."),
        (
            parse_instruct_template,
            {"name": "X"},
            "This is not an instruct template: it has no input_sequence or output_sequence.",
        ),
        (
            parse_instruct_template,
            {"input_sequence": 5, "output_sequence": "A"},
            '"input_sequence" must be text, not a number.',
        ),
        (
            parse_instruct_template,
            {"input_sequence": "U", "output_sequence": "A", "wrap": "yes"},
            '"wrap" must be true or false, not text.',
        ),
        (
            parse_context_template,
            {"story_string": "", "story_string_depth": 1.5},
            '"story_string_depth" must be a whole number, not a number.',
        ),
        (
            parse_instruct_template,
            {"input_sequence": "U", "output_sequence": "A", "names_behavior": "sometimes"},
            '"names_behavior" must be "force", "always" or "none", not "sometimes".',
        ),
        (
            parse_context_template,
            {"story_string": "{{#if system}}{{system}}"},
            "The story string has a {{#if}} without its {{/if}}.",
        ),
    ],
)
def test_bad_files_say_what_is_wrong(parse, data, reason):
    with pytest.raises(TemplateError) as caught:
        parse(data)
    assert caught.value.reason == reason


def test_a_string_past_the_limit_is_refused():
    with pytest.raises(TemplateError) as caught:
        parse_instruct_template({"input_sequence": "x" * 100_001, "output_sequence": "A"})
    assert caught.value.reason == '"input_sequence" is 100,001 characters long; the limit is 100,000.'
    parse_instruct_template({"input_sequence": "x" * 100_000, "output_sequence": "A"})
    with pytest.raises(TemplateError):
        parse_context_template({"story_string": "", "notes": "y" * 100_001})


# ---- the story string ----------------------------------------------------------------------------


def test_story_string_blocks_variables_and_unknown_macros():
    template = (
        "{{#if a}}A={{a}}{{else}}no a{{/if}} {{#unless b}}no b{{/unless}} {{{a}}} {{original}} {{! note }}."
    )
    assert render_story_string(template, {"a": "1", "b": ""}) == "A=1 no b 1 {{original}} ."
    assert render_story_string("{{#if a}}A{{else if b}}B{{else}}C{{/if}}", {"a": "", "b": "x"}) == "B"
    assert render_story_string("{{#if missing}}M{{/if}}{{#unless missing}}U{{/unless}}", {}) == "U"


def test_trim_takes_the_newlines_around_it_and_leading_newlines_go():
    assert render_story_string("\n\nA\n\n{{trim}}\n\nB {{TRIM}} C", {}) == "AB  C"


def test_a_block_tag_alone_on_its_line_takes_the_line_with_it():
    template = "Start\n{{#if a}}\n  {{a}}\n{{/if}}\n{{#if b}}\nB\n{{/if}}\nEnd"
    assert render_story_string(template, {"a": "1", "b": ""}) == "Start\n  1\nEnd"
    assert render_story_string("x {{~ a ~}} y", {"a": "1"}) == "x1y"


# ---- the prompt: SillyTavern's output, written out -----------------------------------------------


def test_chatml_instruct_with_chatml_context():
    # {{trim}} pulls <|im_end|> up to the persona line; the story string then gets its newline (wrap is
    # on). "force" names the user's turn in the examples only; the last message loses its newline and
    # the reply's sequence brings it back.
    prompt = render(context("ChatML"), instruct("ChatML"))
    assert prompt.text == (
        """<|im_start|>system
Write Seraphina's next reply in a fictional chat between Seraphina and Alex.
Seraphina is a guardian of the Eldoria forest.
Seraphina's personality: warm, protective, wise
Scenario: Alex wakes up in Seraphina's glade after a wolf attack.
Alex is a lost traveler.<|im_end|>
<|im_start|>user
Alex: Who are you?<|im_end|>
<|im_start|>assistant
*She smiles.* I am Seraphina, guardian of this forest.<|im_end|>
<|im_start|>assistant
*You wake in a glade.* Welcome, traveler.<|im_end|>
<|im_start|>user
Where am I?<|im_end|>
<|im_start|>assistant
You are safe in my glade.<|im_end|>
<|im_start|>assistant
"""
    )
    assert prompt.stop == (
        "\nAlex:",
        "\n<|im_end|>",
        "\n<|im_start|>user",
        "\n<|im_start|>assistant",
        "\n<|im_start|>system",
    )


def test_llama_3_instruct_with_default_context():
    # The Default context has no system header and its *** separators apply in instruct mode too; with
    # wrap off nothing comes between a suffix and what follows, and stop strings get no newline.
    prompt = render(context("Default"), instruct("Llama 3 Instruct"))
    assert prompt.text == (
        """Write Seraphina's next reply in a fictional chat between Seraphina and Alex.
Seraphina is a guardian of the Eldoria forest.
Seraphina's personality: warm, protective, wise
Scenario: Alex wakes up in Seraphina's glade after a wolf attack.
Alex is a lost traveler.
***
<|start_header_id|>user<|end_header_id|>

Alex: Who are you?<|eot_id|><|start_header_id|>assistant<|end_header_id|>

*She smiles.* I am Seraphina, guardian of this forest.<|eot_id|>***
<|start_header_id|>assistant<|end_header_id|>

*You wake in a glade.* Welcome, traveler.<|eot_id|><|start_header_id|>user<|end_header_id|>

Where am I?<|eot_id|><|start_header_id|>assistant<|end_header_id|>

You are safe in my glade.<|eot_id|><|start_header_id|>assistant<|end_header_id|>

"""
    )
    assert prompt.stop == (
        "\nAlex:",
        "<|eot_id|>",
        "<|start_header_id|>user<|end_header_id|>",
        "<|start_header_id|>assistant<|end_header_id|>",
        "<|start_header_id|>system<|end_header_id|>",
    )


def test_plain_text_with_default_context():
    # Every line named; always_force_name2 opens the reply with the character's name.
    prompt = render(context("Default"), None)
    assert prompt.text == (
        """Write Seraphina's next reply in a fictional chat between Seraphina and Alex.
Seraphina is a guardian of the Eldoria forest.
Seraphina's personality: warm, protective, wise
Scenario: Alex wakes up in Seraphina's glade after a wolf attack.
Alex is a lost traveler.
***
Alex: Who are you?
Seraphina: *She smiles.* I am Seraphina, guardian of this forest.
***
Seraphina: *You wake in a glade.* Welcome, traveler.
Alex: Where am I?
Seraphina: You are safe in my glade.
Seraphina:"""
    )
    assert prompt.stop == ("\nAlex:",)


def test_an_instruct_template_with_every_sequence_empty_gives_plain_text_with_names():
    empty = parse_instruct_template({"input_sequence": "", "output_sequence": "", "stop_sequence": "</s>"})
    prompt = render(context("ChatML"), empty, story=StoryFields(description="A guardian."))
    assert prompt.text == (
        """<|im_start|>system
A guardian.<|im_end|>
Alex: Who are you?
Seraphina: *She smiles.* I am Seraphina, guardian of this forest.
Seraphina: *You wake in a glade.* Welcome, traveler.
Alex: Where am I?
Seraphina: You are safe in my glade.
Seraphina:"""
    )
    assert prompt.stop == ("\nAlex:", "\n</s>")


def test_stop_strings_for_chatml_hold_its_end_token_and_the_user_line():
    stop = render(context("ChatML"), instruct("ChatML")).stop
    assert "\n<|im_end|>" in stop  # SillyTavern puts a newline before each sequence when wrap is on
    assert "\nAlex:" in stop
    use = parse_context_template({**load(CONTEXT_FILES[0]), "use_stop_strings": True, "single_line": True})
    assert render(use, None).stop == ("\n", "\nAlex:", "\n***")


def test_continue_leaves_the_last_message_open():
    prompt = render(context("ChatML"), instruct("ChatML"), continue_last=True)
    assert prompt.text.endswith(
        "<|im_start|>user\nWhere am I?<|im_end|>\n<|im_start|>assistant\nYou are safe in my glade."
    )
    plain = render(context("Default"), None, continue_last=True)
    assert plain.text.endswith(
        "***\nSeraphina: *You wake in a glade.* Welcome, traveler.\nAlex: Where am I?\n"
        "Seraphina: You are safe in my glade."
    )
    on_user = render(context("ChatML"), instruct("ChatML"), history=HISTORY[:2], continue_last=True)
    assert on_user.text.endswith("<|im_end|>\n<|im_start|>user\nWhere am I?")
    assert on_user.stop[:2] == ("\nAlex:", "\nSeraphina:")


def test_impersonate_ends_with_the_users_sequence():
    prompt = render(context("ChatML"), instruct("ChatML"), impersonate=True)
    assert prompt.text.endswith("You are safe in my glade.<|im_end|>\n<|im_start|>user\n")
    assert prompt.stop[:2] == ("\nSeraphina:", "\nAlex:")
    plain = render(context("Default"), None, impersonate=True)
    assert plain.text.endswith("Seraphina: You are safe in my glade.\nAlex:")
    with pytest.raises(ValueError):
        render(context("Default"), None, impersonate=True, continue_last=True)


# ---- the prompt: the rules one by one ------------------------------------------------------------


def test_mistral_v7_without_wrap_and_names_always():
    mistral = parse_instruct_template(
        {**BUILTIN_INSTRUCT_TEMPLATES["Mistral V7"], "names_behavior": "always"}
    )
    prompt = render(context("Default"), mistral, examples=[], story=StoryFields(description="D"))
    assert prompt.text == (
        "D\n***\n Seraphina: *You wake in a glade.* Welcome, traveler.</s>"
        "[INST] Alex: Where am I?[/INST] Seraphina: You are safe in my glade.</s> Seraphina:"
    )


def test_first_and_last_sequences_and_the_user_alignment_message():
    ins = InstructTemplate(
        input_sequence="[U]",
        output_sequence="[A]",
        first_output_sequence="[A1]",
        last_output_sequence="[A-last]",
        last_input_sequence="[U-last]",
        user_alignment_message="Let's begin.",
        first_input_sequence="[U1]",
    )
    ctx = parse_context_template({"story_string": ""})
    prompt = render(ctx, ins, examples=[], story=StoryFields())
    assert prompt.text == (
        "[U1]\nLet's begin.\n"
        "[A1]\n*You wake in a glade.* Welcome, traveler.\n"
        "[U-last]\nWhere am I?\n"
        "[A]\nYou are safe in my glade.\n[A-last]\n"
    )


def test_names_are_written_for_a_speaker_who_is_not_the_chats_own():
    history = [Line("assistant", "Lilith", "Hello."), Line("system", "", "Night falls.")]
    prompt = render(context("ChatML"), instruct("ChatML"), history=history, examples=[], story=StoryFields())
    assert prompt.text == (
        "<|im_start|>system<|im_end|>\n"  # {{trim}} took the newline after "system" too
        "<|im_start|>assistant\nLilith: Hello.<|im_end|>\n"
        "<|im_start|>system\nNight falls.<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_anchors_go_into_the_story_string_or_around_it():
    story = StoryFields(description="D", anchor_before="Before.", anchor_after="After.")
    plain = parse_context_template({"story_string": "{{description}}"})
    assert (
        render(plain, None, history=[], examples=[], story=story).text == "Before.\nD\n\nAfter.\n\nSeraphina:"
    )
    inside = parse_context_template({"story_string": "{{anchorBefore}}|{{description}}|{{anchorAfter}}"})
    assert render(inside, None, history=[], examples=[], story=story).text == "Before.|D|After.\n\nSeraphina:"


def test_old_system_prefix_wraps_the_system_prompt_and_new_story_prefix_wraps_the_story_string():
    story = StoryFields(system="Be kind.", description="D")
    ctx = context("Default")
    old = InstructTemplate(
        input_sequence="U",
        output_sequence="A",
        system_sequence_prefix="[{{name}}]",
        system_sequence_suffix="[/S]",
    )
    assert render(ctx, old, history=[], examples=[], story=story).text.startswith(
        "[System]\nBe kind.\n[/S]\nD\n"
    )
    new = InstructTemplate(
        input_sequence="U", output_sequence="A", story_string_prefix="<sys>", story_string_suffix="</sys>\n"
    )
    assert render(ctx, new, history=[], examples=[], story=story).text.startswith(
        "<sys>\nBe kind.\nD\n</sys>\n***\n"
    )


def test_story_string_in_chat_at_depth():
    ctx = parse_context_template(
        {"story_string": "{{description}}", "story_string_position": 1, "story_string_depth": 1}
    )
    prompt = render(ctx, None, examples=[], story=StoryFields(description="Lore."))
    assert prompt.text == (
        "Seraphina: *You wake in a glade.* Welcome, traveler.\nAlex: Where am I?\n"
        "Lore.\nSeraphina: You are safe in my glade.\nSeraphina:"
    )


def test_skip_examples_keeps_them_as_plain_text():
    chatml = parse_instruct_template({**load(INSTRUCT_FILES[0]), "skip_examples": True})
    prompt = render(context("ChatML"), chatml, history=[], story=StoryFields(description="D"))
    assert prompt.text == (
        "<|im_start|>system\nD<|im_end|>\n"
        "Alex: Who are you?\nSeraphina: *She smiles.* I am Seraphina, guardian of this forest.\n"
        "\n<|im_start|>assistant\n"
    )
