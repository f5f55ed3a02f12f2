"""A recalled scene in a merged group chat, in the browser (issue 27, acceptance 5): the scene only Aria
took part in is recalled for the group's reply and Peek Prompt shows it marked "known only to Aria".
Desktop and phone."""

import json

from playwright.sync_api import Page, expect
from sqlmodel import Session

from app.memory.recall.jobs import embed_chat
from app.memory.scenes.prompt import store_window_start
from tests.integration.test_group_scene_access import SCENE_2, _fill, _prepare


def test_read_a_recalled_scene_marked_known_only_to_in_a_merged_chat(page: Page, live, models, shot):
    with live.client() as c:
        c.post(
            "/api/connections",
            json={"name": "T", "base_url": models.base_url, "model": "test-model", "context_size": 32768},
        )
        c.post("/api/personas", json={"name": "Rowan"})
        ids = {
            n: c.post("/api/characters", json={"name": n, "first_mes": ""}).json()["id"]
            for n in ("Aria", "Bram", "Cleo")
        }
        chat = c.post("/api/chats", json={"character_ids": list(ids.values())}).json()
        settings = {
            **chat["settings"],
            "group_merged": True,
            "advanced_memory": True,
            "adv_check_interval": 100,
        }
        assert c.put(f"/api/chats/{chat['id']}/options", json={"settings": settings}).status_code == 200
        placed = _fill(live, chat["id"], ids)
        _prepare(c, models, chat["id"])
        with Session(live.engine) as s:
            store_window_start(s, chat["id"], placed["together"][0])
            s.commit()
        embed_chat(live.services, chat["id"])
        c.post(f"/api/chats/{chat['id']}/messages", json={"content": "Where does the silver compass point?"})
    page.goto(f"{live.url}/chats/{chat['id']}")
    page.click("#peek-button")
    block = page.locator("#peek-dialog .prompt-block[data-block='recalled_scenes']")
    expect(block).to_contain_text("known only to Aria")
    expect(block).to_contain_text(SCENE_2)
    block.get_by_text("known only to Aria").first.scroll_into_view_if_needed()
    expect(block.get_by_text("known only to Aria").first).to_be_in_viewport()
    shot("merged-known-only-to")


def test_turn_on_decide_who_sees_new_messages_in_a_group(page: Page, live, models, shot):
    with live.client() as c:
        c.post("/api/connections", json={"name": "T", "base_url": models.base_url, "model": "test-model"})
        ids = [
            c.post("/api/characters", json={"name": n, "first_mes": ""}).json()["id"]
            for n in ("Aria", "Bram")
        ]
        group = c.post("/api/chats", json={"character_ids": ids}).json()
        one = c.post("/api/chats", json={"character_ids": ids[:1]}).json()
    # A chat of one character has no such option.
    page.goto(f"{live.url}/chats/{one['id']}/settings")
    expect(page.locator("#advanced-memory")).to_be_visible()
    expect(page.locator("#adv-decide-visibility")).to_have_count(0)
    page.goto(f"{live.url}/chats/{group['id']}/settings")
    box = page.locator("#adv-decide-visibility")
    box.scroll_into_view_if_needed()
    expect(box).not_to_be_checked()
    expect(page.locator("#adv-decide-visibility-note")).to_contain_text("never changed")
    page.locator("#advanced-memory-on").check()
    box.check()
    shot("decide-who-sees-option")
    page.locator("#chat-settings-form").get_by_role("button", name="Save settings").click()
    saved = page.locator("#chat-settings-form .notice-ok")
    expect(saved).to_be_visible()
    expect(saved).to_be_in_viewport()
    shot("decide-who-sees")
    with live.client() as c:
        settings = c.get(f"/api/chats/{group['id']}").json()["settings"]
    assert settings["adv_decide_visibility"] is True and settings["advanced_memory"] is True
    page.reload()
    expect(page.locator("#adv-decide-visibility")).to_be_checked()


