"""Connections: stored with encrypted keys, turned into provider configs for a request."""

from __future__ import annotations

from sqlmodel import Session, select

from app.connections.crypto import KeyBox
from app.connections.models import Connection
from app.connections.providers import get_provider
from app.connections.providers.base import ProbeResult, ProviderConfig, ProviderError
from app.connections.schemas import ConnectionIn, ConnectionRead
from app.errors import NotFound
from app.timeutil import utcnow


def to_read(conn: Connection) -> ConnectionRead:
    return ConnectionRead(
        id=conn.id, name=conn.name, kind=conn.kind, preset=conn.preset, base_url=conn.base_url,
        model=conn.model, has_key=bool(conn.api_key_encrypted), extra_headers=conn.extra_headers,
        extra_body=conn.extra_body, temperature=conn.temperature, top_p=conn.top_p,
        max_tokens=conn.max_tokens, context_size=conn.context_size, stop=conn.stop,
        is_default=conn.is_default, price_input_per_m=conn.price_input_per_m,
        price_output_per_m=conn.price_output_per_m, price_cached_input_per_m=conn.price_cached_input_per_m,
        embedding_model=conn.embedding_model, embedding_url=conn.embedding_url,
        embedding_connection_id=conn.embedding_connection_id,
        created_at=conn.created_at, updated_at=conn.updated_at,
    )  # fmt: skip


def list_connections(session: Session) -> list[Connection]:
    return list(session.exec(select(Connection).order_by(Connection.is_default.desc(), Connection.name)))


def get_connection(session: Session, connection_id: int) -> Connection:
    conn = session.get(Connection, connection_id)
    if conn is None:
        raise NotFound(f"Connection {connection_id} does not exist.")
    return conn


def default_connection(session: Session) -> Connection | None:
    conn = session.exec(select(Connection).where(Connection.is_default == True)).first()  # noqa: E712
    return conn or session.exec(select(Connection).order_by(Connection.id)).first()


def _apply(conn: Connection, data: ConnectionIn, keybox: KeyBox) -> None:
    for field in ("name", "kind", "preset", "base_url", "model", "extra_headers", "extra_body",
                  "temperature", "top_p", "max_tokens", "context_size", "stop", "price_input_per_m",
                  "price_output_per_m", "price_cached_input_per_m", "embedding_model", "embedding_url",
                  "embedding_connection_id"):  # fmt: skip
        setattr(conn, field, getattr(data, field))
    conn.name = conn.name.strip()
    conn.model = conn.model.strip()
    conn.embedding_model = conn.embedding_model.strip()
    if conn.embedding_connection_id is not None and conn.embedding_connection_id == conn.id:
        conn.embedding_connection_id = None  # borrowing from itself is "same as this connection"
    if data.clear_key:
        conn.api_key_encrypted = None
    elif data.api_key and data.api_key.strip():
        conn.api_key_encrypted = keybox.encrypt(data.api_key.strip())
    conn.updated_at = utcnow()


def create_connection(session: Session, keybox: KeyBox, data: ConnectionIn) -> Connection:
    conn = Connection(name=data.name, base_url=data.base_url)
    _apply(conn, data, keybox)
    first = session.exec(select(Connection.id)).first() is None
    session.add(conn)
    session.flush()
    if data.is_default or first:
        set_default(session, conn.id)
    return conn


def update_connection(session: Session, keybox: KeyBox, connection_id: int, data: ConnectionIn) -> Connection:
    conn = get_connection(session, connection_id)
    _apply(conn, data, keybox)
    session.add(conn)
    session.flush()
    if data.is_default:
        set_default(session, conn.id)
    return conn


def delete_connection(session: Session, connection_id: int) -> None:
    conn = get_connection(session, connection_id)
    was_default = conn.is_default
    session.delete(conn)
    for borrower in session.exec(select(Connection).where(Connection.embedding_connection_id == connection_id)):
        borrower.embedding_connection_id = None
        session.add(borrower)
    session.flush()
    if was_default:
        nxt = session.exec(select(Connection).order_by(Connection.id)).first()
        if nxt:
            nxt.is_default = True
            session.add(nxt)


def set_default(session: Session, connection_id: int) -> Connection:
    target = get_connection(session, connection_id)
    for conn in session.exec(select(Connection).where(Connection.is_default == True)):  # noqa: E712
        conn.is_default = False
        session.add(conn)
    target.is_default = True
    session.add(target)
    session.flush()
    return target


def provider_config(conn: Connection, keybox: KeyBox) -> ProviderConfig:
    return ProviderConfig(
        kind=conn.kind,  # type: ignore[arg-type]
        base_url=conn.base_url,
        model=conn.model,
        api_key=keybox.decrypt(conn.api_key_encrypted) if conn.api_key_encrypted else None,
        extra_headers=dict(conn.extra_headers or {}),
        extra_body=dict(conn.extra_body or {}),
    )


async def probe_connection(conn: Connection, keybox: KeyBox) -> ProbeResult:
    try:
        config = provider_config(conn, keybox)
    except ValueError as err:
        return ProbeResult(ok=False, model=None, message=str(err))
    try:
        return await get_provider(conn.kind).probe(config)
    except ProviderError as err:
        return ProbeResult(ok=False, model=None, message=err.message)
