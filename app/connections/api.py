from fastapi import APIRouter
from pydantic import BaseModel, Field
from sqlmodel import Session

from app.connections import service
from app.connections.core.presets import PRESETS
from app.connections.discovery import find_local_servers
from app.connections.schemas import ConnectionIn, ConnectionRead, ProbeOut
from app.memory.recall.embedding import default_embedding_setting, set_default_embedding
from app.web.deps import KeyBoxDep, ServicesDep, SessionDep, SettingsDep

router = APIRouter(prefix="/api/connections", tags=["connections"])


@router.get("", response_model=list[ConnectionRead])
def list_connections(session: SessionDep) -> list[ConnectionRead]:
    """List connections (keys are never returned, only `has_key`)."""
    return [service.to_read(c) for c in service.list_connections(session)]


@router.post("", response_model=ConnectionRead, status_code=201)
def create_connection(data: ConnectionIn, session: SessionDep, keybox: KeyBoxDep) -> ConnectionRead:
    """Add a connection; the first one becomes the default."""
    return service.to_read(service.create_connection(session, keybox, data))


@router.get("/presets")
def list_presets() -> list[dict]:
    """Starting points for a new connection."""
    return [p.__dict__ for p in PRESETS]


@router.get("/discover")
async def discover_local_servers(settings: SettingsDep) -> list[dict]:
    """Local model servers answering on their usual loopback ports."""
    return [f.__dict__ for f in await find_local_servers(settings.discovery_ports)]


class DefaultsIn(BaseModel):
    embeddings: str = Field(
        description='"builtin:all-MiniLM-L6-v2", "builtin:multilingual-e5-small" or "connection:<id>"'
    )


@router.get("/defaults")
def show_defaults(session: SessionDep) -> dict:
    """Connections → Defaults: the embedding source used where nothing more specific is set."""
    return {"embeddings": default_embedding_setting(session) or "builtin:all-MiniLM-L6-v2"}


@router.put("/defaults")
def save_defaults(data: DefaultsIn, session: SessionDep) -> dict:
    """Set the default embedding source: a built-in model, or a connection with an embedding model."""
    set_default_embedding(session, data.embeddings)
    return {"embeddings": data.embeddings}


@router.get("/{connection_id}", response_model=ConnectionRead)
def show_connection(connection_id: int, session: SessionDep) -> ConnectionRead:
    """One connection."""
    return service.to_read(service.get_connection(session, connection_id))


@router.put("/{connection_id}", response_model=ConnectionRead)
def update_connection(
    connection_id: int, data: ConnectionIn, session: SessionDep, keybox: KeyBoxDep
) -> ConnectionRead:
    """Edit a connection; an empty api_key keeps the saved one, clear_key removes it."""
    return service.to_read(service.update_connection(session, keybox, connection_id, data))


@router.delete("/{connection_id}", status_code=204)
def delete_connection(connection_id: int, session: SessionDep) -> None:
    """Delete a connection; chats that used it fall back to the default."""
    service.delete_connection(session, connection_id)


@router.post("/{connection_id}/default", response_model=ConnectionRead)
def set_default_connection(connection_id: int, session: SessionDep) -> ConnectionRead:
    """Make this the connection new chats use."""
    return service.to_read(service.set_default(session, connection_id))


@router.post("/{connection_id}/test", response_model=ProbeOut)
async def test_connection(connection_id: int, services: ServicesDep) -> ProbeOut:
    """Send a tiny request and report the model name or the exact error."""
    # Its own short session: the probe waits on the network, and must not hold a transaction open.
    with Session(services.engine) as session:
        conn = service.get_connection(session, connection_id)
    result = await service.probe_connection(conn, services.keybox)
    return ProbeOut(ok=result.ok, model=result.model, message=result.message)
