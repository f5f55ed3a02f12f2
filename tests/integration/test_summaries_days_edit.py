"""Issue 21, item 17: Edit Summaries of a Conversation chat over real HTTP. A week's days stay listed under
it, each to check and fix; a deleted week (or a day its week speaks for) is written again at once by
Write now, with its progress and result, in the window and over JSON; and saving an item unchanged
gives back exactly what was there, a Key Detail written over several lines included."""

from __future__ import annotations

import json
import re
from datetime import UTC, date, datetime, time, timedelta
from html import unescape
from html.parser import HTMLParser

from sqlmodel import Session

from app.chats.models import Message
from app.memory.days import runs as day_runs
from app.memory.days import service as conversation
from app.memory.days.core.days import chat_day, week_start
from app.platform.timeutil import utcnow
from tests.conftest import add_character, add_connection, new_chat
from tests.support.model_server import Reply
from tests.support.waiting import wait_for

DAY_PROMPT_START = "You summarize one day of a conversation"
WEEK_PROMPT_START = "You consolidate the daily summaries"
MULTI = "She promised to call on Friday,\nafter the night shift,\n  and to bring the letters."
HX = {"HX-Request": "true"}


def _today() -> date:
    return chat_day(utcnow(), conversation.local_zone(), 4)


def _last_week() -> date:
    return week_start(_today()) - timedelta(days=7)


def _chat(api, models) -> int:
    add_connection(api, models)
    return new_chat(api, [add_character(api)["id"]], mode="conversation")["id"]


def _seed_week(engine, chat_id: int, monday: date) -> list[date]:
    """Two messages at noon of each day of the week starting `monday` (a finished week)."""
    days = [monday + timedelta(days=n) for n in range(7)]
    with Session(engine) as session:
        for day in days:
            at = datetime.combine(day, time(12)).astimezone().astimezone(UTC)
            for role, text in (("user", f"Hello on {day}"), ("assistant", f"Answer on {day}")):
                session.add(
                    Message(
                        chat_id=chat_id,
                        role=role,
                        name="You" if role == "user" else "Aria",
                        content=text,
                        swipes=[{"content": text}],
                        created_at=at,
                        updated_at=at,
                    )
                )
        session.commit()
    return days


def _answer(n: int, details: list[str] | None = None) -> str:
    return json.dumps({"summary": f"Summary number {n}.", "keyDetails": details or [f"detail {n}"]})


def _summarised_week(sugo, api, models) -> tuple[int, date, list[date]]:
    """A chat whose last week is summarised: seven days, then the week (with a multi-line detail)."""
    chat_id = _chat(api, models)
    monday = _last_week()
    days = _seed_week(sugo.engine, chat_id, monday)
    models.script(*[_answer(n) for n in range(1, 8)], _answer(100, [MULTI, "A plain one"]))
    day_runs.summarize_chat(sugo.services, chat_id)
    assert [w["date"] for w in api.get(f"/api/chats/{chat_id}/weeks").json()] == [monday.isoformat()]
    models.reset()
    return chat_id, monday, days


class _Fields(HTMLParser):
    """The fields of one item of the window, as a browser's form sends them: name → values in order."""

    def __init__(self, key: str) -> None:
        super().__init__(convert_charrefs=True)
        self.key, self.fields, self._name, self._in_template = key, {}, None, 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "template":
            self._in_template += 1  # a <template>'s fields are not in the form until added
        if tag == "textarea" and not self._in_template and (a.get("name") or "").endswith(self.key):
            self._name = a["name"]
            self.fields.setdefault(self._name, []).append("")

    def handle_endtag(self, tag):
        if tag == "template":
            self._in_template -= 1
        if tag == "textarea":
            self._name = None

    def handle_data(self, data):
        if self._name:
            self.fields[self._name][-1] += data


def _form_of(html: str, key: str) -> list[tuple[str, str]]:
    parser = _Fields(key)
    parser.feed(html)
    # A browser drops one line break right after <textarea> and sends line breaks as CRLF.
    return [
        (name, re.sub(r"^\n", "", v).replace("\n", "\r\n"))
        for name, values in parser.fields.items()
        for v in values
    ]


def test_the_window_lists_each_week_with_its_days_under_it(sugo, api, models, background_held):
    chat_id, monday, days = _summarised_week(sugo, api, models)
    html = api.get(f"/chats/{chat_id}/days/edit", headers=HX).text
    group = html[html.index(f'id="week-group-{monday.isoformat()}"') :]
    assert group.index(f'id="week-{monday.isoformat()}"') < group.index(f'id="day-{days[0].isoformat()}"')
    for day in days:  # every day is there, editable, in order, inside the week's group
        assert f'name="s_day-{day.isoformat()}"' in group and f'name="k_day-{day.isoformat()}"' in group
    positions = [group.index(f'id="day-{d.isoformat()}"') for d in days]
    assert positions == sorted(positions)
    assert "Summary number 3." in group

    # A day of a summarised week is edited on its own; the week stays as it was.
    r = api.post(
        f"/chats/{chat_id}/days/{days[2].isoformat()}/save",
        headers=HX,
        data={
            f"s_day-{days[2].isoformat()}": "We fixed the bike.",
            f"k_day-{days[2].isoformat()}": ["Bike fixed"],
        },
    )
    assert (
        r.status_code == 200
        and "Saved." in r.text
        and r.headers["HX-Trigger"] == "sugo:day-summaries-changed"
    )
    day = next(d for d in api.get(f"/api/chats/{chat_id}/days").json() if d["date"] == days[2].isoformat())
    assert (day["summary"], day["key_details"], day["origin"]) == (
        "We fixed the bike.",
        ["Bike fixed"],
        "user",
    )
    assert api.get(f"/api/chats/{chat_id}/weeks").json()[0]["summary"] == "Summary number 100."


