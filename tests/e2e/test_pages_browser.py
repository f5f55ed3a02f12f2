"""Every other page a user touches, at desktop and phone sizes."""

import json
import re

from playwright.sync_api import Page, expect

from tests.support.live import LiveSugo


def _nav(page: Page, name: str) -> None:
    page.locator("nav.nav").get_by_role("link", name=name).click()


def test_first_run_finds_a_local_server_and_adds_a_connection(page: Page, tmp_path, models, shot):
    with LiveSugo(tmp_path / "first", discovery_ports={"KoboldCpp": models.port}) as live:
        page.goto(live.url)
        expect(page.get_by_role("heading", name="Welcome to Sugo")).to_be_visible()
        expect(page.locator(".found")).to_contain_text("KoboldCpp")
        expect(page.locator(".preset-grid")).to_contain_text("OpenRouter")
        shot("first-run")
        page.locator(".found").get_by_role("link", name="Use this").click()
        expect(page.locator("input[name=base_url]")).to_have_value(models.bare_url)
        expect(page.locator("input[name=model]")).to_have_value("test-model")
        page.get_by_role("button", name="Test connection").click()
        expect(page.locator("#test-result")).to_contain_text("test-model")
        shot("connection-form")
        page.get_by_role("button", name="Save").click()
        expect(page.locator("#connection-list")).to_contain_text("KoboldCpp")
        expect(page.locator("#connection-list .badge-ok")).to_have_text("default")
        page.goto(live.url)
        expect(page.get_by_role("heading", name="Welcome to Sugo")).to_have_count(0)
        expect(page.get_by_text("import or write a character")).to_be_visible()


def test_connection_form_errors_and_key_never_shown(page: Page, live, models):
    page.goto(live.url + "/connections/new?preset=openrouter")
    expect(page.locator("input[name=base_url]")).to_have_value("https://openrouter.ai/api/v1")
    page.fill("input[name=base_url]", models.base_url)
    page.fill("input[name=model]", "test-model")
    page.fill("input[name=api_key]", "sk-or-super-secret")
    page.locator("details", has_text="Extra headers").locator("summary").click()
    page.fill("textarea[name=extra_body]", "{not json")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#toasts")).to_contain_text("Extra body is not valid JSON")
    page.fill("textarea[name=extra_body]", '{"min_p": 0.05}')
    page.fill("textarea[name=extra_headers]", '{"api-key": "hdr-super-secret"}')
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#connection-list")).to_contain_text("key saved")
    page.get_by_role("link", name="Edit").click()
    expect(page.locator("input[name=api_key]")).to_have_value("")
    expect(page.locator("input[name=api_key]")).to_have_attribute("placeholder", re.compile("A key is saved"))
    expect(page.locator("textarea[name=extra_headers]")).to_have_value('{"api-key": ""}')
    assert "sk-or-super-secret" not in page.content() and "hdr-super-secret" not in page.content()
    # Testing the form as it is fills the saved key and header value in.
    page.get_by_role("button", name="Test connection").click()
    expect(page.locator(".test-result")).to_contain_text("Connected")
    assert models.last_request.headers["api-key"] == "hdr-super-secret"
    page.goto(live.url + "/connections")
    page.get_by_role("button", name="Test connection").click()
    expect(page.locator(".test-result")).to_contain_text("Connected")
    assert models.last_request.headers["authorization"] == "Bearer sk-or-super-secret"
    assert models.last_request.headers["api-key"] == "hdr-super-secret"
    assert models.last_request.json["min_p"] == 0.05


def test_connection_embedding_model_and_defaults(page: Page, live, models, shot):
    with live.client() as c:
        c.post(
            "/api/connections",
            json={"name": "Embeddings box", "base_url": models.base_url, "model": "test-model"},
        )
    page.goto(live.url + "/connections")
    # Nothing set: the built-in model is the default, and no connection can be picked yet.
    expect(page.locator("#default-embeddings")).to_have_value("builtin:all-MiniLM-L6-v2")
    expect(page.locator("#default-embeddings option")).to_have_count(2)
    page.get_by_role("link", name="Edit").click()
    page.locator("#embedding-section summary").click()
    page.fill("input[name=embedding_model]", "test-embedding")
    page.fill("input[name=embedding_url]", "ftp://nope")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#toasts")).to_contain_text("embedding endpoint URL must start with http")
    page.fill("input[name=embedding_url]", models.base_url)
    page.get_by_role("button", name="Save").click()
    page.select_option("#default-embeddings", label="Embeddings box: test-embedding")
    page.get_by_role("button", name="Save defaults").click()
    expect(page.locator("#defaults")).to_contain_text("Saved.")
    expect(page.locator("#default-embeddings")).to_have_value(re.compile(r"connection:\d+"))
    shot("defaults")
    with live.client() as c:
        assert c.get("/api/connections/defaults").json()["embeddings"].startswith("connection:")


