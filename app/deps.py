"""Request dependencies: the request owns the transaction."""

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlmodel import Session

from app.connections.crypto import KeyBox
from app.db import session_scope
from app.settings import Settings


def get_session(request: Request) -> Iterator[Session]:
    yield from session_scope(request.app.state.engine)


def get_keybox(request: Request) -> KeyBox:
    return request.app.state.keybox


def get_settings(request: Request) -> Settings:
    return request.app.state.settings


# scope="function": commit before the response leaves, so a client that reads right after a
# write always sees it.
SessionDep = Annotated[Session, Depends(get_session, scope="function")]
KeyBoxDep = Annotated[KeyBox, Depends(get_keybox)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
