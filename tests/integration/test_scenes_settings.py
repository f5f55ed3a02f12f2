"""Chat Settings → Advanced Memory Recall over HTTP (issue 14): every field's limits refused with a
sentence naming it and nothing saved, the rules between fields, a form without the section keeping the
stored values, the section only in Roleplay chats, and the Prepare panel's fragments."""

from __future__ import annotations

import pytest

from app.memory.scenes.models import SceneRun
from tests.conftest import add_character, add_connection, new_chat

GOOD = {
    "name": "Road",
    "advanced_memory_shown": "1",
    "advanced_memory": "true",
    "adv_max_context": "32000",
    "adv_budget": "4000",
    "adv_max_scenes": "4",
    "adv_excerpt_min": "2",
    "adv_excerpt_max": "6",
    "adv_check_interval": "7",
    "adv_helper_connection_id": "",
}


def _chat(api, models, **fields) -> int:
    add_connection(api, models, name="Helper conn", model="test-model")
    return new_chat(api, [add_character(api)["id"]], **fields)["id"]


def _settings(api, chat_id: int) -> dict:
    return api.get(f"/api/chats/{chat_id}").json()["settings"]


@pytest.mark.parametrize(
    ("field", "value", "sentence"),
    [
        (
            "adv_max_context",
            "1023",
            "Maximum allowed context before compression: “1023” is not a whole number of tokens from 1,024 to 10,000,000.",
        ),
        ("adv_max_context", "10000001", "from 1,024 to 10,000,000"),
        ("adv_max_context", "", "Maximum allowed context before compression: Empty is not a whole number"),
        (
            "adv_budget",
            "63",
            "Summary and recall budget: “63” is not a whole number of tokens from 64 to 131,072.",
        ),
        ("adv_budget", "131073", "from 64 to 131,072"),
        ("adv_budget", "1e3", "Summary and recall budget: “1e3”"),
        (
            "adv_max_scenes",
            "51",
            "Maximum recalled scenes: “51” is not a whole number of scenes from 0 to 50.",
        ),
        ("adv_max_scenes", "-1", "Maximum recalled scenes: “-1”"),
        (
            "adv_excerpt_min",
            "51",
            "Moving context minimum: “51” is not a whole number of messages from 0 to 50.",
        ),
        ("adv_excerpt_max", "2.5", "Moving context maximum: “2.5”"),
        (
            "adv_check_interval",
            "0",
            "Standalone scene check interval: “0” is not a whole number of messages from 1 to 100.",
        ),
        ("adv_check_interval", "101", "from 1 to 100"),
        ("adv_check_interval", "9" * 40, "Standalone scene check interval: “999999999999…”"),
        (
            "adv_budget",
            "40000",
            "Summary and recall budget: 40,000 tokens is more than the Maximum allowed context before compression (32,000).",
        ),
        (
            "adv_excerpt_min",
            "7",
            "Moving context: the minimum (7) is more than the maximum (6) messages per excerpt.",
        ),
        (
            "adv_helper_connection_id",
            "999",
            "Helper model: that connection no longer exists; choose another.",
        ),
        ("adv_helper_connection_id", "x", "Helper model: that connection no longer exists"),
    ],
)
def test_a_bad_value_is_refused_with_a_sentence_naming_its_field_and_nothing_is_saved(
    api, models, field, value, sentence
):
    chat_id = _chat(api, models)
    before = _settings(api, chat_id)
    r = api.post(f"/chats/{chat_id}/settings", data={**GOOD, field: value})
    assert r.status_code == 400 and sentence in r.json()["detail"], r.text
    assert _settings(api, chat_id) == before


