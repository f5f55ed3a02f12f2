"""Game sessions in the JSON API: POST /api/chats/{chat_id}/sessions starts the game's next session."""

from fastapi import APIRouter

from app.chats import views
from app.chats.schemas import ChatRead
from app.game.sessions import end_session, start_next_session
from app.web.deps import ServicesDep, SessionDep

router = APIRouter(prefix="/api/chats", tags=["chats"])


@router.post("/{chat_id}/sessions", response_model=ChatRead, status_code=201)
def start_session(chat_id: int, session: SessionDep, services: ServicesDep) -> ChatRead:
    """End this Game session (with Advanced Memory, its open scene is closed and recapped) and start the
    next: the same members, settings, persona, connection and lorebooks, an empty chat of its own. The
    Game Master reads the earlier sessions' recaps."""
    # Before this request writes: the closing commits on a session of its own (SQLite has one writer).
    end_session(services, chat_id)
    return views.chat_read(session, start_next_session(session, services, chat_id))
