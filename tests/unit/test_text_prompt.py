"""The builder's prompt as one raw text (app/prompt/core/text_prompt.py) and a helper's messages as one
(app/connections/core/chat_as_text.py). Expectations written from SillyTavern's rules."""

from app.chats.core.window import HistoryMessage
from app.connections.core.builtin_templates import BUILTIN_CONTEXT_TEMPLATES, BUILTIN_INSTRUCT_TEMPLATES
from app.connections.core.chat_as_text import chat_as_text
from app.connections.core.raw_prompt import Line
from app.connections.core.template_files import parse_context_template, parse_instruct_template
from app.prompt.core.builder import CardSnapshot, DepthNote, GroupCards, PromptContext, build
from app.prompt.core.text_prompt import TextTemplates, example_lines

CHATML = TextTemplates(
    parse_context_template(BUILTIN_CONTEXT_TEMPLATES["ChatML"]),
    parse_instruct_template(BUILTIN_INSTRUCT_TEMPLATES["ChatML"]),
)
ARIA = CardSnapshot(
    1,
    "Aria",
    description="{{char}} is a bard.",
    personality="warm",
    mes_example="<START>\n{{user}}: Hi\n{{char}}: Hey",
)


def ctx(**kw) -> PromptContext:
    base = dict(
        mode="roleplay",
        characters=(ARIA,),
        speaker=ARIA,
        user_name="Rowan",
        persona_description="",
        messages=(
            HistoryMessage(1, "assistant", "Aria", "Hello."),
            HistoryMessage(2, "user", "Rowan", "Hi."),
        ),
        context_size=8192,
        reply_reserve=512,
        text_templates=CHATML,
    )
    base.update(kw)
    return PromptContext(**base)


def test_example_dialogue_reads_as_sillytavern_splits_it():
    raw = "<START>\nRowan: Hi\nAria: Hey\nstill Aria\n<start>\n{{char}}: Alone"
    assert example_lines(raw, char="Aria", user="Rowan") == [
        [Line("user", "Rowan", "Hi"), Line("assistant", "Aria", "Hey\nstill Aria")],
        [Line("assistant", "Aria", "Alone")],
    ]


def test_notes_become_system_lines_and_a_group_names_its_speakers_once():
    bram = CardSnapshot(2, "Bram", description="A smith.")
    p = build(
        ctx(
            characters=(ARIA, bram),
            speaker=bram,
            group=GroupCards(),
            depth_notes=(DepthNote("It rains.", depth=1),),
        )
    )
    text = p.raw.text
    # The joined cards are the description; each member's block as the chat prompt has it.
    assert "## Aria\nAria is a bard.\nAria's personality: warm\n## Bram\nA smith." in text
    assert "<|im_start|>assistant\nAria: Hello.<|im_end|>\n<|im_start|>system\nIt rains.<|im_end|>\n" in text
    assert "Aria: Aria: Hello." not in text  # the template names the speaker, not the builder too
    assert text.endswith(
        "<|im_start|>system\n[Write the next reply only as Bram.]<|im_end|>\n<|im_start|>assistant\nBram:"
    )


def test_a_prefill_opens_the_reply_and_continue_sends_no_nudge():
    assert build(ctx(prefill="*Aria smiles*")).raw.text.endswith("<|im_start|>assistant\n*Aria smiles*")
    cont = build(
        ctx(
            messages=(
                HistoryMessage(1, "user", "Rowan", "Hi."),
                HistoryMessage(2, "assistant", "Aria", "She nods"),
            ),
            purpose="continue",
        )
    )
    assert (
        cont.raw.text.endswith("<|im_start|>assistant\nShe nods")
        and "Continue your last message" not in cont.raw.text
    )


def test_a_helpers_messages_as_one_raw_prompt():
    messages = [
        {"role": "system", "content": "Summarise the chat."},
        {"role": "user", "content": "Aria: Hello."},
        {"role": "assistant", "content": "Summary:"},
    ]
    raw = chat_as_text(messages, BUILTIN_INSTRUCT_TEMPLATES["ChatML"], {})
    # The Default context around ChatML turns: the system prompt is the story string's, not a turn.
    assert raw.text == (
        "Summarise the chat.\n***\n<|im_start|>user\nAria: Hello.<|im_end|>\n<|im_start|>assistant\nSummary:"
    )
    plain = chat_as_text(messages[:2], {}, {})
    # No instruct template: SillyTavern's Default context (its *** chat start), a name on every line.
    assert plain.text == "Summarise the chat.\n***\nUser: Aria: Hello.\nAssistant:"
    built = chat_as_text([{"role": "raw", "content": "as built", "stop": ["\nUser:"]}], {}, {})
    assert (built.text, built.stop) == ("as built", ("\nUser:",))
