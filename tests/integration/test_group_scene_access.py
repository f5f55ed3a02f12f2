"""Who can read a scene in a turn-by-turn group (issue 27, acceptance 1 for Advanced Memory): a
three-character group where Bram leaves for a scene and Aria receives a whisper in it. The scenes are
prepared by the test model server playing the helper (it is told who saw what, and writes the private
part in a condition); then every prompt built for a reply, live and in Peek Prompt, is read: Bram's
never holds the scene he missed — its messages, its recap, its excerpt — nor the whisper; Cleo, the
narrator, gets it all; Aria gets the scene with her private part, but an excerpt never quotes a whisper."""

from __future__ import annotations

import json

from sqlmodel import Session

from app.chats.models import Message
from app.chats.service import new_message, set_message_audience
from app.memory.recall.jobs import embed_chat
from app.memory.scenes.models import Scene
from app.memory.scenes.prompt import store_window_start
from tests.conftest import add_character, add_connection, new_chat, read_sse
from tests.support.waiting import wait_for

COMPASS = "The silver compass points to the drowned bell tower, not north."
WHISPER = "The password at the bell tower is heron."
PRIVATE = "Rowan told Aria the password in a whisper."
SCENE_2 = "Rowan and Aria studied the silver compass alone at the harbour."
# Scene 1: everyone at the tavern. Scene 2: Bram has left; Rowan and Aria, a whisper. Scene 3 (open):
# everyone again, and the question that recalls scene 2.
TAVERN = [
    ("Rowan", "We meet at the Gull tavern to plan the voyage."),
    ("Aria", "*Aria spreads a sea chart on the tavern table.* The voyage starts at dawn."),
    ("Bram", "*Bram pours cider.* I will bring rope for the voyage."),
    ("Cleo", "*Cleo watches the door of the tavern.* The harbour master is late."),
]
HARBOUR = [
    ("Rowan", "Bram has gone home. Aria, look at this silver compass."),
    ("Aria", f"*Aria turns the silver compass in her hands.* {COMPASS}"),
    ("Rowan", WHISPER),
    ("Aria", "*Aria nods and pockets the silver compass.* I will remember it."),
]
TOGETHER = [
    ("Rowan", "Morning, everyone. Bram is back."),
    ("Bram", "*Bram yawns.* Ready when you are."),
]
# Each scene ten messages long, so Memory Recall's five-message memories lie within one scene each.
TAVERN += [
    ("Rowan" if i % 2 else "Cleo", f"More talk of the voyage over cider at the tavern, {i}.")
    for i in range(6)
]
HARBOUR += [
    ("Rowan" if i % 2 else "Aria", f"The silver compass glints by the harbour lamps, {i}.") for i in range(6)
]
TOGETHER += [("Rowan" if i % 2 else "Bram", f"The morning fog lifts over the deck, {i}.") for i in range(8)]


def _fill(sugo, chat_id: int, ids: dict[str, int]) -> dict[str, list[int]]:
    """The three scenes' messages, as a long roleplay's would be stored: Bram does not see scene 2
    (hidden from him), and Rowan's whisper goes to Aria alone."""
    out: dict[str, list[int]] = {}
    members = list(ids.values())
    with Session(sugo.engine) as s:
        for label, lines in (("tavern", TAVERN), ("harbour", HARBOUR), ("together", TOGETHER)):
            out[label] = []
            for name, text in lines:
                user = name == "Rowan"
                msg = new_message(chat_id, "user" if user else "assistant", name, [text])
                msg.character_id = None if user else ids[name]
                if label == "harbour":
                    whisper = text == WHISPER
                    set_message_audience(
                        msg,
                        members,
                        hidden_for=[] if whisper else [ids["Bram"]],
                        whisper_to=ids["Aria"] if whisper else None,
                    )
                s.add(msg)
                s.flush()
                out[label].append(msg.id)
        s.commit()
    return out


def _group(api, models) -> tuple[int, dict[str, int]]:
    add_connection(api, models, context_size=32768)
    ids = {n: add_character(api, n, first_mes="")["id"] for n in ("Aria", "Bram", "Cleo")}
    api.post("/api/personas", json={"name": "Rowan"})
    chat = new_chat(api, list(ids.values()))
    settings = {
        **chat["settings"],
        "reply_order": "list",
        "narrator_id": ids["Cleo"],
        "advanced_memory": True,
        "adv_check_interval": 100,
        "adv_max_scenes": 3,
    }
    r = api.put(f"/api/chats/{chat['id']}/options", json={"settings": settings})
    assert r.status_code == 200, r.text
    return chat["id"], ids


