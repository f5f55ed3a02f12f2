"""The Tasks page's JSON twins (/api/tasks) and its HTML answers over HTTP: list, edit, cancel, and bad
input refused with a sentence and nothing changed."""

from __future__ import annotations

from datetime import UTC, datetime

from app.personas.models import Persona
from app.tools.registry import ToolContext
from tests.conftest import add_character, new_chat


def _seed(sugo) -> tuple[int, int]:
    sugo.services.clock.set(datetime(2026, 12, 2, 12, 0, tzinfo=UTC))
    with sugo.client() as api:
        char = add_character(api, "Aria")
        chat = new_chat(api, [char["id"]], name="Writing desk")
    with sugo.session() as session:
        persona = Persona(name="Sam", time_zone="America/New_York", is_default=True)
        session.add(persona)
        session.commit()
        persona_id = persona.id
    tool = sugo.services.tools.get("create_task")
    ctx = ToolContext(sugo.services, chat["id"], char["id"], persona_id, None, sugo.services.clock.now())
    tool.run(ctx, tool.args.model_validate({"purpose": "Call the bakery.", "at": "2026-12-04 09:00"}))
    return chat["id"], 1


def test_list_edit_and_cancel_through_the_api(sugo, api):
    chat_id, task_id = _seed(sugo)
    listed = api.get("/api/tasks").json()
    assert listed["recent"] == []
    [task] = listed["open"]
    assert task["chat_name"] == "Writing desk" and task["character_name"] == "Aria"
    assert task["due_text"] == "Fri 4 Dec, 09:00 (America/New_York)"
    assert task["due_at"].startswith("2026-12-04T14:00:00")
    r = api.put(f"/api/tasks/{task_id}", json={"at": "2026-12-06 18:15", "interval_hours": 168})
    assert r.status_code == 200, r.text
    assert (
        r.json()["due_text"] == "Sun 6 Dec, 18:15 (America/New_York)" and r.json()["interval"] == "every week"
    )
    for bad, says in (
        ({"at": "2026-12-01 09:00"}, "already passed"),
        ({"at": "soon"}, "YYYY-MM-DD HH:MM"),
        ({"purpose": "x" * 1001}, "1000 characters"),
        ({"interval_hours": 9000}, "less than or equal to 8760"),
    ):
        r = api.put(f"/api/tasks/{task_id}", json=bad)
        assert r.status_code in (400, 422) and says in r.text, (bad, r.text)
    assert api.get("/api/tasks").json()["open"][0]["due_text"] == "Sun 6 Dec, 18:15 (America/New_York)"
    assert api.put("/api/tasks/999", json={"purpose": "Nope."}).status_code == 404
    r = api.post(f"/api/tasks/{task_id}/cancel")
    assert r.status_code == 200 and r.json()["status"] == "cancelled"
    r = api.post(f"/api/tasks/{task_id}/cancel")
    assert r.status_code == 400 and "cancelled already" in r.json()["detail"]
    listed = api.get("/api/tasks").json()
    assert listed["open"] == [] and listed["recent"][0]["status"] == "cancelled"
    # A chat's tasks go with it.
    assert api.delete(f"/api/chats/{chat_id}").status_code == 204
    assert api.get("/api/tasks").json() == {"open": [], "recent": []}


def test_the_page_answers_htmx_with_the_list_only(sugo, api):
    _, task_id = _seed(sugo)
    page = api.get("/tasks")
    assert page.status_code == 200 and "<html" in page.text and "Call the bakery." in page.text
    r = api.post(
        f"/tasks/{task_id}",
        data={"purpose": "Call the bakery about the cake.", "at": "2026-12-05T08:00", "interval_hours": "0"},
        headers={"HX-Request": "true"},
    )
    assert r.status_code == 200 and "<html" not in r.text
    assert 'id="task-list"' in r.text and "Saved." in r.text and "Sat 5 Dec, 08:00" in r.text
    r = api.post(
        f"/tasks/{task_id}", data={"purpose": "", "at": "2026-12-05T08:00"}, headers={"HX-Request": "true"}
    )
    assert r.status_code == 400 and "needs a purpose" in r.text
    r = api.post(f"/tasks/{task_id}/cancel", headers={"HX-Request": "true"})
    assert "Reminder cancelled." in r.text and "cancelled</span>" in r.text
