"""The templates Sugo ships, as SillyTavern ships them: plain data, read by the same code as a user's file
(parse_context_template / parse_instruct_template in app/connections/core/raw_prompt.py).

Copied key for key from SillyTavern's default/content/presets/{context,instruct}/*.json at commit
00a72b5a71195ec03bab5a42c03655f6ebe672e3 (the 1.12 generation, with names_behavior and
system_sequence_prefix/suffix), except Alpaca: the copy found was older (a `system_prompt`, `names` and
`names_force_groups`, commit 7bceed6578919de7473596321d75de4087890f5d); it is written here as that
version migrates (system prompt moved out, `names: false` with `names_force_groups: true` → "force"),
which is what SillyTavern's 1.12 Alpaca says, from memory.
"""

from __future__ import annotations

from types import MappingProxyType

__all__ = ["BUILTIN_CONTEXT_TEMPLATES", "BUILTIN_INSTRUCT_TEMPLATES"]

_STORY = (
    "{{#if system}}{{system}}\n{{/if}}{{#if wiBefore}}{{wiBefore}}\n{{/if}}"
    "{{#if description}}{{description}}\n{{/if}}"
    "{{#if personality}}{{char}}'s personality: {{personality}}\n{{/if}}"
    "{{#if scenario}}Scenario: {{scenario}}\n{{/if}}{{#if wiAfter}}{{wiAfter}}\n{{/if}}"
    "{{#if persona}}{{persona}}\n{{/if}}"
)

_CONTEXT = (
    {
        "story_string": _STORY,
        "example_separator": "***",
        "chat_start": "***",
        "use_stop_strings": False,
        "always_force_name2": True,
        "trim_sentences": False,
        "single_line": False,
        "name": "Default",
    },
    {
        "story_string": "<|im_start|>system\n" + _STORY + "{{trim}}<|im_end|>",
        "example_separator": "",
        "chat_start": "",
        "use_stop_strings": False,
        "always_force_name2": True,
        "trim_sentences": False,
        "single_line": False,
        "name": "ChatML",
    },
)


def _instruct(name: str, **sequences: object) -> dict:
    """One instruct file, its keys in the order SillyTavern writes them (`sequences` override the empties)."""
    data = {
        "input_sequence": "",
        "output_sequence": "",
        "last_output_sequence": "",
        "system_sequence": "",
        "stop_sequence": "",
        "wrap": True,
        "macro": True,
        "names_behavior": "force",
        "activation_regex": "",
        "system_sequence_prefix": "",
        "system_sequence_suffix": "",
        "first_output_sequence": "",
        "skip_examples": False,
        "output_suffix": "",
        "input_suffix": "",
        "system_suffix": "",
        "user_alignment_message": "",
        "system_same_as_user": False,
        "last_system_sequence": "",
        "name": name,
    }
    return data | sequences


_INSTRUCT = (
    _instruct(
        "ChatML",
        input_sequence="<|im_start|>user",
        output_sequence="<|im_start|>assistant",
        system_sequence="<|im_start|>system",
        stop_sequence="<|im_end|>",
        output_suffix="<|im_end|>\n",
        input_suffix="<|im_end|>\n",
        system_suffix="<|im_end|>\n",
    ),
    _instruct(
        "Llama 3 Instruct",
        input_sequence="<|start_header_id|>user<|end_header_id|>\n\n",
        output_sequence="<|start_header_id|>assistant<|end_header_id|>\n\n",
        system_sequence="<|start_header_id|>system<|end_header_id|>\n\n",
        stop_sequence="<|eot_id|>",
        wrap=False,
        output_suffix="<|eot_id|>",
        input_suffix="<|eot_id|>",
        system_suffix="<|eot_id|>",
    ),
    _instruct(
        "Mistral V7",
        input_sequence="[INST] ",
        output_sequence=" ",
        system_sequence="[SYSTEM_PROMPT] ",
        stop_sequence="</s>",
        wrap=False,
        output_suffix="</s>",
        input_suffix="[/INST]",
        system_suffix="[/SYSTEM_PROMPT]",
    ),
    _instruct(
        "Alpaca",
        input_sequence="### Instruction:",
        output_sequence="### Response:",
        system_sequence="### Input:",
        output_suffix="\n\n",
        input_suffix="\n\n",
        system_suffix="\n\n",
    ),
    _instruct(
        "Gemma 2",
        input_sequence="<start_of_turn>user",
        output_sequence="<start_of_turn>model",
        system_sequence="<start_of_turn>system",
        stop_sequence="<end_of_turn>",
        output_suffix="<end_of_turn>\n",
        input_suffix="<end_of_turn>\n",
        system_suffix="<end_of_turn>\n",
        system_same_as_user=True,
    ),
)

# name → the file's JSON object; read-only so a caller cannot change what every chat shares.
BUILTIN_CONTEXT_TEMPLATES = MappingProxyType({data["name"]: MappingProxyType(data) for data in _CONTEXT})
BUILTIN_INSTRUCT_TEMPLATES = MappingProxyType({data["name"]: MappingProxyType(data) for data in _INSTRUCT})
