"""A Game chat in the browser (issue 27, Game Mode): start one from New chat with a Game Master and a
party member, send a message the Game Master answers, write the game's secrets in Chat Settings, and
read in Peek Prompt that they are the Game Master's and that what changes each turn sits after the
history. Desktop and phone."""

import json
import re

from playwright.sync_api import Page, expect

SECRET = "The innkeeper is the smuggler the party hunts."


def test_start_a_game_and_keep_its_secrets_from_the_party(page: Page, live, models, shot):
    with live.client() as c:
        c.post("/api/connections", json={"name": "T", "base_url": models.base_url, "model": "test-model"})
        keeper = c.post(
            "/api/characters", json={"name": "Keeper", "first_mes": "The road forks at dusk."}
        ).json()
        bram = c.post("/api/characters", json={"name": "Bram", "first_mes": "Bram grunts."}).json()
    page.goto(f"{live.url}/chats/new")
    page.get_by_role("checkbox", name="Keeper").check()
    page.get_by_role("checkbox", name="Bram").check()
    expect(page.locator("#game-master-pick")).to_be_hidden()  # asked for in Game mode only
    page.get_by_label("Mode").select_option("game")
    page.locator("#game-master-pick select").select_option(label="Keeper")
    shot("new-game")
    page.get_by_role("button", name="Start chat").click()
    page.wait_for_url(re.compile(r"/chats/\d+$"))
    chat_id = int(page.url.rsplit("/", 1)[1])
    # The Game Master opens the game; the composer speaks to it.
    expect(page.locator("article.msg-assistant .msg-name")).to_have_text(["Keeper"])
    expect(page.locator("#composer-input")).to_have_attribute(
        "placeholder", re.compile("^Message the Game Master")
    )
    expect(page.locator("#speaker-select option:checked")).to_have_text("Game Master")

    models.script("*Keeper describes the fork.* Left lies the marsh.")
    page.fill("#composer-input", "Bram, which way?")
    page.click("#send-button")
    expect(page.locator("article.msg-assistant .msg-name")).to_have_text(["Keeper", "Keeper"])
    expect(page.locator("article.msg-assistant").last).to_be_in_viewport()
    shot("answered")

    page.click("#settings-button")
    panel = page.locator("#settings-panel")
    game = panel.locator("#game-section")
    expect(game).to_be_visible()
    expect(game.locator("#game-master option:checked")).to_have_text("Keeper")
    expect(panel.locator("#group-turns")).not_to_contain_text("Narrator")
    game.get_by_label("Game Master's secrets").fill(SECRET)
    game.scroll_into_view_if_needed()
    shot("game-settings")
    panel.get_by_role("button", name="Save settings").click()
    expect(panel.get_by_text("Saved.")).to_be_in_viewport()
    panel.get_by_role("button", name="Close Chat Settings").click()

    page.click("#peek-button")
    dialog = page.locator("#peek-dialog")
    blocks = dialog.locator(".prompt-blocks")
    expect(blocks).to_contain_text(SECRET)
    expect(blocks).to_contain_text("Game Master's turn instructions")
    shot("peek-game-master")
    dialog.get_by_role("button", name="Close Peek Prompt").click()
    with live.client() as c:
        party = c.get(f"/api/chats/{chat_id}/prompt", params={"speaker_id": bram["id"]}).json()
        chat = c.get(f"/api/chats/{chat_id}").json()
    assert SECRET not in json.dumps(party["messages"])
    assert chat["narrator_id"] == keeper["id"] and chat["settings"]["game_secrets"] == SECRET


def test_start_the_next_session_from_chat_settings(page: Page, live, models, shot):
    with live.client() as c:
        c.post("/api/connections", json={"name": "T", "base_url": models.base_url, "model": "test-model"})
        ids = [
            c.post("/api/characters", json={"name": name, "first_mes": f"{name} is here."}).json()["id"]
            for name in ("Keeper", "Bram")
        ]
        first = c.post(
            "/api/chats", json={"character_ids": ids, "mode": "game", "name": "Sunken Keep"}
        ).json()
        c.put(
            f"/api/chats/{first['id']}/options",
            json={"settings": {**first["settings"], "game_secrets": SECRET}},
        )
    page.goto(f"{live.url}/chats/{first['id']}")
    page.click("#settings-button")
    sessions = page.locator("#settings-panel #game-sessions")
    expect(sessions).to_contain_text("Session 1 of this game")
    page.once("dialog", lambda dialog: dialog.accept())
    sessions.get_by_role("button", name="Start the next session").click()
    page.wait_for_url(
        lambda url: re.search(r"/chats/\d+$", url) and not url.endswith(f"/chats/{first['id']}")
    )
    second_id = int(page.url.rsplit("/", 1)[1])
    expect(page.locator("h1, .chat-title").first).to_contain_text("Sunken Keep – Session 2")
    expect(page.locator("article.msg")).to_have_count(0)  # an archive of its own
    expect(page.locator("#chat-empty")).to_contain_text("A new session of this game.")
    expect(page.locator("#composer-input")).to_be_in_viewport()
    shot("second-session")
    page.click("#settings-button")
    sessions = page.locator("#settings-panel #game-sessions")
    expect(sessions).to_contain_text("Session 2 of this game")
    expect(sessions.get_by_role("link", name="Session 1")).to_have_attribute("href", f"/chats/{first['id']}")
    expect(page.locator("#settings-panel #game-secrets")).to_have_value(SECRET)  # the settings came along
    sessions.scroll_into_view_if_needed()
    shot("second-session-settings")
    with live.client() as c:
        assert c.get(f"/api/chats/{second_id}").json()["game_root_id"] == first["id"]
