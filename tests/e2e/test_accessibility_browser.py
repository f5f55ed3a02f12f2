"""Issue 21's acceptance: axe (axe-playwright-python, the axe-core engine) finds no accessibility violation
on the chat page and on Chat Settings opened over it, desktop and phone, in the dark theme (the default)
and the light one. The chat holds what a long story shows: hidden, failed, summarised (dimmed) and folded
messages, Markdown with dialogue and quotes, a refresh mark, a reply with versions and its memory receipt
opened; Chat Settings shows Chat Summary entries (on, off, awaiting review), a failed Generate with Retry,
Advanced Memory with problems, and a Conversation chat's Automatic Summarization.

Every axe rule runs, whatever its impact: none is left out. Text of disabled controls is exempt by WCAG
(axe skips it itself). The colour contrast of text scrolled out of its container's view cannot be measured
(axe reports it "incomplete"), so the message list and the panel are scrolled through a view at a time and
measured at each."""

import json

from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Page, expect
from sqlmodel import Session

from app.chats.service import new_message
from app.memory.summaries.models import SummaryJob
from tests.support.scenes import stored_scene

AXE = Axe().axe_script  # axe-core, as axe-playwright-python ships it
OPTIONS = {"resultTypes": ["violations"]}
CONTRAST = {"runOnly": ["color-contrast"], "resultTypes": ["violations"]}

MARKDOWN = (
    '*She looks up at the lighthouse.* "We climb before the storm," she says.\n\n'
    "> The keeper's log: *the lamp went dark on the ninth night.*\n\n"
    "She points at `the third window` and the [old map](https://example.com/map)."
)


def _violations(page: Page, context=None, options=OPTIONS) -> set[str]:
    """Each violating element once: "rule (impact) target: why"."""
    if not page.evaluate("() => typeof axe !== 'undefined'"):
        page.evaluate(AXE)
    result = page.evaluate(
        "([context, options]) => axe.run(context || document, options)", [context, options]
    )
    return {
        f"{v['id']} ({v['impact']}) {' '.join(map(str, n['target']))}: "
        + " ".join(n.get("failureSummary", "").split()).removeprefix("Fix any of the following: ")
        for v in result["violations"]
        for n in v["nodes"]
    }


def _scrolled(page: Page, box: str) -> set[str]:
    """Colour contrast of what scrolls inside `box`, a view at a time (axe cannot measure text scrolled out
    of its container's view: it reports it "incomplete")."""
    found: set[str] = set()
    height, step = page.locator(box).evaluate("b => [b.scrollHeight, b.clientHeight]")
    for top in range(0, height, max(step - 60, 100)):
        page.locator(box).evaluate("(b, top) => b.scrollTo({top, behavior: 'instant'})", top)
        found |= _violations(page, {"include": [[box]]}, CONTRAST)
    return found


