"""Tool calls assembled from a streamed answer's pieces (pure). OpenAI-compatible servers send each
call in fragments keyed by an index (the id and name first, the arguments a few characters at a
time); Anthropic sends a tool_use block's id and name at its start and its input as JSON pieces.
Both arrive here as (index, id, name, arguments piece)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ToolCall:
    """A tool call the model asked for, assembled from its streamed pieces."""

    id: str
    name: str
    arguments: str  # the JSON text as the model wrote it (parsed and checked by the tool loop)


# A model's arguments are model-controlled input: one call's JSON text is kept up to this size (the
# tool loop then refuses it as too long), and a round keeps at most this many calls.
MAX_ARGUMENT_CHARS = 100_000
MAX_CALLS_PER_ROUND = 16


@dataclass
class _Partial:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)
    size: int = 0


class ToolCallAssembler:
    def __init__(self) -> None:
        self._calls: dict[int, _Partial] = {}

    def add(self, index: int, *, id: str | None = None, name: str | None = None, arguments: str = "") -> None:
        if index not in self._calls:
            if len(self._calls) >= MAX_CALLS_PER_ROUND:
                return
            self._calls[index] = _Partial()
        call = self._calls[index]
        if id:
            call.id = id
        if name:
            # Some servers repeat the name in every piece, others send it once: never doubled.
            call.name = name if not call.name or call.name == name else call.name + name
        if arguments and call.size < MAX_ARGUMENT_CHARS + 1:
            piece = arguments[: MAX_ARGUMENT_CHARS + 1 - call.size]
            call.arguments.append(piece)
            call.size += len(piece)

    def __bool__(self) -> bool:
        return bool(self._calls)

    def calls(self) -> tuple[ToolCall, ...]:
        out = []
        for index in sorted(self._calls):
            call = self._calls[index]
            if not call.name:
                continue  # nothing to run: a fragment without a name
            out.append(
                ToolCall(id=call.id or f"call_{index}", name=call.name, arguments="".join(call.arguments))
            )
        return tuple(out)
