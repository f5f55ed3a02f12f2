"""update_user_info through Tool.run with a real ToolContext over a live Sugo, the participant info it
feeds the prompt, and the persona's details on the Personas page and its JSON twin."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError
from sqlmodel import select

from app.personas.models import Persona
from app.tools.builtin import builtin_tools
from app.tools.registry import ToolContext, ToolError, ToolResult
from app.tools.user_info.models import UserAddress
from tests.conftest import add_character, new_chat

TOOL = next(tool for tool in builtin_tools() if tool.name == "update_user_info")


def update(ctx: ToolContext, **arguments) -> ToolResult:
    result = TOOL.run(ctx, TOOL.args.model_validate(arguments))
    assert isinstance(result, ToolResult)
    return result


@pytest.fixture
def setup(sugo, api) -> dict:
    mara = api.post("/api/personas", json={"name": "Mara", "description": "A harbour pilot."}).json()
    aria = add_character(api, "Aria")
    brom = add_character(api, "Brom")
    chat = new_chat(api, [aria["id"], brom["id"]], persona_id=mara["id"])
    return {"persona": mara, "aria": aria, "brom": brom, "chat": chat}


def _ctx(sugo, setup, *, speaker: str = "aria", persona: bool = True) -> ToolContext:
    return ToolContext(
        services=sugo.services,
        chat_id=setup["chat"]["id"],
        character_id=setup[speaker]["id"],
        persona_id=setup["persona"]["id"] if persona else None,
        message_id=None,
        now=datetime.now(UTC),
    )


def _stored(sugo, setup) -> tuple[list[tuple], tuple]:
    with sugo.session() as session:
        rows = session.exec(select(UserAddress).order_by(UserAddress.character_id)).all()
        persona = session.get(Persona, setup["persona"]["id"])
        return (
            [(r.character_id, r.persona_id, r.nickname, r.prefix, r.suffix) for r in rows],
            (persona.pronouns, persona.form_of_address),
        )


def _participant_info(api, chat_id: int) -> dict | None:
    peek = api.get(f"/api/chats/{chat_id}/prompt").json()
    return next((b for b in peek["blocks"] if b["label"] == "Participant info"), None)


def test_naming_and_details_are_written_and_the_new_name_reported(sugo, api, setup):
    ctx = _ctx(sugo, setup)
    result = update(ctx, prefix="Captain", pronouns="she/her", form_of_address="formal")
    assert result.notice == "Aria now calls you Captain Mara."
    assert "Pronouns: she/her" in result.text and "Form of address: formal" in result.text
    aria, mara = setup["aria"]["id"], setup["persona"]["id"]
    assert _stored(sugo, setup) == ([(aria, mara, "", "Captain", "")], ("she/her", "formal"))

    # A nickname sent with the prefix in force keeps only the nickname; the suffix joins as written.
    result = update(ctx, nickname="Captain Mar", suffix="-san")
    assert result.notice == "Aria now calls you Captain Mar-san."
    assert _stored(sugo, setup)[0] == [(aria, mara, "Mar", "Captain", "-san")]

    # A pronoun edit repeats no name that nothing altered.
    result = update(ctx, pronouns="they/them")
    assert "calls you" not in result.text and result.notice == "Saved: Pronouns: they/them."

    # The Personas page's JSON twin reads the persona's details back.
    shown = api.get(f"/api/personas/{mara}").json()
    assert (shown["pronouns"], shown["form_of_address"]) == ("they/them", "formal")


def test_one_bad_field_writes_nothing(sugo, setup):
    ctx = _ctx(sugo, setup)
    update(ctx, nickname="Mar", pronouns="she/her")
    before = _stored(sugo, setup)
    bad_calls = [
        {"nickname": "Skipper", "pronouns": "x" * 61},
        {"prefix": "Dr.", "form_of_address": "formal\nand curt"},
        {"suffix": "-chan", "time_zone": "Mars/Olympus_Mons"},
        {"nickname": "Skipper", "clear": ["nickname"]},
    ]
    for arguments in bad_calls:
        with pytest.raises(ToolError, match="^Nothing was changed: "):
            update(ctx, **arguments)
        assert _stored(sugo, setup) == before, arguments
    with pytest.raises(ToolError, match="Pronouns is 61 characters long; at most 60"):
        update(ctx, pronouns="x" * 61)
    # The argument model refuses a field name clear does not know before the handler runs.
    with pytest.raises(ValidationError):
        TOOL.args.model_validate({"clear": ["password"]})
    with pytest.raises(ValidationError):
        TOOL.args.model_validate({"nickname": "x" * 241})


def test_clear_and_blank_values_clear(sugo, setup):
    ctx = _ctx(sugo, setup)
    update(ctx, nickname="Mar", prefix="Captain", pronouns="she/her", form_of_address="formal")
    result = update(ctx, clear=["prefix", "pronouns"], nickname="  ")
    assert "Prefix: (cleared)" in result.text and "Nickname: (cleared)" in result.text
    assert result.notice == "Aria now calls you Mara."
    aria, mara = setup["aria"]["id"], setup["persona"]["id"]
    assert _stored(sugo, setup) == ([(aria, mara, "", "", "")], (None, "formal"))
    assert update(ctx).text.startswith("Nothing to change")


def test_naming_is_per_character_and_the_prompt_shows_the_speakers(sugo, api, setup):
    chat_id = setup["chat"]["id"]
    assert _participant_info(api, chat_id) is None  # nothing set, no block
    update(_ctx(sugo, setup), prefix="Captain", pronouns="she/her", form_of_address="formal")
    update(_ctx(sugo, setup, speaker="brom"), nickname="kid")
    block = _participant_info(api, chat_id)
    assert block["group"] == "above_conversation"
    # Aria speaks first in the chat (the prompt is for the next speaker).
    assert block["text"] == (
        "Aria calls Mara “Captain Mara” (prefix “Captain”).\n"
        "Mara's pronouns: she/her.\n"
        "Mara prefers to be addressed: formal."
    )
    assert "kid" not in block["text"]
    peek = api.get(f"/api/chats/{chat_id}/prompt").json()
    assert "Aria calls Mara “Captain Mara”" in peek["messages"][0]["content"]


def test_time_zone_is_checked_and_kept_once_personas_have_one(sugo, api, setup):
    ctx = _ctx(sugo, setup)
    assert "Time zone: Europe/Lisbon" in update(ctx, time_zone="europe/lisbon").text
    assert "Time zone: Etc/GMT-3" in update(ctx, time_zone="UTC+3").text
    with pytest.raises(ToolError, match="not a whole-hour offset"):
        update(ctx, time_zone="UTC+05:30")
    assert "Mara's time zone: Etc/GMT-3." in _participant_info(api, setup["chat"]["id"])["text"]


def test_a_chat_without_persona_refuses_persona_fields_but_keeps_naming(sugo, api):
    aria = add_character(api, "Aria")
    chat = new_chat(api, [aria["id"]])
    ctx = ToolContext(
        services=sugo.services, chat_id=chat["id"], character_id=aria["id"], persona_id=None, message_id=None,
        now=datetime.now(UTC),
    )  # fmt: skip
    with pytest.raises(ToolError, match="This chat has no persona"):
        update(ctx, nickname="Skipper", pronouns="she/her")
    with sugo.session() as session:
        assert session.exec(select(UserAddress)).all() == []
    assert update(ctx, nickname="Skipper").notice == "Aria now calls you Skipper."
    with sugo.session() as session:
        assert [(r.persona_id, r.nickname) for r in session.exec(select(UserAddress))] == [(None, "Skipper")]
    assert "Aria calls User “Skipper”" in _participant_info(api, chat["id"])["text"]


def test_persona_details_through_the_api_and_the_page_form(sugo, api, setup):
    mara = setup["persona"]["id"]
    body = {
        "name": "Mara",
        "description": "A harbour pilot.",
        "pronouns": "she/her",
        "form_of_address": "informal",
    }
    assert api.put(f"/api/personas/{mara}", json=body).status_code == 200
    # Left out, a detail keeps what is stored; "" clears it.
    kept = api.put(f"/api/personas/{mara}", json={"name": "Mara", "description": "A pilot."}).json()
    assert (kept["pronouns"], kept["form_of_address"]) == ("she/her", "informal")
    refused = api.put(f"/api/personas/{mara}", json={**body, "pronouns": "p" * 61})
    assert refused.status_code == 422 and "at most 60" in refused.text
    cleared = api.put(f"/api/personas/{mara}", json={**body, "pronouns": ""}).json()
    assert cleared["pronouns"] is None

    form = {"name": "Mara", "description": "A pilot.", "pronouns": "xe/xem", "form_of_address": "formal"}
    saved = api.post(f"/personas/{mara}", data=form, headers={"HX-Request": "true"})
    assert saved.status_code == 200 and 'value="xe/xem"' in saved.text
    bad = api.post(
        f"/personas/{mara}", data={**form, "form_of_address": "f" * 70}, headers={"HX-Request": "true"}
    )
    assert (
        bad.status_code == 400 and "Form of address is 70 characters long; at most 60 are kept." in bad.text
    )
    assert api.get(f"/api/personas/{mara}").json()["form_of_address"] == "formal"
    new = api.post("/personas", data={"name": "Edda", "pronouns": "she/her"}, headers={"HX-Request": "true"})
    assert new.status_code == 200
    edda = next(p for p in api.get("/api/personas").json() if p["name"] == "Edda")
    assert edda["pronouns"] == "she/her" and edda["form_of_address"] is None
