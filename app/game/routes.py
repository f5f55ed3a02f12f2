"""Game sessions from Chat Settings: the Game section's "Start the next session" button."""

from fastapi import APIRouter
from fastapi.responses import Response

from app.game.sessions import end_session, start_next_session
from app.web.deps import ServicesDep, SessionDep

router = APIRouter()


@router.post("/chats/{chat_id}/sessions")
def start_session_page(chat_id: int, session: SessionDep, services: ServicesDep) -> Response:
    """End this session and open the next (app/game/api.py says what it keeps)."""
    end_session(services, chat_id)  # before this request writes: SQLite has one writer
    new = start_next_session(session, services, chat_id)
    return Response(status_code=204, headers={"HX-Redirect": f"/chats/{new.id}"})
