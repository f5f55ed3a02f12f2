"""Chat Summary entries (issue 12, the user-written slice): CRUD and validation over the JSON API,
and what the model receives: active entries above the conversation, summarised messages older than
the recent tail left out only when the chat hides them, uncovered ones always sent."""

from __future__ import annotations

from tests.conftest import add_character, add_connection, new_chat, read_sse

RECAP = "Rowan and Aria crossed the salt flats and lost the map to a sandstorm."


def _chat_with_messages(api, models, n: int = 30) -> tuple[int, list[dict]]:
    """A Roleplay chat: the greeting, then n user messages numbered 2..n+1 as the chat shows them."""
    add_connection(api, models)
    chat = new_chat(api, [add_character(api)["id"]])
    for i in range(2, n + 2):
        r = api.post(f"/api/chats/{chat['id']}/messages", json={"content": f"Step {i} along the road."})
        assert r.status_code == 201, r.text
    return chat["id"], api.get(f"/api/chats/{chat['id']}/messages").json()


def _settings(api, chat_id: int, **values) -> None:
    r = api.put(f"/api/chats/{chat_id}/options", json={"settings": values})
    assert r.status_code == 200, r.text


def _sent(api, models, chat_id: int, text: str = "What now?") -> list[dict]:
    events = read_sse(api.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": text}))
    assert events[-1][0] == "done", events[-1]
    return models.last_request.json["messages"]


def test_write_list_edit_toggle_and_delete(api, models):
    chat_id, messages = _chat_with_messages(api, models, 10)
    base = f"/api/chats/{chat_id}/summaries"
    assert api.get(base).json() == []
    r = api.post(
        base, json={"title": "The salt flats", "content": RECAP, "scope": "range", "start": 2, "end": 6}
    )
    assert r.status_code == 201, r.text
    entry = r.json()
    assert (entry["first_position"], entry["last_position"], entry["message_count"]) == (2, 6, 5)
    assert entry["first_message_id"] == messages[1]["id"] and entry["last_message_id"] == messages[5]["id"]
    assert (
        entry["active"] and entry["origin"] == "user" and not entry["awaiting_review"] and entry["tokens"] > 0
    )
    last = api.post(base, json={"content": "They camp by the dry well.", "scope": "last", "last": 3}).json()
    assert (last["first_position"], last["last_position"]) == (9, 11)

    r = api.patch(f"{base}/{entry['id']}", json={"content": "Edited recap.", "active": False})
    assert r.status_code == 200 and r.json()["content"] == "Edited recap." and not r.json()["active"]
    assert api.post(f"{base}/activation", json={"active": False}).json() == {"changed": 1}
    assert api.post(f"{base}/activation", json={"active": True, "ids": [last["id"]]}).json() == {"changed": 1}
    assert [e["active"] for e in api.get(base).json()] == [False, True]

    # Deleting a covered message shrinks the entry; the numbers are counted again.
    assert api.delete(f"/api/chats/{chat_id}/messages/{messages[2]['id']}").status_code == 204
    shrunk = api.get(f"{base}/{entry['id']}").json()
    assert (shrunk["first_position"], shrunk["last_position"], shrunk["message_count"]) == (2, 5, 4)

    assert api.delete(f"{base}/{entry['id']}").status_code == 204
    assert [e["id"] for e in api.get(base).json()] == [last["id"]]
    assert api.get(f"{base}/{entry['id']}").status_code == 404


def test_bad_summaries_are_refused_with_a_reason_and_nothing_is_written(api, models):
    chat_id, _ = _chat_with_messages(api, models, 5)
    base = f"/api/chats/{chat_id}/summaries"
    cases = [
        ({"content": "  ", "scope": "last", "last": 2}, "cannot be empty"),
        ({"content": "x", "scope": "range", "start": 5, "end": 2}, "backwards"),
        ({"content": "x", "scope": "range", "start": 2, "end": 40}, "has 6 messages"),
        ({"content": "x", "scope": "range", "start": 2}, "first and the last"),
        ({"content": "x", "scope": "last"}, "how many"),
    ]
    for body, reason in cases:
        r = api.post(base, json=body)
        assert r.status_code == 400 and reason in r.text, (body, r.text)
    assert api.post(base, json={"content": "x" * 20_001, "last": 1}).status_code == 422
    assert api.post(base, json={"content": "x", "title": "t" * 201, "last": 1}).status_code == 422
    assert api.get(base).json() == []
    convo = new_chat(api, [add_character(api, "Kaito")["id"]], mode="conversation")
    r = api.post(f"/api/chats/{convo['id']}/summaries", json={"content": "x", "last": 1})
    assert r.status_code == 400 and "Roleplay" in r.text


def test_active_entries_go_above_the_conversation_and_hide_leaves_out_only_covered_old_messages(api, models):
    chat_id, messages = _chat_with_messages(api, models, 30)  # numbers 1..31
    base = f"/api/chats/{chat_id}/summaries"
    api.post(base, json={"title": "Road", "content": RECAP, "scope": "range", "start": 5, "end": 12})
    off = api.post(
        base,
        json={"content": "An inactive recap nobody should read.", "scope": "range", "start": 13, "end": 16},
    ).json()
    api.patch(f"{base}/{off['id']}", json={"active": False})
    covers_tail = api.post(base, json={"content": "The newest steps.", "scope": "last", "last": 4}).json()
    assert covers_tail["first_position"] == 28

    sent = _sent(api, models, chat_id)
    system = sent[0]["content"]
    assert RECAP in system and "The newest steps." in system and "An inactive recap" not in system
    assert system.index(RECAP) < system.index("The newest steps.")  # message order
    contents = [m["content"] for m in sent]
    # Hide is off: every message is still sent.
    assert "Step 5 along the road." in contents and "Step 12 along the road." in contents

    _settings(api, chat_id, summary_hide_messages=True, summary_recent_tail=10)
    sent = _sent(api, models, chat_id, "And then?")
    contents = [m["content"] for m in sent]
    # Covered and older than the tail: left out. Covered by the inactive entry: still sent.
    assert not any(f"Step {i} along the road." in contents for i in range(5, 13))
    assert all(f"Step {i} along the road." in contents for i in (2, 3, 4, 13, 16, 17, 31))
    # Message 28 onwards is covered but inside the 10-message tail: sent.
    assert all(f"Step {i} along the road." in contents for i in (28, 29, 30))
    assert contents[-1] == "And then?"
    assert RECAP in sent[0]["content"]

    peek = api.get(f"/api/chats/{chat_id}/prompt").json()
    assert [b["label"] for b in peek["blocks"] if b["group"] == "above_conversation"] == ["Chat Summary"]
    assert any(
        "8 messages summarised and left out;" in n
        and "older messages not covered by any summary are still sent" in n
        for n in peek["notes"]
    )
    page = api.get(f"/chats/{chat_id}/prompt").text
    assert "Chat Summary" in page and "8 messages summarised and left out;" in page

    # Deactivated, an entry's messages come back.
    api.post(f"{base}/activation", json={"active": False})
    sent = _sent(api, models, chat_id, "Again?")
    assert "Step 5 along the road." in [m["content"] for m in sent] and RECAP not in sent[0]["content"]


def test_the_panel_refuses_a_bad_write_with_a_toast_and_writes_nothing(api, models):
    chat_id, _ = _chat_with_messages(api, models, 3)
    hx = {"HX-Request": "true"}
    r = api.post(
        f"/chats/{chat_id}/summaries/write",
        headers=hx,
        data={"summary_scope": "range", "summary_start": "3", "summary_end": "9", "summary_content": "x"},
    )
    assert r.status_code == 400 and "This chat has 4 messages: message 9 does not exist." in r.text
    assert r.headers["HX-Retarget"] == "#toasts" and "<html" not in r.text
    assert api.get(f"/api/chats/{chat_id}/summaries").json() == []
    r = api.post(
        f"/chats/{chat_id}/summaries/write",
        headers=hx,
        data={"summary_scope": "last", "summary_last": "2", "summary_content": "They rest."},
    )
    assert r.status_code == 200 and "<html" not in r.text and 'id="summary-panel"' in r.text
    assert "messages 3–4" in r.text


def test_the_cached_prefix_changes_only_when_an_entry_does(api, models):
    chat_id, messages = _chat_with_messages(api, models, 20)
    base = f"/api/chats/{chat_id}/summaries"
    api.post(base, json={"title": "Road", "content": RECAP, "scope": "range", "start": 2, "end": 8})
    _settings(api, chat_id, summary_hide_messages=True, summary_recent_tail=4)
    first = _sent(api, models, chat_id, "One.")[0]
    # A new turn, and a deleted covered message (the numbers shift): the prefix stays byte-identical.
    api.delete(f"/api/chats/{chat_id}/messages/{messages[3]['id']}")
    assert _sent(api, models, chat_id, "Two.")[0] == first
    entry = api.get(base).json()[0]
    api.patch(f"{base}/{entry['id']}", json={"content": "A new recap."})
    changed = _sent(api, models, chat_id, "Three.")[0]
    assert changed != first and "A new recap." in changed["content"]


def test_collapse_hidden_messages_is_saved_by_the_settings_form_and_changes_the_chat_view(api, models):
    chat_id, messages = _chat_with_messages(api, models, 14)  # 15 messages; older than the tail of 10: 1–5
    api.post(
        f"/api/chats/{chat_id}/summaries", json={"content": RECAP, "scope": "range", "start": 2, "end": 4}
    )
    assert (
        api.get(f"/api/chats/{chat_id}").json()["settings"]["summary_collapse_hidden"] is True
    )  # the default
    form = {
        "name": "Road",
        "mode": "roleplay",
        "recent_message_limit": "40",
        "chat_summary_shown": "1",
        "summary_recent_tail": "10",
        "summary_max_tokens": "4096",
        "summary_hide_messages": "true",
    }
    hx = {"HX-Request": "true"}
    folded = f'id="msg-{messages[2]["id"]}"'
    r = api.post(f"/chats/{chat_id}/settings", data=form, headers=hx)  # the box left unticked
    assert r.status_code == 200, r.text
    assert 'id="summary-collapse-hidden" >' in r.text  # shown unticked
    assert api.get(f"/api/chats/{chat_id}").json()["settings"]["summary_collapse_hidden"] is False
    page = api.get(f"/chats/{chat_id}").text
    assert page.count('data-summarised="shown"') == 3 and page.count("summarised · not sent") == 3
    assert folded in page

    r = api.post(f"/chats/{chat_id}/settings", data={**form, "summary_collapse_hidden": "true"}, headers=hx)
    assert r.status_code == 200 and 'id="summary-collapse-hidden" checked>' in r.text
    assert api.get(f"/api/chats/{chat_id}").json()["settings"]["summary_collapse_hidden"] is True
    page = api.get(f"/chats/{chat_id}").text
    assert page.count("data-summarised") == 3 and 'data-summarised="shown"' not in page
    assert "summarised · not sent" not in page
    # With Hide summarised messages off, neither applies.
    r = api.post(
        f"/chats/{chat_id}/settings",
        data={k: v for k, v in form.items() if k != "summary_hide_messages"},
        headers=hx,
    )
    assert r.status_code == 200
    page = api.get(f"/chats/{chat_id}").text
    assert "data-summarised" not in page and "summarised · not sent" not in page