def test_saving_a_week_unchanged_round_trips_a_multi_line_key_detail_exactly(
    sugo, api, models, background_held
):
    chat_id, monday, _ = _summarised_week(sugo, api, models)
    before = api.get(f"/api/chats/{chat_id}/weeks").json()[0]
    assert before["key_details"] == [MULTI.strip(), "A plain one"] and before["origin"] == "model"
    key = f"week-{monday.isoformat()}"
    form = _form_of(api.get(f"/chats/{chat_id}/days/edit", headers=HX).text, key)
    assert [name for name, _ in form] == [f"s_{key}", f"k_{key}", f"k_{key}"]
    r = api.post(f"/chats/{chat_id}/weeks/{monday.isoformat()}/save", content=_encode(form), headers=_FORM)
    assert r.status_code == 200, r.text
    assert "No changes." in r.text and "HX-Trigger" not in r.headers
    after = api.get(f"/api/chats/{chat_id}/weeks").json()[0]
    assert after == before  # the same details, the same text, still the model's, not touched

    # An edit: one detail changed, a new one over two lines, an empty field left out.
    edited = [(n, v) for n, v in form if v != "A plain one"] + [
        (f"k_{key}", "Two\r\nlines"),
        (f"k_{key}", "  "),
    ]
    r = api.post(f"/chats/{chat_id}/weeks/{monday.isoformat()}/save", content=_encode(edited), headers=_FORM)
    assert r.status_code == 200 and "Saved." in r.text
    week = api.get(f"/api/chats/{chat_id}/weeks").json()[0]
    assert week["key_details"] == [MULTI.strip(), "Two\nlines"] and week["origin"] == "user"
    again = _form_of(api.get(f"/chats/{chat_id}/days/edit", headers=HX).text, key)
    api.post(f"/chats/{chat_id}/weeks/{monday.isoformat()}/save", content=_encode(again), headers=_FORM)
    assert api.get(f"/api/chats/{chat_id}/weeks").json()[0] == week


_FORM = {"HX-Request": "true", "Content-Type": "application/x-www-form-urlencoded"}


def _encode(pairs: list[tuple[str, str]]) -> bytes:
    from urllib.parse import urlencode

    return urlencode(pairs).encode()


def _write_result(api, chat_id: int, path: str) -> str:
    """Poll the window's Write now answer (as the page does) until it carries the result."""

    def done():
        r = api.get(f"/chats/{chat_id}/{path}/write", headers=HX)
        assert r.status_code == 200, r.text
        return r if 'id="write-result-' in r.text else None

    return wait_for(done, timeout=30, interval=0.05, what="Write now's result").text