def test_good_values_are_saved_and_a_form_without_the_section_keeps_them(api, models):
    chat_id = _chat(api, models)
    r = api.post(
        f"/chats/{chat_id}/settings", data={**GOOD, "adv_helper_connection_id": "1", "adv_budget": "32000"}
    )
    assert r.status_code == 200, r.text
    saved = _settings(api, chat_id)
    assert saved["advanced_memory"] is True and saved["adv_helper_connection_id"] == 1
    assert [
        saved[k]
        for k in (
            "adv_max_context",
            "adv_budget",
            "adv_max_scenes",
            "adv_excerpt_min",
            "adv_excerpt_max",
            "adv_check_interval",
        )
    ] == [32000, 32000, 4, 2, 6, 7]
    # The limits themselves are accepted: 0 and 0 (summaries without excerpts), 0 scenes, the extremes.
    edge = {
        **GOOD,
        "adv_max_context": "10000000",
        "adv_budget": "131072",
        "adv_max_scenes": "0",
        "adv_excerpt_min": "0",
        "adv_excerpt_max": "0",
        "adv_check_interval": "100",
    }
    assert api.post(f"/chats/{chat_id}/settings", data=edge).status_code == 200
    assert _settings(api, chat_id)["adv_excerpt_max"] == 0 and _settings(api, chat_id)["adv_budget"] == 131072
    # A form without the section (an older page) changes nothing of Advanced Memory.
    kept = _settings(api, chat_id)
    assert (
        api.post(f"/chats/{chat_id}/settings", data={"name": "Road", "temperature": "0.5"}).status_code == 200
    )
    after = _settings(api, chat_id)
    assert {k: v for k, v in after.items() if k.startswith("adv")} == {
        k: v for k, v in kept.items() if k.startswith("adv")
    }
    # Unchecked switch: off, the values stay.
    assert (
        api.post(
            f"/chats/{chat_id}/settings", data={k: v for k, v in edge.items() if k != "advanced_memory"}
        ).status_code
        == 200
    )
    assert (
        _settings(api, chat_id)["advanced_memory"] is False
        and _settings(api, chat_id)["adv_budget"] == 131072
    )


def test_the_section_is_only_in_roleplay_chats(api, models):
    chat_id = _chat(api, models)
    page = api.get(f"/chats/{chat_id}/settings").text
    assert 'id="advanced-memory"' in page and 'name="advanced_memory_shown"' in page
    assert f'href="/chats/{chat_id}/scenes"' in page
    talk = new_chat(api, [add_character(api, "Bran")["id"]], mode="conversation")["id"]
    assert 'id="advanced-memory"' not in api.get(f"/chats/{talk}/settings").text


def test_the_prepare_panel_fragments(api, models):
    chat_id = _chat(api, models)
    panel = api.get(f"/chats/{chat_id}/scenes/prepare", headers={"HX-Request": "true"})
    assert panel.status_code == 200 and "<html" not in panel.text
    assert 'id="scenes-prepare-start"' in panel.text and "disabled" in panel.text  # Advanced Memory is off
    assert "Helper model: <strong>Helper conn</strong> · test-model." in panel.text
    # Refusals come back as a sentence (a toast for HTMX).
    r = api.post(f"/chats/{chat_id}/scenes/prepare", headers={"HX-Request": "true"})
    assert r.status_code == 400 and "Turn on Advanced Memory Recall" in r.text
    # The panel's Cancel with nothing running (it landed just after the run ended) answers the panel as it
    # is, with no error of its own (issue 21); over JSON, stopping what does not run is still refused.
    r = api.post(f"/chats/{chat_id}/scenes/prepare/cancel", headers={"HX-Request": "true"})
    assert r.status_code == 200 and 'id="scenes-prepare"' in r.text and "not running" not in r.text
    r = api.post(f"/api/chats/{chat_id}/scenes/prepare/stop")
    assert r.status_code == 400 and "not running" in r.text
    assert api.get("/chats/999999/scenes/prepare", headers={"HX-Request": "true"}).status_code == 404


def test_a_run_a_restart_cut_short_offers_resume_and_cancel_ends_it(sugo, api, models):
    chat_id = _chat(api, models)
    assert (
        api.put(f"/api/chats/{chat_id}/options", json={"settings": {"advanced_memory": True}}).status_code
        == 200
    )
    with sugo.session() as s:  # left "running" by a restart: no thread works it
        s.add(
            SceneRun(
                chat_id=chat_id,
                status="running",
                stage="recapping",
                total=4,
                done=1,
                current="Writing recap 2 of 4",
            )
        )
        s.commit()
    panel = api.get(f"/chats/{chat_id}/scenes/prepare", headers={"HX-Request": "true"}).text
    assert 'hx-trigger="every 1s"' in panel and "Writing recap 2 of 4" in panel
    assert "a restart cut it short" in panel and 'id="scenes-prepare-resume"' in panel
    assert '<progress max="4" value="1"' in panel
    cancelled = api.post(f"/chats/{chat_id}/scenes/prepare/cancel", headers={"HX-Request": "true"})
    assert cancelled.status_code == 200 and 'id="scenes-prepare-stopped"' in cancelled.text
    assert "every 1s" not in cancelled.text  # nothing left to poll


def test_a_chat_without_messages_says_what_comes_next(api, models):
    add_connection(api, models, name="Helper conn", model="test-model")
    chat_id = new_chat(api, [add_character(api, "Quiet", first_mes="")["id"]])["id"]
    page = api.get(f"/chats/{chat_id}/settings").text
    assert 'id="scenes-prepare-empty"' in page and 'id="scenes-prepare-start"' not in page
