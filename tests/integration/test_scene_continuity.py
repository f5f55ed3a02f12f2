"""Updating continuity (issue 14) against the test model server as the helper: archived messages get Chat
Summary entries; past 70% of the budget the entries are combined into one about half their size; an
answer cut off, empty, not shorter or adding a macro leaves them as they are, and the same set is not
sent again until one changes."""

from __future__ import annotations

from sqlmodel import Session, select

from app.memory.scenes.continuity import update_continuity
from app.memory.scenes.models import SceneState
from app.memory.summaries.models import SummaryEntry
from tests.conftest import add_character, add_connection, new_chat, read_sse
from tests.support.model_server import Reply
from tests.support.waiting import wait_for


def _chat(sugo, api, models, *, messages: int = 40, budget: int = 6500) -> tuple[int, list[int]]:
    add_connection(api, models)
    chat_id = new_chat(api, [add_character(api)["id"]])["id"]
    for i in range(messages - 1):
        assert (
            api.post(f"/api/chats/{chat_id}/messages", json={"content": f"We walk on, step {i}."}).status_code
            == 201
        )
    r = api.put(
        f"/api/chats/{chat_id}/options",
        json={"settings": {"advanced_memory": True, "adv_budget": budget, "adv_check_interval": 100}},
    )
    assert r.status_code == 200, r.text
    ids = [m["id"] for m in api.get(f"/api/chats/{chat_id}/messages").json()]
    with Session(sugo.engine) as s:
        s.add(SceneState(chat_id=chat_id, checked_through_id=ids[-1], window_start_id=ids[30]))
        s.commit()
    return chat_id, ids


def _entries(sugo, chat_id: int) -> list[SummaryEntry]:
    with Session(sugo.engine) as s:
        return list(
            s.exec(select(SummaryEntry).where(SummaryEntry.chat_id == chat_id).order_by(SummaryEntry.id))
        )


def _state(sugo, chat_id: int) -> SceneState:
    with Session(sugo.engine) as s:
        return s.get(SceneState, chat_id)


def _entry(sugo, chat_id: int, ids: list[int], first: int, last: int, content: str) -> int:
    with Session(sugo.engine) as s:
        e = SummaryEntry(
            chat_id=chat_id,
            title=f"Part {first}",
            content=content,
            first_message_id=ids[first - 1],
            last_message_id=ids[last - 1],
            first_position=first,
            last_position=last,
        )
        s.add(e)
        s.commit()
        return e.id