def test_write_now_after_deleting_a_week_writes_it_again(sugo, api, models, background_held):
    chat_id, monday, days = _summarised_week(sugo, api, models)
    week = monday.isoformat()
    assert api.get(f"/api/chats/{chat_id}/weeks/{week}/write").json() == {
        "status": "none",
        "date": week,
        "current": "",
        "days_written": 0,
        "result": "",
    }
    r = api.post(f"/chats/{chat_id}/weeks/{week}/delete", headers=HX)
    assert r.status_code == 200 and f'id="write-now-week-{week}"' in r.text  # offered at once
    assert api.get(f"/api/chats/{chat_id}/weeks").json() == []

    models.script(Reply(_answer(200, ["Week detail"]), first_delay_s=0.3))
    r = api.post(f"/chats/{chat_id}/weeks/{week}/write", headers=HX)
    assert r.status_code == 200, r.text
    assert r.text.lstrip().startswith(f'<section class="week-group stack" id="week-group-{week}"')
    assert f'id="write-progress-week-{week}"' in r.text and "Consolidating the week of" in r.text
    html = _write_result(api, chat_id, f"weeks/{week}")
    assert f"Wrote the summary of the week of {monday:%d.%m.%Y}" in unescape(html)
    [written] = api.get(f"/api/chats/{chat_id}/weeks").json()
    assert (written["date"], written["summary"], written["key_details"]) == (
        week,
        "Summary number 200.",
        ["Week detail"],
    )
    [asked] = [r.json["messages"] for r in models.requests]
    assert asked[0]["content"].startswith(WEEK_PROMPT_START) and "Summary number 1." in asked[1]["content"]
    assert len(api.get(f"/api/chats/{chat_id}/days").json()) == 7  # its days were there: none written again
    assert (
        api.get(f"/chats/{chat_id}/weeks/{week}/write", headers=HX).headers["HX-Trigger"]
        == "sugo:day-summaries-changed"
    )

    # Reopened, the window shows the week, not an old result line.
    assert 'id="write-result-' not in api.get(f"/chats/{chat_id}/days/edit", headers=HX).text

    # The JSON twin: delete a day the week speaks for and the week, write the week: the day first.
    models.reset()
    assert api.delete(f"/api/chats/{chat_id}/days/{days[4].isoformat()}").status_code == 204
    assert api.delete(f"/api/chats/{chat_id}/weeks/{week}").status_code == 204
    models.script(_answer(5), _answer(300))
    started = api.post(f"/api/chats/{chat_id}/weeks/{week}/write")
    assert started.status_code == 202 and started.json()["status"] in ("running", "done")
    status = wait_for(
        lambda: (
            (s := api.get(f"/api/chats/{chat_id}/weeks/{week}/write").json())["status"] != "running" and s
        ),
        timeout=30,
        interval=0.05,
        what="the week written",
    )
    assert status == {
        "status": "done",
        "date": week,
        "current": "",
        "days_written": 1,
        "result": f"Wrote the summary of the week of {monday:%d.%m.%Y} – {days[-1]:%d.%m.%Y} and 1 day summary.",
    }
    assert [r.json["messages"][0]["content"][:30] for r in models.requests] == [
        DAY_PROMPT_START[:30],
        WEEK_PROMPT_START[:30],
    ]
    assert api.get(f"/api/chats/{chat_id}/weeks").json()[0]["summary"] == "Summary number 300."


def test_write_now_of_a_day_its_week_speaks_for_and_what_it_refuses(sugo, api, models, background_held):
    chat_id, monday, days = _summarised_week(sugo, api, models)
    day = days[1].isoformat()
    api.post(f"/chats/{chat_id}/days/{day}/delete", headers=HX)
    html = api.get(f"/chats/{chat_id}/days/edit", headers=HX).text
    assert f'id="write-now-day-{day}"' in html  # no background run would write it: the week speaks for it

    # A model that answers nonsense: the result says why, beside the button, which is offered again.
    models.script(Reply("no JSON here at all"), Reply("still nothing"))
    assert api.post(f"/chats/{chat_id}/days/{day}/write", headers=HX).status_code == 200
    html = unescape(_write_result(api, chat_id, f"days/{day}"))
    assert f"Could not write {days[1]:%d.%m.%Y}:" in html and f'id="write-now-day-{day}"' in html
    models.reset()
    models.script(_answer(42))
    html = unescape(api.post(f"/chats/{chat_id}/days/{day}/write", headers=HX).text)
    html = unescape(_write_result(api, chat_id, f"days/{day}"))
    assert f"Wrote the summary of {days[1]:%d.%m.%Y}." in html
    assert (
        next(d for d in api.get(f"/api/chats/{chat_id}/days").json() if d["date"] == day)["summary"]
        == "Summary number 42."
    )

    # Refused, with the reason, next to the button (HTML) or as a 400 (JSON): what has a summary, what
    # is not over, what has no messages, a Roleplay chat.
    week = monday.isoformat()
    r = api.post(f"/chats/{chat_id}/weeks/{week}/write", headers=HX)
    assert r.status_code == 200 and "already has a summary; delete it first" in unescape(r.text)
    for path, words in [
        (f"weeks/{week}", "already has a summary"),
        (f"days/{day}", "already has a summary"),
        (f"weeks/{week_start(_today()).isoformat()}", "is not over yet"),
        (f"days/{_today().isoformat()}", "is not over yet"),
        (f"days/{(monday - timedelta(days=3)).isoformat()}", "has no messages"),
        (f"weeks/{(monday - timedelta(days=1)).isoformat()}", "is named by its Monday"),
    ]:
        r = api.post(f"/api/chats/{chat_id}/{path}/write")
        assert r.status_code == 400 and words in r.json()["detail"], (path, r.text)
    roleplay = new_chat(api, [add_character(api, "Bo")["id"]])["id"]
    r = api.post(f"/api/chats/{roleplay}/days/{day}/write")
    assert r.status_code == 400 and "Conversation" in r.json()["detail"]

    # One writer per chat: while a Backfill has the chat, Write now says so.
    api.delete(f"/api/chats/{chat_id}/weeks/{week}")
    assert sugo.services.claims.day_summaries.claim(chat_id)
    try:
        r = api.post(f"/chats/{chat_id}/weeks/{week}/write", headers=HX)
        assert r.status_code == 200 and "being written for this chat right now" in r.text
        assert api.post(f"/api/chats/{chat_id}/weeks/{week}/write").status_code == 400
    finally:
        sugo.services.claims.day_summaries.release(chat_id)
