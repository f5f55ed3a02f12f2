"""Issue 12, "summarise the uncovered messages": the panel's button has the model summarise the oldest
stretch of messages older than the recent tail that no summary covers, at most 50 at a time, through
the same Generate run (so failure, Retry and Review behave the same)."""

from __future__ import annotations

from tests.conftest import add_character, new_chat
from tests.integration.test_summaries_generate import _chat, _wait

RECAP = "They walked the long road and argued about the map."


def test_the_oldest_uncovered_stretch_is_summarised_first_in_batches_of_50(api, models):
    chat_id, messages = _chat(api, models, 69)  # 70 messages, tail 10: 60 older ones
    base = f"/api/chats/{chat_id}/summaries"
    # Messages 5–8 are covered already; an inactive entry is the user's choice, not a gap.
    api.post(base, json={"content": "A written summary.", "scope": "range", "start": 5, "end": 8})
    off = api.post(base, json={"content": "Switched off.", "scope": "range", "start": 60, "end": 60}).json()
    api.patch(f"{base}/{off['id']}", json={"active": False})

    models.script(RECAP)
    assert api.post(f"{base}/uncovered").status_code == 202
    done = _wait(api, chat_id)
    assert done["status"] == "done", done
    entry = api.get(f"{base}/{done['entry_id']}").json()
    assert (entry["first_position"], entry["last_position"]) == (1, 4) and entry["origin"] == "model"
    sent = "\n".join(m["content"] for m in models.last_request.json["messages"])
    assert messages[3]["content"] in sent and messages[4]["content"] not in sent

    models.script(RECAP)
    assert api.post(f"{base}/uncovered").status_code == 202
    entry = api.get(f"{base}/{_wait(api, chat_id)['entry_id']}").json()
    assert (entry["first_position"], entry["last_position"]) == (9, 58)  # 50 messages, not past 59

    models.script(RECAP)
    assert api.post(f"{base}/uncovered").status_code == 202
    entry = api.get(f"{base}/{_wait(api, chat_id)['entry_id']}").json()
    assert (entry["first_position"], entry["last_position"]) == (59, 59)  # 60 is the inactive entry's

    r = api.post(f"{base}/uncovered")
    assert r.status_code == 400 and "covered by a summary already" in r.text
    assert len(api.get(base).json()) == 5


def test_hidden_messages_are_not_counted_or_sent_and_the_panel_says_what_remains(api, models):
    chat_id, messages = _chat(api, models, 69)
    api.patch(f"/api/chats/{chat_id}/messages/{messages[1]['id']}", json={"hidden": True})
    panel = api.get(f"/chats/{chat_id}/summaries", headers={"HX-Request": "true"}).text
    # 60 older than a tail of 10 readable messages (the tail moved back by one): 59 readable are uncovered.
    assert "59 messages older than the recent tail (10) are covered by no summary." in panel
    assert (
        "The button summarises the oldest stretch (50 messages, at most 50 at a time); 9 more will remain; Backfill Summary above does them all."
        in panel
    )
    assert "Summarise messages 1–51" in panel

    models.script(RECAP)
    assert api.post(f"/api/chats/{chat_id}/summaries/uncovered").status_code == 202
    done = _wait(api, chat_id)
    sent = "\n".join(m["content"] for m in models.last_request.json["messages"])
    assert messages[1]["content"] not in sent and messages[50]["content"] in sent
    panel = api.get(f"/chats/{chat_id}/summaries", headers={"HX-Request": "true"}).text
    assert "9 messages older than the recent tail (10) are covered by no summary." in panel
    assert "more will remain" not in panel and "Summarise messages 52–60" in panel
    assert done["status"] == "done"


def test_a_failed_run_writes_nothing_and_retry_reruns_the_same_stretch(api, models):
    chat_id, _ = _chat(api, models, 20)
    models.script("   ")
    api.post(f"/api/chats/{chat_id}/summaries/uncovered")
    failed = _wait(api, chat_id)
    assert failed["status"] == "failed" and api.get(f"/api/chats/{chat_id}/summaries").json() == []
    models.script(RECAP)
    api.post(f"/api/chats/{chat_id}/summaries/generate/retry")
    entry = api.get(f"/api/chats/{chat_id}/summaries/{_wait(api, chat_id)['entry_id']}").json()
    assert (entry["first_position"], entry["last_position"]) == (1, 11)


def test_the_panel_url_is_a_page_when_opened_directly_and_the_panel_for_htmx(api, models):
    chat_id, _ = _chat(api, models, 3)
    page = api.get(f"/chats/{chat_id}/summaries")
    assert page.status_code == 200 and "<html" in page.text and 'id="summary-back"' in page.text
    assert 'id="summary-page-form"' in page.text and 'id="summary-panel"' in page.text
    panel = api.get(f"/chats/{chat_id}/summaries", headers={"HX-Request": "true"})
    assert "<html" not in panel.text and panel.text.lstrip().startswith('<div id="summary-panel"')
    assert "HX-Request" in page.headers["vary"]
    chat = new_chat(api, [add_character(api)["id"]], mode="conversation")
    r = api.get(f"/chats/{chat['id']}/summaries")
    assert r.status_code == 400 and "Roleplay" in r.text and "Traceback" not in r.text
