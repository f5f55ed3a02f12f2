"""Which embedding source a chat uses. Pure: takes what the database holds, returns a choice.

Precedence (as in Marinara):
1. the chat's own pick of a built-in model in Chat Settings (for a chat in another language),
   when set;
2. the embedding model of the chat's connection ("Semantic search (embeddings)" on the connection),
   at its own endpoint URL, or with the key and address of the connection it borrows from;
3. the Embeddings default in Connections → Defaults: a built-in model or a connection's embedding
   model;
4. the built-in all-MiniLM-L6-v2.
The same choice serves lorebook semantic search.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

BUILTIN_MODELS = {
    "all-MiniLM-L6-v2": "all-MiniLM-L6-v2 (built in, English, fast)",
    "multilingual-e5-small": "multilingual-e5-small (built in, 100 languages)",
}
DEFAULT_BUILTIN = "all-MiniLM-L6-v2"


@dataclass(frozen=True)
class ConnectionInfo:
    id: int
    name: str
    kind: str  # "openai" | "anthropic"
    base_url: str
    api_key: str | None
    embedding_model: str = ""
    embedding_url: str = ""
    embedding_connection_id: int | None = None


@dataclass(frozen=True)
class EmbeddingChoice:
    kind: str  # "builtin" | "openai"
    model: str
    origin: str  # where the choice came from, said in the viewer and the prompt inspector
    base_url: str = ""
    api_key: str | None = None


def builtin(model: str | None, origin: str) -> EmbeddingChoice:
    name = model if model in BUILTIN_MODELS else DEFAULT_BUILTIN
    return EmbeddingChoice("builtin", name, origin)


def from_connection(
    conn: ConnectionInfo, connections: Mapping[int, ConnectionInfo], origin: str
) -> EmbeddingChoice | None:
    """The connection's own embedding model, or None when it has none."""
    if not conn.embedding_model:
        return None
    lender = connections.get(conn.embedding_connection_id) if conn.embedding_connection_id else None
    if lender is not None:
        return EmbeddingChoice(
            "openai",
            conn.embedding_model,
            f"{origin} (key and address of “{lender.name}”)",
            base_url=lender.base_url,
            api_key=lender.api_key,
        )
    return EmbeddingChoice(
        "openai",
        conn.embedding_model,
        origin,
        base_url=conn.embedding_url or conn.base_url,
        api_key=conn.api_key,
    )


def parse_default(value: str | None) -> tuple[str, str | int | None]:
    """The stored Defaults value: "builtin:<model>" or "connection:<id>"; anything else is built-in."""
    kind, _, rest = (value or "").partition(":")
    if kind == "connection" and rest.isdigit():
        return "connection", int(rest)
    return "builtin", rest if rest in BUILTIN_MODELS else DEFAULT_BUILTIN


def choose_embedding_source(
    *,
    chat_builtin: str | None,
    chat_connection: ConnectionInfo | None,
    default: str | None,
    connections: Mapping[int, ConnectionInfo],
) -> EmbeddingChoice:
    if chat_builtin in BUILTIN_MODELS:
        return builtin(chat_builtin, "this chat's setting")
    if chat_connection is not None:
        own = from_connection(chat_connection, connections, f"the chat's connection “{chat_connection.name}”")
        if own is not None:
            return own
    kind, value = parse_default(default)
    if kind == "connection":
        conn = connections.get(value)  # type: ignore[arg-type]
        chosen = from_connection(conn, connections, "Connections → Defaults") if conn else None
        if chosen is not None:
            return chosen
        return builtin(DEFAULT_BUILTIN, "the built-in model (the default connection has no embedding model)")
    return builtin(value, "Connections → Defaults" if default else "the built-in model")  # type: ignore[arg-type]


def builtins_in_use(
    chats: Iterable[tuple[str | None, ConnectionInfo | None]],
    *,
    default: str | None,
    connections: Mapping[int, ConnectionInfo],
) -> set[str]:
    """The built-in models the chats' embedding sources come to, each chat given as its own pick and
    its connection (the default one when it has none)."""
    choices = (
        choose_embedding_source(
            chat_builtin=pick, chat_connection=conn, default=default, connections=connections
        )
        for pick, conn in chats
    )
    return {c.model for c in choices if c.kind == "builtin"}
