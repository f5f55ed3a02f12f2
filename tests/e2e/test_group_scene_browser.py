"""A recalled scene in a merged group chat, in the browser (issue 27, acceptance 5): the scene only Aria
took part in is recalled for the group's reply and Peek Prompt shows it marked "known only to Aria".
Desktop and phone."""

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
