"""Request dependencies: the request owns the transaction; the app's services come from app.state."""

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlmodel import Session
from starlette.datastructures import FormData

from app.connections.crypto import KeyBox
from app.platform.db import session_scope
from app.platform.services import Services
from app.platform.settings import Settings


def get_services(request: Request) -> Services:
    return request.app.state.services


def get_session(request: Request) -> Iterator[Session]:
    yield from session_scope(request.app.state.services.engine)


def get_keybox(request: Request) -> KeyBox:
    return request.app.state.services.keybox


def get_settings(request: Request) -> Settings:
    return request.app.state.services.settings


# scope="function": commit before the response leaves, so a client that reads right after a
# write always sees it.
SessionDep = Annotated[Session, Depends(get_session, scope="function")]
ServicesDep = Annotated[Services, Depends(get_services)]
KeyBoxDep = Annotated[KeyBox, Depends(get_keybox)]
SettingsDep = Annotated[Settings, Depends(get_settings)]


async def read_form(request: Request) -> FormData:
    """The posted form, read on the event loop (reading is async) so the route itself can be a plain
    `def`: FastAPI runs those on worker threads, where a write waiting for SQLite's lock (an import
    holds it for seconds) keeps no other request waiting."""
    return await request.form()


FormDep = Annotated[FormData, Depends(read_form)]