def test_after_a_reply_the_archived_messages_get_an_entry_and_the_window_none(sugo, api, models):
    chat_id, ids = _chat(sugo, api, models)
    # A real reply (the first answer), then the after-reply work asks the helper for the entry (the second).
    models.script("The road goes on.", "We walked on together, step after step, along the road.")
    read_sse(api.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": "Onward."}))
    wait_for(lambda: _entries(sugo, chat_id), timeout=30, interval=0.1, what="a continuity entry")
    entries = _entries(sugo, chat_id)
    assert [(e.first_message_id, e.last_message_id, e.origin, e.active) for e in entries] == [
        (ids[0], ids[29], "model", True)
    ]
    assert entries[0].content == "We walked on together, step after step, along the road."
    summary_request = models.requests[-1].json["messages"]
    assert "step 0." in summary_request[-1]["content"] and "step 30." not in summary_request[-1]["content"]


def test_past_seventy_percent_the_entries_are_combined_into_one_about_half_their_size(sugo, api, models):
    chat_id, ids = _chat(sugo, api, models, budget=200)
    long = "They walked a long way and talked about the river, the mill and the bridge. " * 3
    a = _entry(sugo, chat_id, ids, 1, 15, long)
    b = _entry(sugo, chat_id, ids, 16, 30, long)
    models.script("They walked far, talking of the river, the mill and the bridge.")
    update_continuity(sugo.services, chat_id)
    entries = {e.id: e for e in _entries(sugo, chat_id)}
    combined = [e for e in entries.values() if e.title == "Continuity"]
    assert len(combined) == 1 and combined[0].active
    assert (combined[0].first_message_id, combined[0].last_message_id) == (ids[0], ids[29])
    assert not entries[a].active and not entries[b].active  # kept, turned off: they can be turned on again
    request = models.last_request.json["messages"]
    assert "about half their length" in request[1]["content"] and long.strip() in request[1]["content"]


def test_bad_answers_leave_the_entries_and_the_same_set_is_not_sent_again(sugo, api, models):
    chat_id, ids = _chat(sugo, api, models, budget=200)
    long = "They walked a long way and talked about the river, the mill and the bridge. " * 3
    _entry(sugo, chat_id, ids, 1, 15, long)
    b = _entry(sugo, chat_id, ids, 16, 30, long)
    before = [(e.id, e.content, e.active) for e in _entries(sugo, chat_id)]
    for answer, reason in (
        (Reply("They walked.", finish_reason="length"), "cut off"),
        (Reply(""), "empty"),
        (Reply(long * 3), "not shorter"),
        (Reply("{{char}} walked."), "added a macro"),
    ):
        models.script(answer)
        update_continuity(sugo.services, chat_id)
        assert [(e.id, e.content, e.active) for e in _entries(sugo, chat_id)] == before
        assert reason in _state(sugo, chat_id).continuity_reason
        # The same set is not sent again.
        sent = len(models.requests)
        update_continuity(sugo.services, chat_id)
        assert len(models.requests) == sent
        # Until an entry changes.
        with Session(sugo.engine) as s:
            entry = s.get(SummaryEntry, b)
            entry.content += " Again."
            s.add(entry)
            s.commit()
        before = [(e.id, e.content, e.active) for e in _entries(sugo, chat_id)]


def test_entries_covering_the_window_or_with_private_sections_are_not_combined(sugo, api, models):
    chat_id, ids = _chat(sugo, api, models, budget=200)
    long = "They walked a long way and talked about the river, the mill and the bridge. " * 3
    inside = _entry(sugo, chat_id, ids, 25, 35, long)  # reaches into the window (it starts at #31)
    private = _entry(sugo, chat_id, ids, 1, 10, '{{#if char == "Aria"}}' + long + "{{/if}}")
    plain = _entry(sugo, chat_id, ids, 11, 24, long)  # every archived message covered: nothing to add first
    models.script("They walked far.")
    update_continuity(sugo.services, chat_id)
    entries = {e.id: e for e in _entries(sugo, chat_id)}
    assert entries[inside].active and entries[private].active and not entries[plain].active
    assert long.strip() in models.last_request.json["messages"][1]["content"]
    assert "{{#if" not in models.last_request.json["messages"][1]["content"]


def test_chat_settings_says_why_continuity_was_not_updated(sugo, api, models):
    chat_id, ids = _chat(sugo, api, models, budget=200)
    long = "They walked a long way and talked about the river, the mill and the bridge. " * 3
    _entry(sugo, chat_id, ids, 1, 30, long * 3)  # past 70% of the budget on its own
    models.script(Reply("They walked.", finish_reason="length"))
    update_continuity(sugo.services, chat_id)
    page = api.get(f"/chats/{chat_id}/settings").text
    assert "Updating continuity left the summaries as they are: The helper&#39;s answer was cut off" in page


def test_a_groups_archived_entry_keeps_what_one_member_did_not_see_from_it(background_held, api, models):
    """The Chat Summary entries follow the per-character rules: the helper writing an archived
    stretch is told which messages a member did not see, and what it puts in an {{#if}} section for
    Aria stays out of Bram's prompt (held: only the helper's request asks the model here)."""
    sugo = background_held
    add_connection(api, models)
    ids = {n: add_character(api, n, first_mes="")["id"] for n in ("Aria", "Bram")}
    chat_id = new_chat(api, list(ids.values()))["id"]
    for i in range(40):
        api.post(f"/api/chats/{chat_id}/messages", json={"content": f"We walk on, step {i}."})
    msgs = api.get(f"/api/chats/{chat_id}/messages").json()
    hidden = msgs[5]["id"]
    r = api.patch(
        f"/api/chats/{chat_id}/messages/{hidden}",
        json={"content": "The vault code is 7-4-1.", "hidden_for": [ids["Bram"]]},
    )
    assert r.status_code == 200, r.text
    r = api.put(
        f"/api/chats/{chat_id}/options",
        json={"settings": {"advanced_memory": True, "adv_check_interval": 100, "reply_order": "manual"}},
    )
    assert r.status_code == 200, r.text
    with Session(sugo.engine) as s:
        s.add(SceneState(chat_id=chat_id, checked_through_id=msgs[-1]["id"], window_start_id=msgs[30]["id"]))
        s.commit()
    models.script('We walked on. {{#if character == "Aria"}}Aria learned the vault code, 7-4-1.{{/if}}')
    update_continuity(sugo.services, chat_id)
    request = models.requests[-1].json["messages"]
    assert "[hidden from Bram]" in request[-1]["content"] and "{{#if character ==" in request[0]["content"]
    assert len(_entries(sugo, chat_id)) == 1

    def peek(name: str) -> str:
        r = api.get(f"/api/chats/{chat_id}/prompt", params={"speaker_id": ids[name]})
        assert r.status_code == 200, r.text
        return r.json()["messages"][0]["content"]

    assert "We walked on." in peek("Bram") and "7-4-1" not in peek("Bram")
    assert "Aria learned the vault code, 7-4-1." in peek("Aria")