def test_write_a_character_then_chat_with_a_persona(page: Page, live, models, shot):
    with live.client() as c:
        c.post("/api/connections", json={"name": "T", "base_url": models.base_url, "model": "test-model"})
    page.goto(live.url + "/personas")
    expect(page.get_by_text("you appear as “User”")).to_be_visible()
    form = page.locator("#new-persona-form")
    form.locator("input[name=name]").fill("Rowan")
    form.locator("textarea[name=description]").fill("A knight with a limp.")
    form.get_by_role("button", name="Add persona").click()
    expect(page.locator("#persona-list")).to_contain_text("default")
    shot("personas")

    _nav(page, "Characters")
    page.get_by_role("link", name="Write a character").click()
    page.fill("input[name=name]", "Iris")
    page.fill("textarea[name=description]", "{{char}} keeps the archive.")
    page.fill("textarea[name=first_mes]", "*Iris looks up.* Welcome, {{user}}.")
    page.fill("textarea[name=alternate_greetings]", "Oh. It's you, {{user}}.\n---\nShh. The archive sleeps.")
    page.get_by_role("button", name="Save").click()
    page.wait_for_url(re.compile(r"/characters/\d+$"))
    expect(page.locator("h1")).to_have_text("Iris")
    shot("character-form")
    page.get_by_role("link", name="Start a chat").click()
    page.get_by_role("button", name="Start chat").click()
    page.wait_for_url(re.compile(r"/chats/\d+$"))
    greeting = page.locator("article.msg-assistant").first
    expect(greeting.locator(".msg-text")).to_have_text("Iris looks up. Welcome, Rowan.")
    expect(greeting.locator(".swipe-counter")).to_have_text("1/3")
    greeting.locator(".swipe-right").click()
    expect(page.locator("article.msg-assistant").first.locator(".msg-text")).to_have_text(
        "Oh. It's you, Rowan."
    )
    page.fill("#composer-input", "Hello")
    page.keyboard.press("Enter") if page.viewport_size["width"] > 500 else page.click("#send-button")
    expect(page.locator("article.msg-assistant").last.locator(".msg-text")).to_have_text("Echo: Hello")
    expect(page.locator("article.msg-user .msg-name")).to_have_text("Rowan")
    system = models.last_request.json["messages"][0]["content"]
    assert "Iris keeps the archive." in system and "About Rowan: A knight with a limp." in system

    _nav(page, "Chats")
    expect(page.locator(".chat-row")).to_have_count(1)
    page.fill("input.search", "nothing-like-this")
    expect(page.locator("#chat-list")).to_contain_text("No chat matches")
    page.fill("input.search", "iris")
    expect(page.locator(".chat-row")).to_have_count(1)
    shot("chat-list")


def test_group_chat_lets_the_user_pick_who_answers(page: Page, live, models):
    with live.client() as c:
        c.post("/api/connections", json={"name": "T", "base_url": models.base_url, "model": "test-model"})
        for name in ("Aria", "Bram"):
            c.post("/api/characters", json={"name": name, "first_mes": f"{name} nods."})
    page.goto(live.url + "/chats/new")
    page.locator("label.pick", has_text="Aria").click()
    page.locator("label.pick", has_text="Bram").click()
    page.get_by_role("button", name="Start chat").click()
    page.wait_for_url(re.compile(r"/chats/\d+$"))
    expect(page.locator("article.msg-assistant")).to_have_count(2)
    page.select_option("#speaker-select", label="Bram")
    page.fill("#composer-input", "Bram, your turn")
    page.click("#send-button")
    expect(page.locator("article.msg-assistant").last.locator(".msg-name")).to_have_text("Bram")


def test_import_a_sillytavern_chat_from_the_chat_list(page: Page, live, tmp_path):
    with live.client() as c:
        c.post("/api/characters", json={"name": "Mirela"})
    lines = [
        {
            "user_name": "Rowan",
            "character_name": "Mirela",
            "create_date": "2024-10-18@20h52m17s",
            "chat_metadata": {},
        },
        {
            "name": "Mirela",
            "is_user": False,
            "is_system": False,
            "send_date": "October 18, 2024 8:52pm",
            "mes": "The tide is turning.",
            "extra": {},
        },
    ]
    path = tmp_path / "chat.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines))
    page.goto(live.url)
    page.get_by_text("Import a SillyTavern chat").click()
    page.set_input_files("input[name=file][accept*=jsonl]", str(path))
    page.get_by_role("button", name="Import chat").click()
    page.wait_for_url(re.compile(r"/chats/\d+$"))
    expect(page.locator("article.msg-assistant .msg-text")).to_have_text("The tide is turning.")


