"""The embedder a chat uses right now: reads its settings, connections and Connections → Defaults,
lets sources.choose_embedding_source decide, and builds the embedder."""

from __future__ import annotations

from sqlmodel import Session, select

from app.chats.models import Chat
from app.chats.settings import read_settings
from app.connections.crypto import KeyBox
from app.connections.models import AppDefault, Connection
from app.connections.service import default_connection
from app.memory.recall.core.sources import (
    BUILTIN_MODELS,
    ConnectionInfo,
    EmbeddingChoice,
    builtins_in_use,
    choose_embedding_source,
)
from app.memory.recall.embedders import BUILTINS, Embedder, OpenAICompatible, VectorSizes, still_loading
from app.memory.recall.models import MemoryChunk
from app.platform.core.errors import UserError
from app.platform.modelbase import parse_row_id
from app.platform.services import Services

DEFAULT_EMBEDDING_KEY = "embeddings"


def _info(conn: Connection, keybox: KeyBox | None) -> ConnectionInfo:
    key = None
    if conn.api_key_encrypted and keybox is not None:
        try:
            key = keybox.decrypt(conn.api_key_encrypted)
        except ValueError:
            key = None  # the request then fails with the server's own "unauthorized", said in the viewer
    return ConnectionInfo(
        conn.id,
        conn.name,
        conn.kind,
        conn.base_url,
        key,
        conn.embedding_model,
        conn.embedding_url,
        conn.embedding_connection_id,
    )


def default_embedding_setting(session: Session) -> str:
    row = session.get(AppDefault, DEFAULT_EMBEDDING_KEY)
    return row.value if row else ""


def set_default_embedding(session: Session, value: str) -> None:
    """Store Connections → Defaults → Embeddings: "builtin:<model>" or "connection:<id>" of a
    connection that has an embedding model."""
    kind, _, rest = value.partition(":")
    conn_id = parse_row_id(rest) if kind == "connection" else None
    conn = session.get(Connection, conn_id) if conn_id is not None else None
    if not ((kind == "builtin" and rest in BUILTIN_MODELS) or (conn is not None and conn.embedding_model)):
        raise UserError("Pick a built-in model or a connection that has an embedding model.")
    row = session.get(AppDefault, DEFAULT_EMBEDDING_KEY) or AppDefault(key=DEFAULT_EMBEDDING_KEY)
    row.value = value
    session.add(row)
    session.flush()


def embedding_choice(
    session: Session, chat: Chat | None, *, keybox: KeyBox | None = None, automatic: bool = False
) -> EmbeddingChoice:
    """The chat's embedding source; `automatic` leaves out the chat's own pick of a built-in model
    (what "Automatic" would give, shown beside that pick in Chat Settings). Without a key box the
    choice is only shown: no key is decrypted."""
    connections = {c.id: _info(c, keybox) for c in session.exec(select(Connection))}
    chat_conn = None
    chat_builtin = None
    if chat is not None:
        chat_builtin = None if automatic else read_settings(chat.settings).builtin_embedding
        conn = (
            session.get(Connection, chat.connection_id) if chat.connection_id else default_connection(session)
        )
        chat_conn = connections.get(conn.id) if conn else None
    return choose_embedding_source(
        chat_builtin=chat_builtin,
        chat_connection=chat_conn,
        default=default_embedding_setting(session),
        connections=connections,
    )


def build_embedder(choice: EmbeddingChoice, *, sizes: VectorSizes, new_size: bool = False) -> Embedder:
    """`sizes`: the app's record of the sizes servers gave (services.recall.sizes); `new_size`: a remote
    model's vectors may take a new size (see OpenAICompatible)."""
    if choice.kind == "builtin":
        return BUILTINS[choice.model]()
    return OpenAICompatible(
        choice.base_url, choice.model, api_key=choice.api_key, new_size=new_size, sizes=sizes
    )


def embedder_for_chat(
    session: Session, chat_id: int, keybox: KeyBox, *, sizes: VectorSizes, new_size: bool = False
) -> Embedder:
    choice = embedding_choice(session, session.get(Chat, chat_id), keybox=keybox)
    return build_embedder(choice, sizes=sizes, new_size=new_size)


def embed_query_early(services: Services, session: Session, chat_id: int, text: str) -> None:
    """Start embedding a query the turn about to be built will search with, on the recall threads,
    into the app's cache of query vectors: the build then finds it embedded, or being embedded. Not
    while the built-in model loads (the turn ranks by words meanwhile, and this starts the load)."""
    embedder = embedder_for_chat(session, chat_id, services.keybox, sizes=services.recall.sizes)
    if embedder is None or still_loading(embedder):
        return
    services.recall.queries.submit(services.recall.query_vectors.embed, embedder, text)


def builtin_models_in_use(session: Session) -> set[str]:
    """The built-in models the chats with memories embed with: loaded at start, so that searching
    them never waits. A chat without memories yet gets its model loaded by the job that makes them."""
    connections = {c.id: _info(c, None) for c in session.exec(select(Connection))}
    fallback = default_connection(session)
    default_conn = connections.get(fallback.id) if fallback is not None else None
    with_memories = select(Chat.settings, Chat.connection_id).where(
        select(MemoryChunk.id).where(MemoryChunk.chat_id == Chat.id).exists()
    )
    chats = [
        (read_settings(settings).builtin_embedding, connections.get(conn_id) if conn_id else default_conn)
        for settings, conn_id in session.exec(with_memories)
    ]
    return builtins_in_use(chats, default=default_embedding_setting(session), connections=connections)
