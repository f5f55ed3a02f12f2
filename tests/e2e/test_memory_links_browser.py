"""Issue 21 item 15: Chat Settings of a Roleplay chat had two buttons called "Access memories for this chat",
one opening Memory Recall's memories, the other Advanced Memory's scenes. Each now says what it opens, the
page it opens carries the same words, and the problems text names the one it means. Desktop and phone."""

from playwright.sync_api import Page, expect

from tests.support.scenes import stored_scene


def _chat(live) -> int:
    with live.client() as c:
        char = c.post("/api/characters", json={"name": "Aria", "first_mes": "The road is long."}).json()
        chat = c.post("/api/chats", json={"character_ids": [char["id"]], "name": "Road"}).json()
        r = c.put(
            f"/api/chats/{chat['id']}/options",
            json={"settings": {"advanced_memory": True, "adv_check_interval": 100}},
        )
        assert r.status_code == 200, r.text
    return chat["id"]


def test_the_two_memory_buttons_say_what_they_open(page: Page, live, shot):
    chat_id = _chat(live)
    page.goto(f"{live.url}/chats/{chat_id}")
    page.click("#settings-button")
    panel = page.locator("#settings-panel")
    recall = panel.locator("#memories-link")
    scenes = panel.locator("#scenes-link")
    expect(recall).to_have_text("Open memories (Memory Recall)")
    expect(scenes).to_have_text("Open scenes (Advanced Memory)")
    # No two links of the panel share a name while going to different places.
    links = panel.get_by_role("link").evaluate_all(
        "els => els.map(a => [a.textContent.trim(), a.getAttribute('href')])"
    )
    by_name: dict[str, set[str]] = {}
    for name, href in links:
        by_name.setdefault(name, set()).add(href)
    assert all(len(hrefs) == 1 for hrefs in by_name.values()), by_name
    # The problems text names the scenes' button by its words.
    expect(panel.locator("#scenes-problems-none")).to_contain_text("Open scenes (Advanced Memory)")
    scenes.scroll_into_view_if_needed()
    shot("buttons")

    scenes.click()
    expect(page.locator("h1")).to_contain_text("Advanced Memory: scenes")
    page.go_back()
    page.click("#settings-button")
    page.locator("#settings-panel #memories-link").click()
    expect(page.locator("h1")).to_contain_text("Memory Recall: memories")


def test_a_problem_for_review_says_where_it_is_fixed(page: Page, live, shot):
    chat_id = _chat(live)
    scene_id = stored_scene(
        live,
        chat_id,
        [("You", "The bridge is out."), ("Aria", "We climb down.")],
        state="written",
        summary="They climbed down.",
        fingerprint="older",
    )
    with live.client() as c:
        first = c.get(f"/api/chats/{chat_id}/scenes/{scene_id}").json()
        for message in first["messages"]:
            r = c.patch(f"/api/chats/{chat_id}/messages/{message['id']}", json={"hidden": True})
            assert r.status_code == 200, r.text
    page.goto(f"{live.url}/chats/{chat_id}/settings")
    section = page.locator("#advanced-memory")
    review = section.locator("#scenes-problems-review")
    expect(review).to_contain_text("Open scenes (Advanced Memory)")
    expect(section.locator("#scenes-problems-list a")).to_have_attribute(
        "title", "Open scene 1 among the scenes (Advanced Memory)"
    )
    review.scroll_into_view_if_needed()
    shot("review")