def _prepare(api, models, chat_id: int) -> list[dict]:
    ends = json.dumps({"ends": [{"messageNumber": 10}, {"messageNumber": 20}]})
    tavern = {
        "summary": "Rowan, Aria, Bram and Cleo planned the voyage at the Gull tavern.",
        "participants": ["Rowan", "Aria", "Bram", "Cleo"],
        "timeframe": "the evening",
    }
    harbour = {
        "summary": f'{SCENE_2} {{{{#if character == "Aria"}}}}{PRIVATE}{{{{/if}}}}',
        "participants": ["Rowan", "Aria"],
        "timeframe": "that night",
    }
    models.script(ends, json.dumps(tavern), json.dumps(harbour))
    assert api.post(f"/api/chats/{chat_id}/scenes/prepare").status_code in (200, 201, 202)
    wait_for(
        lambda: api.get(f"/api/chats/{chat_id}/scenes/prepare").json()["status"] != "running",
        timeout=60,
        interval=0.1,
        what="Prepare existing history",
    )
    assert api.get(f"/api/chats/{chat_id}/scenes/prepare").json()["status"] == "done"
    return api.get(f"/api/chats/{chat_id}/scenes").json()


def _recall_from_scene_3(sugo, chat_id: int, placed: dict[str, list[int]]) -> None:
    """The window starts at scene 3 (a stored new start), so the first two scenes are recall's to bring;
    the memories recall finds them by are built."""
    with Session(sugo.engine) as s:
        store_window_start(s, chat_id, placed["together"][0])
        s.commit()
    embed_chat(sugo.services, chat_id)


def _live_prompt(models, name: str) -> str:
    """The reply request written as `name` (the group's nudge names the speaker); the helper's own
    requests after the replies (scene check, summaries) are not a character's prompt."""
    nudge = f"[Write the next reply only as {name}.]"
    found = [
        text
        for req in models.requests
        if nudge in (text := json.dumps(req.json["messages"], ensure_ascii=False))
    ]
    assert len(found) == 1, (name, len(found))
    return found[0]


def _peek(api, chat_id: int, speaker_id: int) -> str:
    r = api.get(f"/api/chats/{chat_id}/prompt", params={"speaker_id": speaker_id})
    assert r.status_code == 200, r.text
    return json.dumps(r.json()["messages"], ensure_ascii=False)


def test_the_absent_character_never_recalls_the_scene_it_missed_nor_the_whisper(api, background_held, models):
    # Held: the model server answers in the order asked, and only Prepare and the replies ask here.
    sugo = background_held
    chat_id, ids = _group(api, models)
    placed = _fill(sugo, chat_id, ids)
    scenes = _prepare(api, models, chat_id)
    assert [(sc["first_number"], sc["last_number"], sc["state"]) for sc in scenes] == [
        (1, 10, "written"),
        (11, 20, "written"),
    ]
    # The helper was told who saw what, and how to keep private parts.
    harbour_request = json.dumps(models.requests[-1].json["messages"], ensure_ascii=False)
    assert "[hidden from Bram]" in harbour_request and "[whispered to Aria]" in harbour_request
    assert "{{#if character ==" in harbour_request
    tavern_request = json.dumps(models.requests[-2].json["messages"], ensure_ascii=False)
    assert "hidden from" not in tavern_request
    with Session(sugo.engine) as s:
        harbour = s.get(Scene, scenes[1]["id"])
        assert harbour is not None and harbour.participants == ["Aria"] and harbour.private_key
    _recall_from_scene_3(sugo, chat_id, placed)

    # The question is posted, and each member's Peek Prompt read, before the group answers it (a Peek
    # after a member's own reply recalls with that reply as its query: nothing the user asked).
    question = "Where does the silver compass point, and what of the tavern?"
    assert api.post(f"/api/chats/{chat_id}/messages", json={"content": question}).status_code == 201
    peeks = {name: _peek(api, chat_id, ids[name]) for name in ("Aria", "Bram", "Cleo")}
    models.requests.clear()
    models.script("Aria answers.", "Bram answers.", "Cleo answers.")
    r = api.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": ""})
    assert r.status_code == 200, r.text
    read_sse(r)
    live = {name: _live_prompt(models, name) for name in ("Aria", "Bram", "Cleo")}
    for prompts in (live, peeks):
        # Bram: the tavern scene, never the harbour — its messages, recap, excerpt — nor the whisper.
        bram = prompts["Bram"]
        assert "Recalled Scenes" in bram and "Gull tavern" in bram
        for secret in (COMPASS, WHISPER, PRIVATE, SCENE_2, "password", "heron"):
            assert secret not in bram, secret
        # Cleo, the narrator: the harbour with its private part; an excerpt never quotes the whisper.
        cleo = prompts["Cleo"]
        assert SCENE_2 in cleo and PRIVATE in cleo and COMPASS in cleo
        # Aria: her own private part, and the compass; the whisper is never in an excerpt.
        aria = prompts["Aria"]
        assert SCENE_2 in aria and PRIVATE in aria and COMPASS in aria
        for name in ("Aria", "Cleo"):
            assert WHISPER not in prompts[name], name
    assert "{{#if" not in live["Aria"] + live["Bram"] + live["Cleo"]


