"""What follows a change to messages already written (an edit, hide, swipe or delete) or a chat
arriving with its messages (an import, a branch), for the page routes and the JSON API alike."""

from __future__ import annotations

from sqlmodel import Session

from app.platform.services import Services


def messages_changed(session: Session, services: Services, chat_id: int) -> None:
    """Commit the change, then let each prompt source re-sync what it built from the messages
    (Memory Recall's chunks): at once, not after the next reply. The commit comes first so the
    background work reads the change."""
    session.commit()
    services.sources.messages_changed(services, chat_id)


def chat_added(session: Session, services: Services, chat_id: int) -> None:
    """Commit the imported or branched chat, then let each prompt source build from its messages
    (Memory Recall's chunks and vectors) at once: the chat may be searched before its first reply."""
    session.commit()
    services.sources.chat_added(services, chat_id)


def settings_saved(session: Session, services: Services, chat_id: int) -> None:
    """Commit Chat Settings, then let each prompt source start what the new settings ask for (character
    recollections turned on in a prepared chat) at once, not after the next reply."""
    session.commit()
    services.sources.settings_saved(services, chat_id)


def chat_deleted(session: Session, services: Services, chat_id: int) -> None:
    """Commit the deletion, then let each prompt source remove what it kept outside the database
    (a chat's memory file)."""
    session.commit()
    services.sources.chat_deleted(services, chat_id)
