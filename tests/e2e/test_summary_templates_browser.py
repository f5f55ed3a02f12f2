"""Issue 12, Chat Summary's Summary Prompt, Summary Provider and Maximum output size in Chat Settings: create,
duplicate, edit and delete a template in the Templates manager and choose one, for every Roleplay chat (a
second chat's Generate sends it); choose the Summary Provider; a bad Maximum output size is refused with its
message and nothing is saved. Desktop and phone."""

from playwright.sync_api import Page, expect


def _chat(live, models) -> tuple[int, int]:
    with live.client() as c:
        for name, model in (("Local test", "test-model"), ("Summariser", "summary-model")):
            r = c.post(
                "/api/connections",
                json={"name": name, "base_url": models.base_url, "model": model, "kind": "openai"},
            )
            assert r.status_code == 201, r.text
        char = c.post("/api/characters", json={"name": "Aria", "first_mes": "The road is long."}).json()
        chat = c.post("/api/chats", json={"character_ids": [char["id"]], "name": "Road"}).json()
    return chat["id"], r.json()["id"]


def _other_chat(live) -> int:
    with live.client() as c:
        char = c.post("/api/characters", json={"name": "Bram", "first_mes": "The mill is quiet."}).json()
        chat = c.post("/api/chats", json={"character_ids": [char["id"]], "name": "Mill"}).json()
        for text in ("We grind the last sack.", "Then we sleep."):
            assert c.post(f"/api/chats/{chat['id']}/messages", json={"content": text}).status_code == 201
    return chat["id"]


def _chosen(live) -> int | None:
    with live.client() as c:
        return c.get("/api/summary-templates/chosen").json()["id"]


def _templates(live) -> dict[str, dict]:
    with live.client() as c:
        return {t["name"]: t for t in c.get("/api/summary-templates").json()}


