"""Expression images (issue 29): which of a character's pictures stands beside the story.

A reply may end with a tag the prompt asks for, `[expression: joy]` (app/expressions/source.py);
without one a cheap word rule guesses. The names are SillyTavern's (its classify extension's default
28), so its sprite files (`joy.png`, `anger.webp`) are taken as they are named.

Where the tag lives, decided: a reply is stored as the model wrote it, tag included. Stripping it
when the reply is stored would need a column for the chosen name (a migration) and a hook in every
path that writes a reply (streaming, Continue, swipes, scene splits, edits); reading it where the
text is shown and where history is read is two places, both through `read_expression_tag`: the
message template (`without_expression_tag`, before macros and Markdown, so the final render after a
stream shows no tag) and the prompt's history reader (app/chats/history.py). An edit shows the tag,
so the user can change the expression by hand.

Pure: text in, names out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

EXPRESSIONS: tuple[str, ...] = (
    "admiration", "amusement", "anger", "annoyance", "approval", "caring", "confusion", "curiosity",
    "desire", "disappointment", "disapproval", "disgust", "embarrassment", "excitement", "fear",
    "gratitude", "grief", "joy", "love", "nervousness", "optimism", "pride", "realization", "relief",
    "remorse", "sadness", "surprise", "neutral",
)  # fmt: skip # SillyTavern's list, in its order
NEUTRAL = "neutral"

# Bounded: a tag is short, so a stray "[expression:" never makes the scan read far ahead.
_TAG = re.compile(r"[ \t]*\[[ \t]*expression[ \t]*:[ \t]*([^\]\n]{0,40}?)[ \t]*\]", re.IGNORECASE)
_BLANK_LINES = re.compile(r"\n{3,}")

# The cheap rule: words and emoticons that point at one expression. Each hit counts once per
# occurrence; the most hits wins, a tie goes to the expression listed first here.
_CUES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("anger", ("angry", "anger", "furious", "rage", "glare", "glares", "glaring", "snarl", "snarls",
               "growl", "growls", "scowl", "scowls", "seething", "fury", "clenches", "slams", ">:(")),
    ("sadness", ("sad", "sadly", "tears", "cry", "cries", "crying", "sob", "sobs", "sobbing", "weep",
                 "weeps", "sorrow", "mournful", "heartbroken", "sigh", "sighs", ":(", ":'(")),
    ("fear", ("afraid", "fear", "scared", "terrified", "tremble", "trembles", "trembling", "shiver",
              "shivers", "panic", "frightened", "dread")),
    ("surprise", ("surprise", "surprised", "gasp", "gasps", "wow", "whoa", "astonished", "startled",
                  "shocked", "blinks", ":o", "o_o")),
    ("embarrassment", ("blush", "blushes", "blushing", "flustered", "embarrassed", "sheepish")),
    ("love", ("love", "loves", "adore", "adores", "darling", "beloved", "kiss", "kisses", "<3")),
    ("amusement", ("laugh", "laughs", "laughing", "chuckle", "chuckles", "giggle", "giggles",
                   "smirk", "smirks", "grin", "grins", "haha", "hehe", "lol", "xd")),
    ("joy", ("happy", "happily", "joy", "delighted", "glad", "smile", "smiles", "smiling", "beams",
             "cheerful", "yay", ":)", ":d", "^^")),
    ("confusion", ("confused", "puzzled", "frowns", "huh", "baffled", "bewildered", "???")),
    ("disgust", ("disgust", "disgusted", "gross", "revolting", "grimace", "grimaces", "ew", "eww")),
    ("nervousness", ("nervous", "nervously", "anxious", "fidget", "fidgets", "gulps", "stammers")),
)  # fmt: skip # one expression a line, its cues after it
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?|[:;>][-']?[()dpo]|<3|\^\^|o_o|\?\?\?", re.IGNORECASE)
_CUE_OF = {cue: name for name, cues in _CUES for cue in cues}
_RANK = {name: i for i, (name, _) in enumerate(_CUES)}
MAX_GUESS_CHARS = 4000  # the end of a long reply says how it ends; the rule reads no more of it


def read_expression_tag(text: str) -> tuple[str | None, str]:
    """The expression a reply's `[expression: name]` tags name (the last one; None when there is none
    or it names no known expression) and the text without any of them. A text with no tag comes back
    as it is, to the byte."""
    found = list(_TAG.finditer(text))
    if not found:
        return None, text
    name = found[-1].group(1).strip().lower()
    shown = _BLANK_LINES.sub("\n\n", _TAG.sub("", text)).strip()
    return (name if name in EXPRESSIONS else None), shown


def without_expression_tag(text: str) -> str:
    return read_expression_tag(text)[1] if "[" in text else text


def guess_expression(text: str) -> str:
    """A cheap guess from the words and emoticons of a reply (its last MAX_GUESS_CHARS); neutral
    when nothing points anywhere."""
    counts: dict[str, int] = {}
    for token in _WORD.findall(text[-MAX_GUESS_CHARS:]):
        name = _CUE_OF.get(token.lower())
        if name:
            counts[name] = counts.get(name, 0) + 1
    if not counts:
        return NEUTRAL
    return min(counts, key=lambda n: (-counts[n], _RANK[n]))


def reply_expression(text: str) -> str:
    """The expression of a reply: its tag's, else the rule's guess (on the text without tags)."""
    name, shown = read_expression_tag(text)
    return name or guess_expression(shown)


def expression_of_file_name(file_name: str) -> str | None:
    """The expression a SillyTavern sprite file names (`joy.png`, `Anger.webp` → joy, anger); None
    for a name not in the list."""
    stem = file_name.rsplit("/", 1)[-1].rsplit("\\", 1)[-1]
    stem = stem.rsplit(".", 1)[0] if "." in stem else stem
    name = stem.strip().lower()
    return name if name in EXPRESSIONS else None


def art_image(
    *, art_id: int | None, avatar_id: int | None, expressions: Mapping[str, int], name: str | None
) -> int | None:
    """The picture to show: the expression's image when there is one, else the art, else the card's
    image (None: nothing to show)."""
    if name and name in expressions:
        return expressions[name]
    return art_id or avatar_id
