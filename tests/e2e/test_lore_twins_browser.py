"""Issue 11 item 1 in a real browser, desktop and phone: the same lorebook twice. The Seraphina card
brings its "Eldoria" book; importing Eldoria.json then says the book is already there (with a link
and "Import a copy anyway", which makes "Eldoria (2)") and adds no row. Chat Settings names every
book and where it applies from; the entry both Eldorias hold is sent once (Peek Prompt) and Active
Context says why the other was left out."""

from pathlib import Path

from playwright.sync_api import Page, expect

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ELDORIA = FIXTURES / "Eldoria.json"
SERAPHINA = FIXTURES / "default_Seraphina.png"
SHADOWFANG = "The Shadowfangs are beasts of darkness"


def test_importing_a_book_already_there_offers_a_copy_and_adds_no_row(page: Page, live, shot):
    with live.client() as c:
        assert (
            c.post(
                "/api/characters/import", files={"file": ("Seraphina.png", SERAPHINA.read_bytes())}
            ).status_code
            == 201
        )
        (card_book,) = c.get("/api/lorebooks").json()

    page.goto(live.url + "/lorebooks")
    expect(page.locator(".lore-book")).to_have_count(1)
    page.set_input_files("input[type=file][name=file]", str(ELDORIA))
    page.get_by_role("button", name="Import", exact=True).click()
    twin = page.locator("#import-twin")
    expect(twin).to_contain_text("Eldoria is already in your lorebooks with the same entries.")
    expect(twin.get_by_role("link", name="Open Eldoria")).to_have_attribute(
        "href", f"/lorebooks/{card_book['id']}"
    )
    expect(page.locator(".lore-book")).to_have_count(1)
    copy = page.get_by_role("button", name="Import a copy anyway")
    expect(copy).to_be_in_viewport()
    shot("twin")

    copy.click()
    expect(page.locator("h1")).to_contain_text("Eldoria (2)")
    expect(page.locator("#book-message")).to_contain_text("Imported 4 entries.")
    page.goto(live.url + "/lorebooks")
    expect(page.locator(".lore-book strong")).to_have_text(["Eldoria", "Eldoria (2)"])
    shot("two-rows")

    # The card again: its book is linked, not copied, and the character page says so.
    page.goto(live.url + "/characters")
    page.set_input_files("#card-file", str(SERAPHINA))
    reused = page.locator("#card-book-reused")
    expect(reused).to_contain_text(
        "Its lorebook Eldoria was already in your lorebooks with the same entries: "
        "Seraphina uses that one, no copy was made."
    )
    expect(reused.get_by_role("link", name="Eldoria")).to_have_attribute(
        "href", f"/lorebooks/{card_book['id']}"
    )
    shot("card-reused")
    page.goto(live.url + "/lorebooks")
    expect(page.locator(".lore-book")).to_have_count(2)


def test_chat_settings_say_where_each_book_comes_from_and_a_shared_entry_is_sent_once(
    page: Page, live, models, shot
):
    with live.client() as c:
        c.post(
            "/api/connections",
            json={
                "name": "Local",
                "base_url": models.base_url,
                "model": "test-model",
                "context_size": 16384,
                "max_tokens": 200,
            },
        )
        char = c.post(
            "/api/characters/import", files={"file": ("Seraphina.png", SERAPHINA.read_bytes())}
        ).json()
        (card_book,) = c.get("/api/lorebooks").json()
        copy = c.post(
            "/api/lorebooks/import",
            files={"file": ("Eldoria.json", ELDORIA.read_bytes())},
            params={"copy": "true"},
        ).json()
        persona = c.post("/api/personas", json={"name": "Ann", "description": "A traveller."}).json()
        ann_book = c.post("/api/lorebooks", json={"name": "Ann's travels"}).json()
        c.post(
            f"/api/lorebooks/{ann_book['id']}/links", json={"target": "persona", "target_id": persona["id"]}
        )
        weather = c.post("/api/lorebooks", json={"name": "Weather", "is_global": True}).json()
        c.post("/api/lorebooks", json={"name": "Spare"})
        chat = c.post("/api/chats", json={"character_ids": [char["id"]], "persona_id": persona["id"]}).json()
        assert c.put(f"/api/chats/{chat['id']}/lorebooks", json={"book_ids": [copy["id"]]}).status_code == 200

    page.goto(f"{live.url}/chats/{chat['id']}")
    page.click("#settings-button")
    section = page.locator("#settings-panel #lorebooks-section")

    def row(name: str):
        box = section.get_by_label(name, exact=True)
        return box, section.locator(f"#chat-lorebook-row-{box.get_attribute('value')}")

    box, line = row("Eldoria")  # the card's book: applies through the character, whatever this chat says
    expect(box).to_be_checked()
    expect(box).to_be_disabled()
    expect(line).to_contain_text("via the character Seraphina — change on the character page")
    expect(line.get_by_role("link", name="change on the character page")).to_have_attribute(
        "href", f"/characters/{char['id']}"
    )
    box, line = row("Eldoria (2)")
    expect(box).to_be_checked()
    expect(box).to_be_enabled()
    expect(line).to_contain_text("this chat")
    box, line = row("Ann's travels")
    expect(box).to_be_checked()
    expect(line).to_contain_text("via the persona Ann")
    box, line = row("Weather")
    expect(box).to_be_checked()
    expect(line).to_contain_text("global, every chat — change on the lorebook page")
    expect(line.get_by_role("link")).to_have_attribute("href", f"/lorebooks/{weather['id']}")
    box, line = row("Spare")
    expect(box).not_to_be_checked()
    expect(line).to_contain_text("not used in this chat")
    # No checkbox without a label of its own.
    unlabelled = section.locator("input[type=checkbox]").evaluate_all(
        "els => els.filter(e => !e.labels.length).length"
    )
    assert unlabelled == 0
    section.scroll_into_view_if_needed()
    shot("chat-settings-lorebooks")

    # Saving keeps the chat's own link and changes nothing else.
    page.get_by_role("button", name="Save settings").click()
    expect(page.locator("#settings-panel").get_by_text("Saved.")).to_be_attached()
    with live.client() as c:
        shown = c.get(f"/api/chats/{chat['id']}/lorebooks").json()
        assert c.get(f"/api/lorebooks/{card_book['id']}").json()["links"] == [{"character_id": char["id"]}]
    assert shown["attached"] == [copy["id"]]
    page.get_by_role("button", name="Close Chat Settings").click()

    page.fill("#composer-input", "What is a shadowfang?")
    page.click("#send-button")
    expect(page.locator("#send-button")).to_be_visible(timeout=15000)
    sent = "\n".join(m["content"] for m in models.last_request.json["messages"])
    assert sent.count(SHADOWFANG) == 1

    page.click("#settings-button")
    active = page.locator("#settings-panel #active-context")
    if active.get_attribute("open") is None:
        active.locator("summary").first.click()
    expect(active.locator("summary").first).to_contain_text("duplicates left out")
    once = active.locator(".lore-sent-once", has_text="shadowfang")
    expect(once).to_contain_text("left out: same text as “shadowfang” in Eldoria, sent once")
    once.scroll_into_view_if_needed()
    shot("active-context")
    page.get_by_role("button", name="Close Chat Settings").click()

    page.click("#peek-button")
    peek = page.locator("#peek-dialog")
    expect(peek).to_contain_text(SHADOWFANG)
    expect(peek).to_contain_text("left out (same text as an entry already sent)")
    assert peek.inner_text().count(SHADOWFANG) == 1
    shot("peek")
