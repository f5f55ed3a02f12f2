"""Connections: stored with encrypted keys, turned into provider configs for a request."""

from __future__ import annotations

from sqlalchemy import event
from sqlmodel import Session, select

from app.connections.crypto import KeyBox, is_sealed
from app.connections.models import Connection
from app.connections.providers import get_provider
from app.connections.providers.base import ProbeResult, ProviderConfig, ProviderError
from app.connections.schemas import ConnectionIn, ConnectionRead
from app.platform.core.errors import NotFound, UserError
from app.platform.timeutil import utcnow


def to_read(conn: Connection) -> ConnectionRead:
    return ConnectionRead(
        id=conn.id,
        name=conn.name,
        kind=conn.kind,
        preset=conn.preset,
        base_url=conn.base_url,
        model=conn.model,
        has_key=bool(conn.api_key_encrypted),
        extra_header_names=list(conn.extra_headers or {}),
        extra_body=conn.extra_body,
        temperature=conn.temperature,
        top_p=conn.top_p,
        top_k=conn.top_k,
        min_p=conn.min_p,
        repetition_penalty=conn.repetition_penalty,
        max_tokens=conn.max_tokens,
        context_size=conn.context_size,
        stop=conn.stop,
        is_default=conn.is_default,
        price_input_per_m=conn.price_input_per_m,
        price_output_per_m=conn.price_output_per_m,
        price_cached_input_per_m=conn.price_cached_input_per_m,
        embedding_model=conn.embedding_model,
        embedding_url=conn.embedding_url,
        tools_mode=conn.tools_mode,
        tools_refused=conn.tools_refused,
        text_api=conn.text_api,
        instruct_template=conn.instruct_template or {},
        context_template=conn.context_template or {},
        embedding_connection_id=conn.embedding_connection_id,
        created_at=conn.created_at,
        updated_at=conn.updated_at,
    )


# The connections are read once per session (a request's): Chat Settings alone asks for them, the chat's
# and the default one from half a dozen sections. The list is kept in `session.info` and dropped when a
# flush writes a connection, and at every commit and rollback (which expire what was read).
_LISTED = "connections.listed"


def list_connections(session: Session) -> list[Connection]:
    listed = session.info.get(_LISTED)
    if listed is None or _pending(session):
        listed = session.info[_LISTED] = list(
            session.exec(select(Connection).order_by(Connection.is_default.desc(), Connection.name))
        )
    return list(listed)


def get_connection(session: Session, connection_id: int) -> Connection:
    conn = session.get(Connection, connection_id)
    if conn is None:
        raise NotFound(f"Connection {connection_id} does not exist.")
    return conn


def default_connection(session: Session) -> Connection | None:
    """The one marked default, else the oldest."""
    listed = list_connections(session)
    if listed and listed[0].is_default:
        return listed[0]
    return min(listed, key=lambda c: c.id or 0, default=None)


def _pending(session: Session) -> bool:
    """A connection added, changed or deleted and not flushed yet (a query would flush it first)."""
    return any(isinstance(o, Connection) for o in (*session.new, *session.dirty, *session.deleted))


@event.listens_for(Session, "after_flush")
def _flushed(session: Session, _context) -> None:
    if _pending(session):  # still listed as pending during after_flush
        session.info.pop(_LISTED, None)


@event.listens_for(Session, "after_commit")
@event.listens_for(Session, "after_rollback")
def _ended(session: Session) -> None:
    session.info.pop(_LISTED, None)


SECRETS_NOT_SENT_ELSEWHERE = (
    "The address changed (base URL or embedding endpoint), so the saved API key and header values will not be "
    "sent to it: type the key (and the extra headers' values) again, or tick “Remove the saved key”."
)


def header_form_value(conn: Connection) -> dict[str, str]:
    """The extra headers as the edit form shows them: a saved connection's names with empty values
    (left empty, a value stays as saved); a new one's as its preset wrote them."""
    if conn.id is None:
        return dict(conn.extra_headers or {})
    return dict.fromkeys(conn.extra_headers or {}, "")


def merge_headers(typed: dict[str, str] | None, saved: dict[str, str]) -> tuple[dict[str, str | None], bool]:
    """The headers to store: a saved value where `typed` leaves a known name empty (all of them when
    `typed` is None), None where a new value is to be sealed; and whether any saved value is kept."""
    if typed is None:
        return dict(saved), bool(saved)
    merged: dict[str, str | None] = {}
    kept = False
    for name, value in typed.items():
        if value == "" and name in saved:
            merged[name] = saved[name]
            kept = True
        else:
            merged[name] = None
    return merged, kept


def _sealed_headers(
    typed: dict[str, str] | None, saved: dict[str, str], keybox: KeyBox
) -> tuple[dict[str, str], bool]:
    merged, kept = merge_headers(typed, saved)
    return {
        name: keybox.seal(typed[name]) if value is None else value for name, value in merged.items()
    }, kept  # type: ignore[index]