def test_bad_card_upload_shows_a_clear_error(page: Page, live, tmp_path):
    bad = tmp_path / "broken.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n" + b"garbage" * 10)
    page.goto(live.url + "/characters")
    page.set_input_files("#card-file", str(bad))
    expect(page.locator("#toasts .toast-error")).to_contain_text("damaged")
    expect(page.get_by_text("No characters yet")).to_be_visible()


def test_login_protects_everything_and_then_works(page: Page, tmp_path, models, shot):
    with LiveSugo(tmp_path / "locked", password="hunter2") as live:
        with live.client(headers={"Authorization": "Bearer hunter2"}) as c:
            c.post("/api/connections", json={"name": "T", "base_url": models.base_url, "model": "test-model"})
            char = c.post("/api/characters", json={"name": "Nox", "first_mes": "..."}).json()
            chat = c.post("/api/chats", json={"character_ids": [char["id"]]}).json()
        page.goto(f"{live.url}/chats/{chat['id']}")
        page.wait_for_url(re.compile(r"/login\?next="))
        page.fill("input[name=password]", "wrong")
        page.get_by_role("button", name="Log in").click()
        expect(page.locator(".notice-error")).to_have_text("Wrong password.")
        shot("login")
        page.fill("input[name=password]", "hunter2")
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url(re.compile(rf"/chats/{chat['id']}$"))
        page.fill("#composer-input", "Still here?")
        page.click("#send-button")
        expect(page.locator("article.msg-assistant").last.locator(".msg-text")).to_have_text(
            "Echo: Still here?"
        )
        page.locator("article.msg-user").hover()
        page.locator("article.msg-user").get_by_role("button", name="Hide message").click()
        expect(page.locator("article.msg-user.is-hidden")).to_be_visible()
        # Log out posts its CSRF token like every change (through htmx), then lands on the login page.
        page.get_by_role("button", name="Log out").click()
        page.wait_for_url(re.compile(r"/login$"))
        page.goto(f"{live.url}/chats/{chat['id']}")
        page.wait_for_url(re.compile(r"/login\?next="))


def test_light_theme_is_remembered(page: Page, live, shot):
    page.goto(live.url + "/characters")
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"
    page.get_by_role("button", name="Theme").click()
    assert page.evaluate("document.documentElement.dataset.theme") == "light"
    page.reload()
    assert page.evaluate("document.documentElement.dataset.theme") == "light"
    shot("light")


def test_api_docs_render_without_network(page: Page, live):
    page.goto(live.url + "/docs")
    expect(page.locator(".swagger-ui .title")).to_contain_text("Sugo")
    expect(page.locator(".opblock-tag-section").first).to_be_visible()


def test_list_actions_swap_their_block_and_saves_land_on_the_next_page(page: Page, live, models, shot):
    """Personas, connections and a character's form answer with the block that changed (or, for a
    save that leads elsewhere, that page's content and title); nothing reloads the page."""
    with live.client() as c:
        for name in ("Local A", "Local B"):
            c.post(
                "/api/connections", json={"name": name, "base_url": models.base_url, "model": "test-model"}
            )
        char = c.post("/api/characters", json={"name": "Iris"}).json()
    answers: list[str] = []
    page.on("response", lambda r: answers.append(r.text()) if r.request.headers.get("hx-request") else None)
    page.on("dialog", lambda d: d.accept())

    page.goto(live.url + "/personas")
    page.evaluate("window.sugoMarker = 'still here'")
    form = page.locator("#new-persona-form")
    for name in ("Rowan", "Mirela"):
        form.locator("input[name=name]").fill(name)
        form.get_by_role("button", name="Add persona").click()
        expect(page.locator(f"#persona-list input[value={name}]")).to_have_count(1)
        expect(form.locator("input[name=name]")).to_have_value("")  # a fresh form, out of band
    mirela = page.locator(".persona-card", has=page.locator("input[value=Mirela]"))
    mirela.get_by_label("Default persona").check()
    mirela.get_by_role("button", name="Save").click()
    # The default badge moves from Rowan's card to Mirela's: the whole list is the block.
    expect(page.locator(".persona-card .badge-ok")).to_have_count(1)
    expect(
        page.locator(".persona-card", has=page.locator("input[value=Mirela]")).locator(".badge-ok")
    ).to_be_visible()
    page.locator(".persona-card", has=page.locator("input[value=Rowan]")).get_by_role(
        "button", name="Delete"
    ).click()
    expect(page.locator(".persona-card")).to_have_count(1)
    assert page.evaluate("window.sugoMarker") == "still here"

    page.goto(live.url + "/connections")
    page.evaluate("window.sugoMarker = 'still here'")
    page.locator("#connection-list .conn-card", has_text="Local B").get_by_role(
        "button", name="Make default"
    ).click()
    expect(page.locator("#connection-list .conn-card", has_text="Local B").locator(".badge-ok")).to_have_text(
        "default"
    )
    page.locator("#connection-list .conn-card", has_text="Local A").get_by_role(
        "button", name="Delete"
    ).click()
    expect(page.locator("#connection-list .conn-card")).to_have_count(1)
    page.get_by_role("link", name="Edit").click()
    page.fill("input[name=name]", "Local B renamed")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#connection-list")).to_contain_text("Local B renamed")
    expect(page).to_have_url(live.url + "/connections")
    expect(page).to_have_title("Connections – Sugo")
    shot("connections")

    page.goto(f"{live.url}/characters/{char['id']}")
    page.fill("input[name=name]", "Iris Vale")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("h1")).to_have_text("Iris Vale")
    expect(page).to_have_title("Iris Vale – Sugo")
    expect(page.locator(".notice-ok")).to_have_text("Saved.")
    page.goto(live.url + "/characters")
    page.fill("input.search", "vale")
    expect(page.locator("#character-list .char-card")).to_have_count(1)
    page.fill("input.search", "nobody")
    expect(page.locator("#character-list")).to_contain_text("No character matches")
    assert answers and not [a for a in answers if "<html" in a]