def test_turn_on_recollections_and_read_one_in_access_memories(page: Page, live, models, shot):
    from tests.integration.test_group_recollections import ARIA_HARBOUR, ARIA_TAVERN  # noqa: PLC0415
    from tests.support.waiting import wait_for  # noqa: PLC0415

    with live.client() as c:
        c.post(
            "/api/connections",
            json={"name": "T", "base_url": models.base_url, "model": "test-model", "context_size": 32768},
        )
        c.post("/api/personas", json={"name": "Rowan"})
        ids = {
            n: c.post("/api/characters", json={"name": n, "first_mes": ""}).json()["id"]
            for n in ("Aria", "Bram", "Cleo")
        }
        chat = c.post("/api/chats", json={"character_ids": list(ids.values())}).json()
        settings = {
            **chat["settings"],
            "narrator_id": ids["Cleo"],
            "advanced_memory": True,
            "adv_check_interval": 100,
        }
        assert c.put(f"/api/chats/{chat['id']}/options", json={"settings": settings}).status_code == 200
        _fill(live, chat["id"], ids)
        _prepare(c, models, chat["id"])
    page.goto(f"{live.url}/chats/{chat['id']}/settings")
    box = page.locator("#adv-recollections")
    box.scroll_into_view_if_needed()
    expect(box).not_to_be_checked()
    models.script(
        json.dumps({"recollection": ARIA_HARBOUR}),
        json.dumps({"recollection": ARIA_TAVERN}),
        json.dumps({"recollection": "I poured cider and promised rope for the voyage."}),
    )
    box.check()
    page.locator("#chat-settings-form").get_by_role("button", name="Save settings").click()
    expect(page.locator("#chat-settings-form .notice-ok")).to_be_visible()
    with live.client() as c:
        wait_for(
            lambda: "written for all" in c.get(f"/chats/{chat['id']}/settings").text,
            timeout=30,
            what="the recollections",
        )
    page.reload()
    progress = page.locator("#adv-recollections-progress")
    progress.scroll_into_view_if_needed()
    expect(progress).to_have_text("Character recollections are written for all 2 scenes")
    page.goto(f"{live.url}/chats/{chat['id']}/scenes")
    harbour = page.locator(".scene-card").nth(1)
    mine = harbour.locator(".recollection").filter(has_text="Aria")
    expect(mine.locator(".recollection-text")).to_have_text(ARIA_HARBOUR)
    mine.scroll_into_view_if_needed()
    shot("recollection")
    mine.get_by_role("button", name="Edit").click()
    form = page.locator(".scene-card").nth(1).locator(".recollection-edit")
    form.locator("textarea").fill("The compass hums when it points at the bell tower.")
    form.get_by_role("button", name="Save recollection").click()
    edited = page.locator(".scene-card").nth(1).locator(".recollection").filter(has_text="Aria")
    expect(edited.locator(".recollection-text")).to_have_text(
        "The compass hums when it points at the bell tower."
    )
    expect(edited.get_by_text("Manually edited")).to_be_in_viewport()
    shot("recollection-edited")


def test_the_advanced_memory_activity_view_and_the_decision_model_setting(page: Page, live, models, shot):
    from tests.integration.test_decision_recall import _chat  # noqa: PLC0415

    with live.client() as c:
        chat_id, _ = _chat(c, live, models)
        models.script(
            json.dumps({"relevant": [3]}), json.dumps({"scores": {"18": 9}}), "Mirela remembers the ferry."
        )
        r = c.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": "The brass key?"})
        assert r.status_code == 200
    page.goto(f"{live.url}/chats/{chat_id}")
    page.click("#peek-button")
    activity = page.locator("#peek-dialog #memory-activity")
    activity.locator("summary").click()
    items = activity.locator(".memory-activity-item")
    expect(items).to_have_count(2)
    expect(items.nth(0)).to_contain_text("Centre excerpts")
    expect(items.nth(1)).to_contain_text("picked 3")
    items.nth(1).scroll_into_view_if_needed()
    expect(items.nth(1)).to_be_in_viewport()
    shot("memory-activity")

    # The setting: on without a connection is refused with its sentence; with one, saved.
    page.goto(f"{live.url}/chats/{chat_id}/settings")
    page.locator("#adv-decision-connection").select_option(value="")
    page.locator("#chat-settings-form").get_by_role("button", name="Save settings").click()
    error = page.locator("#toasts .toast")
    expect(error).to_contain_text("choose its Memory Decision connection")
    expect(error).to_be_in_viewport()
    with live.client() as c:
        assert c.get(f"/api/chats/{chat_id}").json()["settings"]["adv_decision_connection_id"] is not None
    page.locator("#adv-decision-connection").select_option(index=1)
    page.locator("#chat-settings-form").get_by_role("button", name="Save settings").click()
    expect(page.locator("#chat-settings-form .notice-ok")).to_be_visible()
    expect(page.locator("#adv-decision")).to_be_checked()
