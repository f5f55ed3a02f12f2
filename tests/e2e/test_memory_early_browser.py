"""Issue 21, items 6 and 7 in the browser, desktop and phone: a new Roleplay chat's memory viewer lists a
memory after five messages with recall off; a refusal from the summary model waits under review in Chat
Settings with its reason beside Approve, and Approve makes it active."""

from playwright.sync_api import Page, expect

from tests.support.waiting import wait_for

STORY = [
    "We reach the ruined abbey at dusk; the bells of Saint Corwin hang silent in the tower.",
    "*Aria lights a lantern and kneels by the altar.* There's a brass key wedged under this stone.",
    "A hooded monk steps out of the shadows and names himself Brother Tobin.",
    "We follow Tobin down the spiral stairs into the crypt, the key cold in my pocket.",
    "The crypt floods at midnight, Tobin says; we have an hour to find the reliquary.",
]


def _chat(live, models=None, story=STORY) -> int:
    with live.client() as c:
        if models is not None:
            r = c.post(
                "/api/connections",
                json={
                    "name": "Local test",
                    "base_url": models.base_url,
                    "model": "test-model",
                    "kind": "openai",
                },
            )
            assert r.status_code == 201, r.text
        char = c.post(
            "/api/characters", json={"name": "Aria", "first_mes": "The abbey bells are silent tonight."}
        ).json()
        chat = c.post("/api/chats", json={"character_ids": [char["id"]], "name": "Abbey"}).json()
        for text in story:
            assert c.post(f"/api/chats/{chat['id']}/messages", json={"content": text}).status_code == 201
    return chat["id"]


def test_the_memory_viewer_of_a_new_chat_lists_a_memory_after_five_messages(page: Page, live, models, shot):
    chat_id = _chat(live, models, STORY[:4])
    models.script("*Tobin raises his candle toward the flooded stair.*")
    with live.client() as c:
        assert not c.get(f"/api/chats/{chat_id}").json()["settings"].get("memory_recall")  # Roleplay: off
        # The reply (the sixth message after the greeting) schedules the memory job, as every reply does.
        c.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": STORY[4]}).read()
        wait_for(
            lambda: (
                (s := c.get(f"/api/chats/{chat_id}/memories/status").json())["count"] == 1
                and s["building"] is None
            ),
            timeout=120,
            what="the first memory",
        )
    page.goto(f"{live.url}/chats/{chat_id}/memories")
    memory = page.locator("#memory-list .memory-card")
    expect(memory).to_have_count(1)
    expect(memory).to_contain_text("Saint Corwin")
    expect(memory).to_contain_text("5 messages")
    expect(page.get_by_text("No memories yet")).to_have_count(0)
    shot("first-memory")


def test_a_refusal_waits_under_review_with_its_reason_and_approve_makes_it_active(
    page: Page, live, models, shot
):
    chat_id = _chat(live, models)
    models.script("I would rather not say.")
    with live.client() as c:
        assert (
            c.post(
                f"/api/chats/{chat_id}/summaries/generate", json={"scope": "range", "start": 2, "end": 6}
            ).status_code
            == 202
        )
        wait_for(
            lambda: c.get(f"/api/chats/{chat_id}/summaries/generate").json()["status"] == "done",
            timeout=60,
            what="the summary run",
        )
    page.goto(f"{live.url}/chats/{chat_id}/settings")
    item = page.locator("#chat-summary .summary-item")
    expect(item).to_have_count(1)
    item.scroll_into_view_if_needed()
    expect(item).to_contain_text("awaiting review")
    reason = item.locator(".summary-review-reason")
    expect(reason).to_contain_text(
        "Held for review: It mentions none of the names, places or words of the messages"
    )
    approve = item.get_by_role("button", name="Approve")
    approve.scroll_into_view_if_needed()
    expect(reason).to_be_in_viewport()
    expect(approve).to_be_in_viewport()
    expect(item.locator(".summary-active")).to_have_attribute("aria-checked", "false")
    shot("held-refusal")
    approve.click()
    expect(item.locator(".summary-active")).to_have_attribute("aria-checked", "true")
    expect(item.locator(".summary-review-reason")).to_have_count(0)
    with live.client() as c:
        (entry,) = c.get(f"/api/chats/{chat_id}/summaries").json()
    assert entry["active"] and not entry["awaiting_review"] and entry["review_reason"] == ""