def test_deleting_the_last_reply_gives_the_one_before_its_controls_back(page: Page, live, models, shot):
    with live.client() as c:
        c.post("/api/connections", json={"name": "T", "base_url": models.base_url, "model": "test-model"})
        char = c.post("/api/characters", json={"name": "Aria", "first_mes": "Hello there."}).json()
        chat = c.post("/api/chats", json={"character_ids": [char["id"]]}).json()
    page.on("dialog", lambda d: d.accept())
    page.goto(f"{live.url}/chats/{chat['id']}")
    greeting = page.locator("article.msg-assistant").first
    expect(greeting.get_by_role("button", name="Generate another version")).to_be_visible()
    page.fill("#composer-input", "Hi")
    page.click("#send-button")
    reply = page.locator("article.msg-assistant").last
    expect(reply.locator(".msg-text")).to_have_text("Echo: Hi")
    # The greeting is no longer last: the new reply came with it re-rendered out of band.
    expect(greeting.get_by_role("button", name="Generate another version")).to_have_count(0)
    expect(greeting.get_by_role("button", name="Regenerate")).to_have_count(0)
    expect(reply.get_by_role("button", name="Regenerate")).to_have_count(1)

    for who in ("article.msg-assistant", "article.msg-user"):
        last = page.locator(who).last
        last.hover()
        last.get_by_role("button", name="Delete message").click()
    expect(page.locator("article.msg")).to_have_count(1)
    expect(greeting.get_by_role("button", name="Generate another version")).to_be_enabled()
    with live.client() as c:
        assert [m["content"] for m in c.get(f"/api/chats/{chat['id']}/messages").json()] == ["Hello there."]
    expect(greeting.get_by_role("button", name="Regenerate")).to_have_count(1)
    shot("last-again")


def test_two_deletes_in_quick_succession_leave_the_one_before_them_last(page: Page, live, models):
    """Found by a run under load: two messages deleted one right after the other went to the server
    together, each read the chat before the other's delete was written, and neither gave the greeting
    its controls back. A delete takes the chat's write lock before it reads which message is last."""
    with live.client() as c:
        c.post("/api/connections", json={"name": "T", "base_url": models.base_url, "model": "test-model"})
        char = c.post("/api/characters", json={"name": "Aria", "first_mes": "Hello there."}).json()
        chat = c.post("/api/chats", json={"character_ids": [char["id"]]}).json()
    page.goto(f"{live.url}/chats/{chat['id']}")
    page.fill("#composer-input", "Hi")
    page.click("#send-button")
    expect(page.locator("article.msg-assistant").last.locator(".msg-text")).to_have_text("Echo: Hi")
    expect(page.locator("#send-button")).to_be_visible()
    # Both Delete buttons pressed in one go (a person's double action, on a slow machine).
    page.evaluate(
        """() => {
          window.confirm = () => true;
          const buttons = [...document.querySelectorAll('article.msg button[aria-label="Delete message"]')];
          for (const b of buttons.slice(-2).reverse()) b.click();
        }"""
    )
    expect(page.locator("article.msg")).to_have_count(1)
    greeting = page.locator("article.msg-assistant").first
    expect(greeting.get_by_role("button", name="Generate another version")).to_be_enabled()
    with live.client() as c:
        assert [m["content"] for m in c.get(f"/api/chats/{chat['id']}/messages").json()] == ["Hello there."]