def test_templates_provider_and_output_size(page: Page, live, models, shot):
    chat_id, summariser = _chat(live, models)
    page.goto(f"{live.url}/chats/{chat_id}/settings")
    part = page.locator("#summary-prompt")
    part.scroll_into_view_if_needed()
    expect(page.locator("#summary-template option:checked")).to_have_text("Default (built in)")
    expect(part.locator("#summary-template-scope")).to_have_text("Used by every Roleplay chat.")
    part.locator("#summary-templates > summary").click()
    shot("templates-open")

    # New: the form starts from the Default's text; saving chooses the new template in the select.
    part.locator("#template-new").click()
    expect(part.locator("#template-text")).to_contain_text("You are a summarizer")
    part.locator("#template-name").fill("Chronicler")
    part.locator("#template-text").fill("Summarise like a court chronicler.")
    shot("new-template")
    part.locator("#template-save").click()
    rows = part.locator(".summary-template")
    expect(rows).to_have_count(2)
    expect(page.locator("#summary-template option:checked")).to_have_text("Chronicler")
    expect(part.locator("#summary-templates")).to_have_attribute("open", "")

    # A name already taken is refused with a sentence; nothing is added.
    part.locator("#template-new").click()
    part.locator("#template-name").fill("chronicler")
    part.locator("#template-save").click()
    expect(page.locator("#toasts .toast-error")).to_contain_text(
        "A template named “Chronicler” already exists"
    )
    assert list(_templates(live)) == ["Default", "Chronicler"]
    part.locator("#summary-template-new").get_by_role("button", name="Cancel").click()

    # Duplicate opens the copy for editing; Edit and save it under a new name.
    part.get_by_role("button", name="Duplicate Chronicler").click()
    expect(part.locator("#template-name")).to_have_value("Chronicler (copy)")
    part.locator("#template-name").fill("Terse")
    part.locator("#template-text").fill("Two sentences, past tense.")
    part.locator("#template-save").click()
    expect(rows).to_have_count(3)
    part.get_by_role("button", name="Edit Terse").click()
    expect(part.locator("#template-text")).to_have_value("Two sentences, past tense.")
    part.locator("#template-text").fill("Two short sentences, past tense.")
    part.locator("#template-save").click()
    expect(part.get_by_role("button", name="Edit Terse")).to_be_visible()

    # Delete Chronicler: the select goes back to the Default; choose Terse.
    page.once("dialog", lambda d: d.accept())
    part.get_by_role("button", name="Delete Chronicler").click()
    expect(rows).to_have_count(2)
    expect(page.locator("#summary-template option:checked")).to_have_text("Default (built in)")
    assert _templates(live)["Terse"]["text"] == "Two short sentences, past tense."
    page.locator("#summary-template").select_option(label="Terse")
    part.scroll_into_view_if_needed()
    shot("templates-edited")

    # Summary Provider and a bad Maximum output size: refused with its message, nothing saved.
    page.locator("#summary-provider").select_option(label="Summariser · summary-model")
    size = page.locator("#summary-max-tokens")
    size.fill("40000")
    size.scroll_into_view_if_needed()
    page.locator("#chat-settings-form").get_by_role("button", name="Save settings").click()
    expect(page.locator("#toasts .toast-error").last).to_contain_text(
        "Maximum output size: “40000” is not a whole number of tokens from 1 to 32,768."
    )
    shot("size-refused")
    with live.client() as c:
        before = c.get(f"/api/chats/{chat_id}").json()["settings"]
    assert (_chosen(live), before["summary_connection_id"], before["summary_max_tokens"]) == (
        None,
        None,
        4096,
    )

    size.fill("2048")
    page.locator("#chat-settings-form").get_by_role("button", name="Save settings").click()
    expect(page.locator("#chat-settings-form .notice-ok")).to_be_visible()
    with live.client() as c:
        settings = c.get(f"/api/chats/{chat_id}").json()["settings"]
    assert (_chosen(live), settings["summary_connection_id"], settings["summary_max_tokens"]) == (
        _templates(live)["Terse"]["id"],
        summariser,
        2048,
    )
    expect(page.locator("#summary-template option:checked")).to_have_text("Terse")
    expect(page.locator("#summary-provider option:checked")).to_have_text("Summariser · summary-model")
    expect(page.locator("#summary-max-tokens")).to_have_value("2048")
    page.locator("#summary-provider").scroll_into_view_if_needed()
    shot("saved")

    # The choice is global: another Roleplay chat shows Terse, and its Generate sends Terse's text.
    other = _other_chat(live)
    page.goto(f"{live.url}/chats/{other}/settings")
    expect(page.locator("#summary-template option:checked")).to_have_text("Terse")
    expect(page.locator("#summary-template-scope")).to_have_text("Used by every Roleplay chat.")
    page.locator("#summary-template").scroll_into_view_if_needed()
    shot("other-chat")
    models.script("They ground the last sack and slept.")
    section = page.locator("#chat-summary")
    section.locator("#summary-generate").click()
    expect(section.locator(".summary-item")).to_have_count(1)
    assert models.last_request.json["messages"][0] == {
        "role": "system",
        "content": "Two short sentences, past tense.",
    }
    page.goto(f"{live.url}/chats/{chat_id}/settings")

    # The chosen template and provider deleted elsewhere: the panel says the Default and the chat's connection are used.
    with live.client() as c:
        assert c.delete(f"/api/summary-templates/{_templates(live)['Terse']['id']}").status_code == 204
        assert c.delete(f"/api/connections/{summariser}").status_code in (200, 204)
    page.reload()
    expect(page.locator("#summary-template-missing")).to_have_text(
        "The chosen template was deleted: every Roleplay chat uses the Default until you choose another."
    )
    expect(page.locator("#summary-provider-missing")).to_have_text(
        "The connection chosen for summaries was deleted: the chat's connection writes them until you choose another."
    )
    expect(page.locator("#summary-template option:checked")).to_have_text("Default (built in)")
    expect(page.locator("#summary-provider option:checked")).to_have_text(
        "The chat's connection (Local test)"
    )
    page.locator("#summary-template-missing").scroll_into_view_if_needed()
    shot("fallbacks")
