"""Decide who sees new messages (issue 27; the manual's "Decidir quem vê as novas mensagens"), as pure
functions: which new messages are asked about, the helper's request for one, and reading its answer.
The shell is `app/memory/scenes/visibility.py`.

- Asked about: each message of a turn-by-turn group chat stored since the last decision, once. Not a
  message whose audience the user set by hand (Hide from AI, its per-character form), nor a whisper
  (only its recipient, its author and the narrator see it already). The author, the narrator and a
  whisper's recipient are never asked about: they always see.
- The helper reads the current scene so far (from the last closed scene's end; at least the
  CONTEXT_BEFORE messages before the new one), the characters who spoke since the scene began (a hint:
  one who listens in silence is present), and the new message. It answers with the characters who
  clearly cannot see or hear it; a message is hidden from them only when it says so — "only when the
  model is sure" — and an unclear answer hides nothing.
- Names are matched as the recaps' participants are (full card name, or a run of its words that fits
  exactly one character); a name matching nobody is ignored."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from app.memory.scenes.core.participants import match_participants
from app.memory.summaries.core.answers import Failure, answer_field

CONTEXT_BEFORE = 6  # messages before the new one the helper always reads, in or out of the scene
MAX_CONTEXT_MESSAGES = 40  # at most this many of the scene's messages (the newest)
MAX_MESSAGE_CHARS = 2_000  # each message as the helper reads it
ANSWER_TOKENS = 2048  # a short JSON answer, with room for a reasoning model's thinking

VISIBILITY_PROMPT = """\
You keep track of who is present in a roleplay scene. Read the scene so far and the NEW message. For \
each character listed, decide whether they clearly cannot see or hear the NEW message: they are \
somewhere else (they left, are in another place, or the story never put them in this scene). A \
character who listens in silence is present. Name a character only when you are sure; when unsure, \
leave them out.
Answer with JSON only: {"cannot_see": ["Name", "..."]} (an empty list when everyone can)."""


@dataclass(frozen=True)
class Line:
    number: int  # as the chat view numbers it
    name: str
    text: str


def _line(m: Line) -> str:
    text = " ".join(m.text.split())
    if len(text) > MAX_MESSAGE_CHARS:
        text = text[:MAX_MESSAGE_CHARS] + "…"
    return f"#{m.number} {m.name}: {text}"


def visibility_request(
    scene: Sequence[Line], new: Line, asked: Sequence[str], spoke: Sequence[str]
) -> list[dict[str, str]]:
    """The helper's request about the NEW message, asking about the characters `asked`."""
    shown = list(scene)[-MAX_CONTEXT_MESSAGES:]
    body = [
        f"Characters to decide about: {', '.join(asked)}",
        "Spoke in this scene so far (a hint only): " + (", ".join(spoke) if spoke else "nobody yet"),
        "",
        "The scene so far:",
        *((_line(m) for m in shown) if shown else ["(the scene starts with the new message)"]),
        "",
        "NEW message:",
        _line(new),
    ]
    return [{"role": "system", "content": VISIBILITY_PROMPT}, {"role": "user", "content": "\n".join(body)}]


def read_visibility(
    text: str, finish_reason: str | None, reasoning: str | None, asked: Sequence[str], persona: str | None
) -> list[str] | Failure:
    """The card names (among `asked`) the answer says cannot see the message; a Failure when it cannot be
    read (the caller then hides nothing)."""
    names = answer_field(text, finish_reason, reasoning, "cannotsee")
    if isinstance(names, Failure):
        return names
    if isinstance(names, str):
        names = [names]
    if not isinstance(names, list):
        return Failure("not_json", 'The answer had no "cannot_see" list.')
    matched, _ = match_participants([n for n in names if isinstance(n, str)], list(asked), persona)
    return matched


def to_ask(
    members: Mapping[int, str], author: int | None, narrator: int | None, already_hidden: Sequence[int]
) -> dict[int, str]:
    """The members the helper is asked about for one message: not its author, not the narrator, not
    those it is hidden from already."""
    return {
        i: name for i, name in members.items() if i not in (author, narrator) and i not in set(already_hidden)
    }