def _moved(conn: Connection, data: ConnectionIn) -> bool:
    """Whether `data` sends the connection's requests somewhere else than where its secrets were saved for."""
    return conn.id is not None and (conn.base_url, conn.embedding_url) != (data.base_url, data.embedding_url)


def _keeps_key(conn: Connection, data: ConnectionIn) -> bool:
    return bool(conn.api_key_encrypted) and not data.clear_key and not (data.api_key and data.api_key.strip())


def _apply(conn: Connection, data: ConnectionIn, keybox: KeyBox) -> None:
    headers, kept_values = _sealed_headers(data.extra_headers, conn.extra_headers or {}, keybox)
    if _moved(conn, data) and (_keeps_key(conn, data) or kept_values):
        raise UserError(SECRETS_NOT_SENT_ELSEWHERE)
    conn.extra_headers = headers
    for field in (
        "name",
        "kind",
        "preset",
        "base_url",
        "model",
        "extra_body",
        "temperature",
        "top_p",
        "top_k",
        "min_p",
        "repetition_penalty",
        "max_tokens",
        "context_size",
        "stop",
        "price_input_per_m",
        "price_output_per_m",
        "price_cached_input_per_m",
        "embedding_model",
        "embedding_url",
        "embedding_connection_id",
        "instruct_template",
        "context_template",
    ):
        setattr(conn, field, getattr(data, field))
    # A text connection always has an endpoint shape; the OpenAI one is what most local servers speak.
    conn.text_api = (data.text_api or "openai_completions") if data.kind == "text" else ""
    if data.tools_mode != conn.tools_mode:
        # A new choice starts afresh: "auto" asks the provider again, "on"/"off" need no reason.
        conn.tools_mode, conn.tools_refused = data.tools_mode, ""
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
    for borrower in session.exec(
        select(Connection).where(Connection.embedding_connection_id == connection_id)
    ):
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


def seal_plain_headers(session: Session, keybox: KeyBox) -> int:
    """Encrypt the extra header values saved in plain text before they were sealed; how many
    connections changed. Run at start; idempotent."""
    changed = 0
    for conn in session.exec(select(Connection)):
        headers = conn.extra_headers or {}
        if any(not is_sealed(value) for value in headers.values()):
            conn.extra_headers = {k: v if is_sealed(v) else keybox.seal(v) for k, v in headers.items()}
            session.add(conn)
            changed += 1
    session.flush()
    return changed


def provider_config(conn: Connection, keybox: KeyBox, *, timeout_s: float | None = None) -> ProviderConfig:
    """What a provider needs to call this connection; `timeout_s` is how long to wait for an answer
    (the provider's default when None)."""
    return ProviderConfig(
        kind=conn.kind,  # type: ignore[arg-type]
        base_url=conn.base_url,
        model=conn.model,
        api_key=keybox.decrypt(conn.api_key_encrypted) if conn.api_key_encrypted else None,
        extra_headers={name: keybox.unseal(value) for name, value in (conn.extra_headers or {}).items()},
        extra_body=dict(conn.extra_body or {}),
        **({} if timeout_s is None else {"timeout_s": timeout_s}),
        **(
            {
                "text_api": conn.text_api or "openai_completions",
                "context_size": conn.context_size,
                "instruct_template": dict(conn.instruct_template or {}),
                "context_template": dict(conn.context_template or {}),
            }
            if conn.kind == "text"
            else {}
        ),
    )


async def probe_form(
    session: Session, keybox: KeyBox, data: ConnectionIn, *, saved_id: int | None
) -> ProbeResult:
    """Test the values of the edit form before they are saved. A saved key and saved header values
    fill what the form leaves empty, and only while the address is the saved one."""
    saved = get_connection(session, saved_id) if saved_id else Connection(name="", base_url=data.base_url)
    conn = Connection(
        name=data.name,
        kind=data.kind,
        base_url=data.base_url,
        model=data.model,
        extra_body=data.extra_body,
        text_api=(data.text_api or "openai_completions") if data.kind == "text" else "",
        instruct_template=data.instruct_template,
        context_template=data.context_template,
    )
    conn.extra_headers, kept_values = _sealed_headers(data.extra_headers, saved.extra_headers or {}, keybox)
    keeps_key = _keeps_key(saved, data)
    if _moved(saved, data) and (keeps_key or kept_values):
        return ProbeResult(ok=False, model=None, message=SECRETS_NOT_SENT_ELSEWHERE)
    if data.api_key:
        conn.api_key_encrypted = keybox.encrypt(data.api_key)
    elif keeps_key:
        conn.api_key_encrypted = saved.api_key_encrypted
    return await probe_connection(conn, keybox)


async def probe_connection(conn: Connection, keybox: KeyBox) -> ProbeResult:
    try:
        config = provider_config(conn, keybox)
    except ValueError as err:
        return ProbeResult(ok=False, model=None, message=str(err))
    try:
        return await get_provider(conn.kind).probe(config)
    except ProviderError as err:
        return ProbeResult(ok=False, model=None, message=err.message)
