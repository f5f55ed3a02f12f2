"""A branch keeps Advanced Memory (issue 14; the manual's "Uma ramificação criada a partir de um chat
preparado…"): the scenes before the branch point come along with their recaps; a scene the branch point
falls inside is open again in the branch."""

from __future__ import annotations

from sqlmodel import Session, select

from app.memory.scenes.models import Scene, SceneState
from tests.conftest import add_character, new_chat
from tests.support.scenes import stored_scene


def _scenes(sugo, chat_id: int) -> list[tuple[int, int, str, str]]:
    with Session(sugo.engine) as s:
        rows = s.exec(select(Scene).where(Scene.chat_id == chat_id).order_by(Scene.first_message_id)).all()
        return [(r.first_message_id, r.last_message_id, r.state, r.summary) for r in rows]


def _ids(api, chat_id: int) -> list[int]:
    return [m["id"] for m in api.get(f"/api/chats/{chat_id}/messages").json()]


def test_a_branch_keeps_the_scenes_before_its_point_and_reopens_the_one_it_cuts(sugo, api):
    chat_id = new_chat(api, [add_character(api)["id"]])["id"]
    stored_scene(
        sugo,
        chat_id,
        [("You", "We reach the ford."), ("Aria", "Cold water.")],
        state="written",
        summary="They reached the ford.",
        manual=True,
    )
    stored_scene(
        sugo,
        chat_id,
        [("You", "We climb."), ("Aria", "The pass is steep."), ("You", "We rest.")],
        state="written",
        summary="They climbed the pass.",
    )
    ids = _ids(api, chat_id)  # the greeting, then the five scene messages
    with Session(sugo.engine) as s:
        s.add(SceneState(chat_id=chat_id, checked_through_id=ids[-1], window_start_id=ids[3]))
        s.commit()

    inside = api.post(f"/api/chats/{chat_id}/messages/{ids[4]}/branch")  # inside the second scene
    assert inside.status_code == 201, inside.text
    branch = inside.json()["id"]
    new = _ids(api, branch)
    assert len(new) == 5
    assert _scenes(sugo, branch) == [(new[1], new[2], "written", "They reached the ford.")]
    with Session(sugo.engine) as s:
        assert s.exec(select(Scene.manual).where(Scene.chat_id == branch)).one() is True
        state = s.get(SceneState, branch)
        assert (state.checked_through_id, state.window_start_id) == (new[4], new[3])

    whole = api.post(f"/api/chats/{chat_id}/messages/{ids[-1]}/branch").json()["id"]
    assert [s[3] for s in _scenes(sugo, whole)] == ["They reached the ford.", "They climbed the pass."]
    # The source chat is untouched.
    assert len(_scenes(sugo, chat_id)) == 2
