"""The Prepare panel never shows a finished run with fewer recaps than it wrote (a flake in CI's browser
run: "History prepared: 3 scenes, 2 recaps written."). Each read of the panel sees what is committed at
that moment; the run was read after the scenes were counted, so a last recap stored and the run ended
between the two reads showed "done" with the old count, and the panel stops refreshing once done.

The test ends the run exactly between the panel's reads: a statement hook commits, from another
connection, the last recap and the run's end just before the panel reads the run."""

from __future__ import annotations

from sqlalchemy import event
from sqlmodel import Session, select

from app.chats.models import Chat, Message
from app.memory.scenes.models import Scene, SceneRun
from app.memory.scenes.settings_form import prepare_context
from tests.conftest import add_character, add_connection, new_chat


def test_a_finished_run_is_shown_with_every_recap_it_wrote(sugo, api, models):
    add_connection(api, models)
    chat_id = new_chat(api, [add_character(api, "Aria")["id"]])["id"]
    for i in range(6):
        assert api.post(f"/api/chats/{chat_id}/messages", json={"content": f"Step {i}."}).status_code == 201
    engine = sugo.engine
    with Session(engine) as s:
        ids = list(s.exec(select(Message.id).where(Message.chat_id == chat_id).order_by(Message.id)))
        scenes = [
            Scene(
                chat_id=chat_id,
                first_message_id=ids[0],
                last_message_id=ids[1],
                state="written",
                summary="One.",
            ),
            Scene(
                chat_id=chat_id,
                first_message_id=ids[2],
                last_message_id=ids[3],
                state="written",
                summary="Two.",
            ),
            Scene(chat_id=chat_id, first_message_id=ids[4], last_message_id=ids[5], state="writing"),
        ]
        run = SceneRun(chat_id=chat_id, stage="recapping", total=3, done=2, current="Writing recap 3 of 3")
        s.add_all([*scenes, run])
        s.commit()
        last_scene, run_id = scenes[2].id, run.id

    finished = []

    def finish_prepare(conn, cursor, statement, parameters, context, executemany):
        # Prepare's last steps, committed by another connection, as the panel is about to read the run.
        if finished or "FROM scene_run" not in statement:
            return
        finished.append(True)
        with Session(engine) as other:
            other.get(Scene, last_scene).state = "written"
            other.get(SceneRun, run_id).status = "done"
            other.commit()

    with Session(engine) as session:
        chat_conn = session.connection()
        event.listen(chat_conn, "before_cursor_execute", finish_prepare)
        try:
            shown = prepare_context(
                session,
                sugo.services,
                session.get(Chat, chat_id),
            )
        finally:
            event.remove(chat_conn, "before_cursor_execute", finish_prepare)
    assert finished, "the hook did not run: the panel no longer reads the run with this statement"
    assert shown["run"].status == "done"
    assert (shown["scenes"], shown["written"]) == (3, 3)