def test_a_change_of_who_saw_what_keeps_the_old_recap_from_partial_readers(api, background_held, models):
    # Held: the model server answers in the order asked, and only Prepare and the replies ask here.
    sugo = background_held
    chat_id, ids = _group(api, models)
    placed = _fill(sugo, chat_id, ids)
    _prepare(api, models, chat_id)
    _recall_from_scene_3(sugo, chat_id, placed)
    api.post(f"/api/chats/{chat_id}/messages", json={"content": "What of the tavern and the voyage?"})
    assert "Gull tavern" in _peek(api, chat_id, ids["Aria"])
    # Aria is no longer to know what Bram said at the tavern: the recap was written when she saw it all,
    # so it is not recalled for her until it is written again; Bram, who still sees it all, recalls it.
    bram_line = placed["tavern"][2]
    r = api.patch(f"/api/chats/{chat_id}/messages/{bram_line}", json={"hidden_for": [ids["Aria"]]})
    assert r.status_code == 200, r.text
    assert "Gull tavern" not in _peek(api, chat_id, ids["Aria"])
    assert "Gull tavern" in _peek(api, chat_id, ids["Bram"])
    # The recap reads as changed (Fix and the rewrite job write it again, now told who saw what).
    problems = api.get(f"/api/chats/{chat_id}/scenes/problems").json()
    assert any(p["kind"] == "changed" for p in problems["problems"]), problems
    # Saving the recap by hand, after reading it, makes it hers to recall again.
    scene_id = api.get(f"/api/chats/{chat_id}/scenes").json()[0]["id"]
    r = api.patch(
        f"/api/chats/{chat_id}/scenes/{scene_id}",
        json={"summary": "Rowan, Aria, Bram and Cleo planned the voyage at the Gull tavern."},
    )
    assert r.status_code == 200, r.text
    assert "Gull tavern" in _peek(api, chat_id, ids["Aria"])
    with Session(sugo.engine) as s:
        assert s.get(Message, bram_line).hidden_for == [ids["Aria"]]


def test_a_merged_reply_recalls_what_one_member_remembers_marked_known_only_to(api, background_held, models):
    # Held: the model server answers in the order asked, and only Prepare and the replies ask here.
    sugo = background_held
    chat_id, ids = _group(api, models)
    r = api.put(
        f"/api/chats/{chat_id}/options",
        json={
            "settings": {
                **api.get(f"/api/chats/{chat_id}").json()["settings"],
                "group_merged": True,
                "narrator_id": None,
            }
        },
    )
    assert r.status_code == 200, r.text
    placed = _fill(sugo, chat_id, ids)
    _prepare(api, models, chat_id)
    _recall_from_scene_3(sugo, chat_id, placed)
    models.requests.clear()
    models.script('<speaker="Aria">The compass.</speaker>')
    r = api.post(
        f"/api/chats/{chat_id}/generate",
        json={"action": "send", "content": "Where does the silver compass point, and what of the tavern?"},
    )
    assert r.status_code == 200, r.text
    read_sse(r)
    live = json.dumps(models.requests[0].json["messages"], ensure_ascii=False)
    peek = json.dumps(api.get(f"/api/chats/{chat_id}/prompt").json()["messages"], ensure_ascii=False)
    for prompt in (live, peek):
        # Scene 2 only Aria remembers: recalled for the group, marked; its private part too.
        assert "known only to Aria" in prompt and SCENE_2 in prompt and PRIVATE in prompt
        assert "Gull tavern" in prompt  # the tavern scene, every member remembers: unmarked
        # The whisper was before the window, and an excerpt never quotes one.
        assert WHISPER not in prompt
    tavern_heading = next(line for line in peek.split("\\n") if line.startswith("### Scene 1"))
    assert "known only" not in tavern_heading


