"""Game Mode chats (issue 27, acceptance 4): the Game Master answers every message and reads all the
memories; the game's secrets reach its prompt alone, never a party member's; and with Advanced Memory
the recaps and recalled scenes go after the history, so everything above them is byte-identical between
two turns of the same scene (a provider's prompt cache reuses it). Real Sugo, real HTTP, the test model
server playing the model and the helper."""

from __future__ import annotations

import json

from sqlmodel import Session

from app.chats.service import new_message
from app.memory.recall.jobs import embed_chat
from app.memory.scenes.prompt import store_window_start
from app.memory.scenes.writer import write_waiting_recaps
from app.prompt.core.builder import GAME_MASTER_TURN
from tests.conftest import add_character, add_connection, new_chat, read_sse
from tests.support.waiting import wait_for

SECRET = "The keeper of the Sunken Keep is the lich the party hunts."
MOAT = [
    ("Rowan", "We reach the moat of the Sunken Keep at dusk."),
    ("Keeper", "*Black water laps at the stones.* A rotten drawbridge hangs over the moat."),
    ("Rowan", "Bram, can you test the drawbridge?"),
    ("Bram", "*Bram stamps on the first plank.* It holds. Barely."),
] + [("Rowan" if i % 2 else "Keeper", f"The party crosses the moat plank by plank, {i}.") for i in range(6)]
HALL = [
    ("Rowan", "Inside, we light a torch in the great hall."),
    ("Keeper", "*Banners of a fallen house hang in tatters.* A stair leads down."),
] + [("Rowan" if i % 2 else "Keeper", f"Dust swirls in the torchlight of the hall, {i}.") for i in range(8)]
CRYPT = [
    ("Rowan", "We take the stair down into the crypt."),
    ("Keeper", "*The air turns cold.* Rows of stone coffins line the walls."),
]


def _game(api, models, **settings) -> tuple[dict, dict[str, int]]:
    add_connection(api, models, context_size=32768)
    api.post("/api/personas", json={"name": "Rowan"})
    keeper = add_character(
        api, "Keeper", description="{{char}} runs a grim dungeon.", first_mes="The gate is shut."
    )
    bram = add_character(api, "Bram", description="A sellsword.", first_mes="Bram grunts.")
    chat = new_chat(api, [keeper["id"], bram["id"]], mode="game")
    if settings:
        r = api.put(f"/api/chats/{chat['id']}/options", json={"settings": {**chat["settings"], **settings}})
        assert r.status_code == 200, r.text
        chat = r.json()
    return chat, {"Keeper": keeper["id"], "Bram": bram["id"]}