def _story(live) -> int:
    """A Roleplay chat with everything a message can look like, and Chat Settings with every state."""
    with live.client() as c:
        conn = c.post(
            "/api/connections",
            json={
                "name": "Local test",
                "base_url": "http://127.0.0.1:9/v1",
                "model": "test-model",
                "kind": "openai",
            },
        ).json()
        char = c.post("/api/characters", json={"name": "Aria", "first_mes": "The road is long."}).json()
        chat = c.post(
            "/api/chats",
            json={"character_ids": [char["id"]], "name": "Lighthouse", "connection_id": conn["id"]},
        ).json()
    chat_id = chat["id"]
    # A scene whose recap failed: Advanced Memory's problems, on the button and in the panel.
    stored_scene(
        live,
        chat_id,
        [("You", "Night falls."), ("Aria", "We camp.")],
        state="failed",
        reason="The helper's answer was not JSON.",
    )
    with Session(live.engine) as s:
        for i in range(2, 15):
            user = i % 2 == 1
            s.add(
                new_message(
                    chat_id,
                    "user" if user else "assistant",
                    "You" if user else "Aria",
                    [MARKDOWN if i == 4 else f"Step {i} along the coast road."],
                    character_id=None if user else char["id"],
                )
            )
        hidden = new_message(chat_id, "user", "You", ["A line I hid from the AI."])
        hidden.hidden = True
        failed = new_message(chat_id, "assistant", "Aria", ["Half a sent"], character_id=char["id"])
        failed.status, failed.error = "partial", "The connection dropped mid-reply (HTTP 502)."
        failed.swipes = [{**failed.swipes[0], "status": "partial", "error": failed.error}]
        s.add_all([hidden, failed])
        s.commit()
    with live.client() as c:
        c.post(f"/api/chats/{chat_id}/refresh")
        c.post(f"/api/chats/{chat_id}/messages", json={"content": "After the mark, we go on."})
    with Session(live.engine) as s:
        last = new_message(
            chat_id, "assistant", "Aria", ["The wind picks up.", "The rain begins."], character_id=char["id"]
        )
        last.active_swipe = 1
        receipt = ["Context: ~3,200 of 20,000 tokens", "Recalled scene 1: the rope bridge, with 4 messages"]
        last.swipes = [last.swipes[0], {**last.swipes[1], "receipt": receipt}]
        last.content = last.swipes[1]["content"]
        s.add(last)
        s.commit()
    with live.client() as c:
        for n, (a, b) in enumerate([(2, 3), (4, 5), (6, 7)]):
            r = c.post(
                f"/api/chats/{chat_id}/summaries",
                json={
                    "title": f"Stretch {n + 1}",
                    "content": f"They walked, part {n + 1}.",
                    "scope": "range",
                    "start": a,
                    "end": b,
                },
            )
            assert r.status_code == 201, r.text
        entries = c.get(f"/api/chats/{chat_id}/summaries").json()
        c.patch(f"/api/chats/{chat_id}/summaries/{entries[1]['id']}", json={"active": False})
        r = c.put(
            f"/api/chats/{chat_id}/options",
            json={
                "settings": {
                    "advanced_memory": True,
                    "adv_check_interval": 100,
                    "summary_hide_messages": True,
                    "summary_recent_tail": 2,
                    "summary_collapse_hidden": False,
                }
            },
        )
        assert r.status_code == 200, r.text
    with Session(live.engine) as s:
        ids = [e["first_message_id"] for e in entries]
        s.add(
            SummaryJob(
                chat_id=chat_id,
                first_message_id=ids[0],
                last_message_id=ids[0],
                first_position=2,
                last_position=3,
                status="failed",
                reason="Only thinking, no answer: the model spent its budget reasoning.",
            )
        )
        s.commit()
    return chat_id


def _conversation(live) -> int:
    with live.client() as c:
        char = c.post("/api/characters", json={"name": "Mika", "first_mes": "Hi!"}).json()
        chat = c.post(
            "/api/chats", json={"character_ids": [char["id"]], "name": "Talk", "mode": "conversation"}
        ).json()
        for i in range(3):
            c.post(f"/api/chats/{chat['id']}/messages", json={"content": f"Hello {i}."})
    return chat["id"]


def _check(page: Page, live, chat_id: int, talk: int, theme: str, shot) -> set[str]:
    page.add_init_script(f"localStorage.setItem('sugo-theme', {json.dumps(theme)})")
    page.goto(f"{live.url}/chats/{chat_id}")
    expect(page.locator("html")).to_have_attribute("data-theme", theme)
    expect(page.locator("article.msg").last.locator(".msg-num")).not_to_be_empty()
    expect(page.locator(".problem-dot-slot .problem-dot")).to_have_count(1)
    page.locator("article.msg .receipt summary").click()
    found = _violations(page) | _scrolled(page, "#message-list")
    shot(f"{theme}-chat")

    page.click("#settings-button")
    panel = page.locator("#settings-panel")
    expect(panel.locator("#summary-failed")).to_be_visible()
    expect(panel.locator("#scenes-problems-list")).to_be_visible()
    page.wait_for_function(
        "() => getComputedStyle(document.getElementById('settings-panel')).transform === 'none'"
    )
    found |= _violations(page) | _scrolled(page, "#panel-body")
    shot(f"{theme}-settings")

    page.goto(f"{live.url}/chats/{talk}")
    page.click("#settings-button")
    expect(page.locator("#missing-summaries")).to_be_visible()
    page.wait_for_function(
        "() => getComputedStyle(document.getElementById('settings-panel')).transform === 'none'"
    )
    return found | _violations(page)


def test_the_chat_page_and_chat_settings_pass_axe(page: Page, live, shot, screen):
    chat_id, talk = _story(live), _conversation(live)
    found = _check(page, live, chat_id, talk, "dark", shot)
    if screen == "desktop":  # the light theme's colours are the phone's too: measured once
        found |= {f"[light] {v}" for v in _check(page, live, chat_id, talk, "light", shot)}
    assert not found, "\n".join(sorted(found))