def test_a_renamed_character_keeps_the_scenes_it_took_part_in(api, background_held, models):
    # Held: the model server answers in the order asked, and only Prepare asks here.
    sugo = background_held
    chat_id, ids = _group(api, models)
    placed = _fill(sugo, chat_id, ids)
    _prepare(api, models, chat_id)
    _recall_from_scene_3(sugo, chat_id, placed)
    api.post(f"/api/chats/{chat_id}/messages", json={"content": "Where does the silver compass point?"})
    assert SCENE_2 in _peek(api, chat_id, ids["Aria"])
    card = api.get(f"/api/characters/{ids['Aria']}").json()
    r = api.put(f"/api/characters/{ids['Aria']}", json={**card, "name": "Arianne"})
    assert r.status_code == 200, r.text
    # The harbour scene named her, and its private part was hers: both follow the new name.
    aria = _peek(api, chat_id, ids["Aria"])
    assert SCENE_2 in aria and PRIVATE in aria
    assert PRIVATE not in _peek(api, chat_id, ids["Bram"])
    harbour = api.get(f"/api/chats/{chat_id}/scenes").json()[1]
    assert harbour["participants"] == ["Arianne"] and 'character == "Arianne"' in harbour["summary"]


def test_fix_asks_again_about_a_group_scene_saved_before_the_participant_check(api, background_held, models):
    # Held: the model server answers in the order asked, and only Prepare and Fix ask here.
    sugo = background_held
    chat_id, ids = _group(api, models)
    placed = _fill(sugo, chat_id, ids)
    scenes = _prepare(api, models, chat_id)
    assert api.get(f"/api/chats/{chat_id}/scenes/problems").json()["count"] == 0
    # The tavern scene as an older Sugo stored it: the helper's names unchecked, here none at all, so
    # no member recalls it.
    with Session(sugo.engine) as s:
        tavern = s.get(Scene, scenes[0]["id"])
        tavern.participants, tavern.participants_checked = [], False
        s.add(tavern)
        s.commit()
    _recall_from_scene_3(sugo, chat_id, placed)
    api.post(f"/api/chats/{chat_id}/messages", json={"content": "What of the tavern and the voyage?"})
    assert "Gull tavern" not in _peek(api, chat_id, ids["Bram"])
    problems = api.get(f"/api/chats/{chat_id}/scenes/problems").json()
    assert [(p["scene_id"], p["kind"], p["review"]) for p in problems["problems"]] == [
        (scenes[0]["id"], "unchecked", False)
    ]
    tavern = {
        "summary": "Rowan, Aria, Bram and Cleo planned the voyage at the Gull tavern.",
        "participants": ["Rowan", "Aria", "Bram", "Cleo"],
    }
    models.script(json.dumps(tavern))
    assert api.post(f"/api/chats/{chat_id}/scenes/fix").status_code == 202
    wait_for(
        lambda: (
            (run := api.get(f"/api/chats/{chat_id}/scenes/problems").json()["run"])
            and run["status"] != "running"
        ),
        what="Fix to end",
    )
    assert api.get(f"/api/chats/{chat_id}/scenes/problems").json()["count"] == 0
    with Session(sugo.engine) as s:
        fixed = s.get(Scene, scenes[0]["id"])
        assert fixed.participants_checked and sorted(fixed.participants) == ["Aria", "Bram", "Cleo"]
    assert "Gull tavern" in _peek(api, chat_id, ids["Bram"])