def _fill(sugo, chat_id: int, ids: dict[str, int]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    with Session(sugo.engine) as s:
        for label, lines in (("moat", MOAT), ("hall", HALL), ("crypt", CRYPT)):
            out[label] = []
            for name, text in lines:
                user = name == "Rowan"
                msg = new_message(chat_id, "user" if user else "assistant", name, [text])
                msg.character_id = None if user else ids[name]
                s.add(msg)
                s.flush()
                out[label].append(msg.id)
        s.commit()
    return out


def _gm_requests(models) -> list[list[dict]]:
    """The messages of each request written as the Game Master (its turn instructions end them)."""
    turn = GAME_MASTER_TURN.replace("{{user}}", "Rowan")
    return [req.json["messages"] for req in models.requests if turn in json.dumps(req.json["messages"])]


def test_a_game_chat_starts_with_its_game_master_who_answers_every_message(api, background_held, models):
    chat, ids = _game(api, models)
    assert chat["mode"] == "game" and chat["narrator_id"] == ids["Keeper"]
    messages = api.get(f"/api/chats/{chat['id']}/messages").json()
    assert [m["name"] for m in messages] == ["Keeper"]  # only the Game Master opens the game
    # Bram is named: in a Roleplay group he would answer first. In a game the Game Master answers.
    models.script("The Keeper narrates.")
    r = api.post(f"/api/chats/{chat['id']}/generate", json={"action": "send", "content": "Bram, the door!"})
    assert r.status_code == 200, r.text
    read_sse(r)
    names = [m["name"] for m in api.get(f"/api/chats/{chat['id']}/messages").json()]
    assert names == ["Keeper", "Rowan", "Keeper"]
    sent = json.dumps(models.requests[-1].json["messages"])
    assert "the Game Master of a text adventure Rowan plays" in sent
    # A party member speaks when asked, in a prompt of its own: the roleplay one, the group's nudge.
    models.script("Bram shrugs.")
    r = api.post(
        f"/api/chats/{chat['id']}/generate", json={"action": "send", "content": "", "speaker_id": ids["Bram"]}
    )
    assert r.status_code == 200, r.text
    read_sse(r)
    sent = json.dumps(models.requests[-1].json["messages"])
    assert "[Write the next reply only as Bram.]" in sent and "Game Master of a text adventure" not in sent


def test_the_secrets_reach_the_game_master_alone(api, background_held, models):
    chat, ids = _game(api, models, game_secrets=SECRET)
    cid = chat["id"]

    def peek(speaker: str) -> str:
        r = api.get(f"/api/chats/{cid}/prompt", params={"speaker_id": ids[speaker]})
        assert r.status_code == 200, r.text
        return json.dumps(r.json()["messages"])

    assert SECRET in peek("Keeper") and SECRET not in peek("Bram")
    assert SECRET in json.dumps(api.get(f"/api/chats/{cid}/prompt").json()["messages"])  # the default: the GM
    models.script("The Keeper narrates.", "Bram shrugs.")
    for body in ({"content": "We knock."}, {"content": "", "speaker_id": ids["Bram"]}):
        r = api.post(f"/api/chats/{cid}/generate", json={"action": "send", **body})
        assert r.status_code == 200, r.text
        read_sse(r)
    keeper, bram = (json.dumps(req.json["messages"]) for req in models.requests[-2:])
    assert SECRET in keeper and SECRET not in bram
    # Past the limit: a clear error, and the stored secrets stay as they were.
    r = api.put(
        f"/api/chats/{cid}/options",
        json={"settings": {**api.get(f"/api/chats/{cid}").json()["settings"], "game_secrets": "x" * 20_001}},
    )
    assert r.status_code == 422 and "game_secrets" in r.text
    assert api.get(f"/api/chats/{cid}").json()["settings"]["game_secrets"] == SECRET


def _prepared_session(api, models, sugo, **settings) -> tuple[int, dict[str, int], dict[str, list[int]]]:
    """A game with Advanced Memory whose first session has two written scenes (the moat, the hall) and
    the crypt still open."""
    chat, ids = _game(api, models, advanced_memory=True, adv_check_interval=100, adv_max_scenes=3, **settings)
    cid = chat["id"]
    placed = _fill(sugo, cid, ids)
    ends = json.dumps({"ends": [{"messageNumber": 11}, {"messageNumber": 21}]})
    moat = {
        "summary": "The party crossed the rotten drawbridge over the moat.",
        "participants": ["Rowan", "Keeper", "Bram"],
    }
    hall = {
        "summary": 'The party found tattered banners in the great hall. {{#if character == "Keeper"}}'
        "The banners hide the lich's sigil.{{/if}}",
        "participants": ["Rowan", "Keeper"],
    }
    models.script(ends, json.dumps(moat), json.dumps(hall))
    assert api.post(f"/api/chats/{cid}/scenes/prepare").status_code in (200, 201, 202)
    wait_for(
        lambda: api.get(f"/api/chats/{cid}/scenes/prepare").json()["status"] != "running",
        timeout=60,
        interval=0.1,
        what="Prepare existing history",
    )
    scenes = api.get(f"/api/chats/{cid}/scenes").json()
    assert [sc["state"] for sc in scenes] == ["written", "written"], [sc.get("reason") for sc in scenes]
    return cid, ids, placed


def test_the_prefix_above_the_recaps_is_byte_identical_between_two_turns_of_a_scene(
    api, background_held, models
):
    sugo = background_held
    cid, ids, placed = _prepared_session(api, models, sugo, game_secrets=SECRET)
    with Session(sugo.engine) as s:  # the current scene, the crypt, is the history
        store_window_start(s, cid, placed["crypt"][0])
        s.commit()
    embed_chat(sugo.services, cid)  # recall finds scenes through their messages' memories

    models.requests.clear()
    models.script("*A coffin lid shifts.*", "*Something stirs in the dark.*")
    for text in ("Did the drawbridge over the moat hold, Keeper?", "We open the largest coffin by the moat."):
        r = api.post(f"/api/chats/{cid}/generate", json={"action": "send", "content": text})
        assert r.status_code == 200, r.text
        read_sse(r)
    first, second = _gm_requests(models)
    # The recaps came after the history: the first request's messages above them are, byte for byte,
    # the start of the second request's.
    recap_at = next(i for i, m in enumerate(first) if "rotten drawbridge" in m["content"])
    assert recap_at > 1 and "Did the drawbridge over the moat hold" in first[recap_at - 1]["content"]
    assert json.dumps(second[:recap_at]) == json.dumps(first[:recap_at])
    assert "We open the largest coffin" in second[recap_at + 1]["content"]
    assert any("rotten drawbridge" in m["content"] for m in second[recap_at + 2 :])
    # The system part holds the secrets and no recap; the turn instructions come last but one.
    assert SECRET in first[0]["content"] and "rotten drawbridge" not in first[0]["content"]
    assert GAME_MASTER_TURN.replace("{{user}}", "Rowan") in first[-1]["content"]
    # Peek Prompt shows the same order, and says where the recaps went.
    peek = api.get(f"/chats/{cid}/prompt")
    assert peek.status_code == 200 and "After the history" in peek.text
    grid = api.get(f"/chats/{cid}/context")
    assert grid.status_code == 200 and "After the history" in grid.text


def test_a_new_session_keeps_the_game_and_its_game_master_reads_the_earlier_recaps(
    api, background_held, models
):
    sugo = background_held
    first, ids, placed = _prepared_session(api, models, sugo, game_secrets=SECRET)
    api.put(f"/api/chats/{first}/members/{ids['Bram']}", json={"muted": True})
    r = api.post(f"/api/chats/{first}/sessions")
    assert r.status_code == 201, r.text
    second = r.json()
    assert second["mode"] == "game" and second["game_root_id"] == first
    assert second["name"].endswith(" – Session 2") and second["narrator_id"] == ids["Keeper"]
    old = api.get(f"/api/chats/{first}").json()
    assert second["settings"] == old["settings"]  # the secrets and Advanced Memory among them
    assert [(m["name"], m["muted"]) for m in second["members"]] == [("Keeper", False), ("Bram", True)]
    assert api.get(f"/api/chats/{second['id']}/messages").json() == []  # an archive of its own
    # The first session's open scene, the crypt, was closed; its recap is written in the background.
    scenes = api.get(f"/api/chats/{first}/scenes").json()
    assert [(sc["state"], sc["last_number"]) for sc in scenes][-1] == ("waiting", 23)
    models.script(json.dumps({"summary": "Below the hall the party entered a crypt of stone coffins."}))
    write_waiting_recaps(sugo.services, first)
    assert api.get(f"/api/chats/{first}/scenes").json()[-1]["state"] == "written"

    def peek(speaker: str) -> str:
        r = api.get(f"/api/chats/{second['id']}/prompt", params={"speaker_id": ids[speaker]})
        assert r.status_code == 200, r.text
        return r.json()["messages"][0]["content"]  # the system part: the cached prefix

    keeper = peek("Keeper")
    assert "## Earlier sessions" in keeper and "### Session 1" in keeper
    for recap in ("rotten drawbridge", "tattered banners", "the lich's sigil", "crypt of stone coffins"):
        assert recap in keeper, recap
    assert (
        keeper.index("rotten drawbridge") < keeper.index("tattered banners") < keeper.index("crypt of stone")
    )
    bram = peek("Bram")
    assert "Earlier sessions" not in bram and "drawbridge" not in bram and SECRET not in bram
    # Live, the Game Master's first turn of the new session reads them in its system part.
    models.requests.clear()
    models.script("*The Keeper recalls the crypt.*")
    r = api.post(f"/api/chats/{second['id']}/generate", json={"action": "send", "content": "We rest, then?"})
    assert r.status_code == 200, r.text
    read_sse(r)
    assert "crypt of stone coffins" in models.requests[0].json["messages"][0]["content"]
    # A third session is the same game's: session 2 had no scene yet, session 1's recaps still come.
    third = api.post(f"/api/chats/{second['id']}/sessions").json()
    assert third["game_root_id"] == first and third["name"].endswith(" – Session 3")
    assert "### Session 1" in api.get(f"/api/chats/{third['id']}/prompt").json()["messages"][0]["content"]


def test_only_a_game_has_sessions(api, models):
    add_connection(api, models)
    chat = new_chat(api, [add_character(api)["id"]])
    r = api.post(f"/api/chats/{chat['id']}/sessions")
    assert r.status_code == 400 and "Only a Game chat has sessions" in r.text
    assert len(api.get("/api/chats").json()) == 1
