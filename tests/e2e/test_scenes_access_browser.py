"""Issue 14, Access memories for this chat (/chats/{id}/scenes): the empty state says what to do next;
the chat's numbered scenes with their messages, people and state; the search narrows them; Edit Summary
text (an empty text refused in the form) marks the scene Manually edited; Inspect source messages shows
them, hidden ones marked; Disable; Delete summary and Delete all memories after a confirm naming what
goes; a bad import file changes nothing and says why; a summary holding markup stays text. Desktop and
phone."""

from playwright.sync_api import Page, expect
from sqlmodel import select

from app.chats.models import Chat, Message
from app.memory.scenes.models import Scene
from tests.support.scenes import stored_scene

BRIDGE = [("You", "Hold the rope."), ("Aria", "I have it. Cross now."), ("You", "Made it across the bridge.")]
CAFE = [("You", "Coffee?"), ("Aria", "At the Café Élan, by the river."), ("You", "Two, please.")]
STORM = [("Aria", "The storm is coming."), ("You", "Inside, quick.")]


def _chat(live) -> int:
    with live.client() as c:
        char = c.post("/api/characters", json={"name": "Aria"}).json()
        return c.post("/api/chats", json={"character_ids": [char["id"]], "name": "Road"}).json()["id"]


def _seed(live, chat_id: int) -> list[int]:
    first = stored_scene(
        live,
        chat_id,
        BRIDGE,
        state="written",
        participants=["Aria", "You"],
        summary="Aria and the user crossed the BRIDGE by rope.",
        timeframe="Day 1, dusk",
    )
    second = stored_scene(
        live,
        chat_id,
        CAFE,
        state="written",
        participants=["Aria", "You"],
        summary="They met at the Café Élan by the river.",
    )
    third = stored_scene(live, chat_id, STORM, state="failed", reason="The helper gave no answer.")
    with live.session() as s:  # the bridge's second message is hidden from the AI
        msg = s.exec(
            select(Message).where(Message.chat_id == chat_id, Message.content == "I have it. Cross now.")
        ).one()
        msg.hidden = True
        s.add(msg)
        s.commit()
    return [first, second, third]


def _scene(live, scene_id: int) -> Scene:
    with live.session() as s:
        return s.get(Scene, scene_id)


def _open(page: Page, live, chat_id: int):
    page.goto(f"{live.url}/chats/{chat_id}/scenes")
    return page.locator("#scene-list .scene-card")


def test_empty_state_says_what_to_do_next(page: Page, live, shot):
    chat_id = _chat(live)
    page.goto(f"{live.url}/chats/{chat_id}/scenes")
    expect(page.locator("h1")).to_contain_text("Advanced Memory: scenes")
    empty = page.locator("#scenes-empty")
    expect(empty).to_contain_text("No scenes yet.")
    expect(empty).to_contain_text("Turn on Advanced Memory in Chat Settings → Memory Recall")
    expect(empty).to_contain_text("Prepare existing history")
    expect(empty.get_by_role("link", name="Open Advanced Memory settings")).to_have_attribute(
        "href", f"/chats/{chat_id}/settings#advanced-memory"
    )
    expect(page.locator("#scenes-back")).to_have_attribute("href", f"/chats/{chat_id}")
    expect(page.locator("#scenes-delete-all")).to_have_count(0)
    expect(page.locator("#scenes-search")).to_have_count(0)
    shot("empty")


def test_scenes_are_numbered_searched_edited_inspected_and_disabled(page: Page, live, shot):
    chat_id = _chat(live)
    bridge, cafe, storm = _seed(live, chat_id)
    cards = _open(page, live, chat_id)
    expect(cards).to_have_count(3)
    first = page.locator(f"#scene-{bridge}")
    expect(first.locator(".scene-title")).to_have_text("Scene 1")
    expect(first.locator(".scene-range")).to_have_text("messages #1–#3")
    expect(first).to_contain_text("Aria, You")
    expect(first).to_contain_text("Day 1, dusk")
    expect(first).to_contain_text("Written")
    expect(page.locator(f"#scene-{cafe} .scene-range")).to_have_text("messages #4–#6")
    third = page.locator(f"#scene-{storm}")
    expect(third.locator(".scene-title")).to_have_text("Scene 3")
    expect(third).to_contain_text("Failed")
    expect(third.locator(".scene-reason")).to_contain_text("The helper gave no answer.")
    expect(page.locator("#scenes-status")).to_contain_text("3 scenes")
    shot("listed")

    page.locator("#scenes-search").fill("cafe elan")  # case and accents aside
    expect(cards).to_have_count(1)
    expect(cards.nth(0).locator(".scene-title")).to_have_text("Scene 2")  # a search keeps the numbers
    shot("searched")
    page.locator("#scenes-search").fill("nothing like this")
    expect(page.locator("#scenes-no-match")).to_contain_text("No scene summary holds “nothing like this”")
    page.locator("#scenes-search").fill("")
    expect(cards).to_have_count(3)

    first.get_by_role("button", name="Edit summary").click()
    box = first.locator("textarea[name=summary]")
    expect(box).to_have_value("Aria and the user crossed the BRIDGE by rope.")
    box.fill("   ")
    box.evaluate("el => el.removeAttribute('required')")  # the server's own refusal, not the browser's
    first.get_by_role("button", name="Save").click()
    expect(first.locator(".scene-edit-error")).to_contain_text("The summary text cannot be empty")
    shot("edit-refused")
    assert _scene(live, bridge).summary == "Aria and the user crossed the BRIDGE by rope."
    first.locator("textarea[name=summary]").fill("They crossed the rope bridge at dusk; Aria held the line.")
    first.get_by_role("button", name="Save").click()
    expect(first.locator(".scene-manual")).to_have_text("Manually edited")
    expect(first.locator(".scene-summary")).to_have_text(
        "They crossed the rope bridge at dusk; Aria held the line."
    )
    saved = _scene(live, bridge)
    assert (saved.summary, saved.manual, saved.state) == (
        "They crossed the rope bridge at dusk; Aria held the line.",
        True,
        "written",
    )

    first.locator(".scene-source > summary").click()
    messages = first.locator(".scene-message")
    expect(messages).to_have_count(3)
    expect(messages.nth(0)).to_contain_text("You")
    expect(messages.nth(0)).to_contain_text("Hold the rope.")
    expect(messages.nth(1)).to_contain_text("I have it. Cross now.")
    expect(messages.nth(1).locator(".badge-hidden")).to_have_text("hidden")
    expect(messages.nth(0).locator(".badge-hidden")).to_have_count(0)
    messages.nth(1).scroll_into_view_if_needed()
    shot("inspected")

    second = page.locator(f"#scene-{cafe}")
    second.get_by_role("button", name="Disable").click()
    expect(second.locator(".scene-disabled")).to_contain_text("Disabled")
    assert _scene(live, cafe).enabled is False
    second.scroll_into_view_if_needed()
    shot("disabled")
    second.get_by_role("button", name="Enable").click()
    expect(second.locator(".scene-disabled")).to_have_count(0)
    assert _scene(live, cafe).enabled is True

    # Last: Reindex answers the whole scene view (a field typed into while it is swapped in would be lost).
    page.locator("#scenes-reindex").click()
    expect(page.locator("#scenes-message")).to_contain_text("Reindexing: the chat's memories")


def test_delete_summary_then_delete_all_after_a_confirm(page: Page, live, shot):
    chat_id = _chat(live)
    bridge, cafe, _ = _seed(live, chat_id)
    cards = _open(page, live, chat_id)
    expect(cards).to_have_count(3)
    second = page.locator(f"#scene-{cafe}")
    asked: list[str] = []
    page.once("dialog", lambda d: (asked.append(d.message), d.accept()))
    second.get_by_role("button", name="Delete summary").click()
    expect(second).to_contain_text("Summary deleted")
    expect(second.locator(".scene-summary-none")).to_contain_text(
        "routine preparation will not write it again"
    )
    expect(second.get_by_role("button", name="Delete summary")).to_have_count(0)
    assert asked and "Scene 2" in asked[0] and "messages #4–#6" in asked[0] and "Aria, You" in asked[0]
    gone = _scene(live, cafe)
    assert (gone.state, gone.summary) == ("deleted", "")
    assert _scene(live, bridge).summary == "Aria and the user crossed the BRIDGE by rope."
    shot("summary-deleted")

    # Dismissed, the confirm changes nothing.
    page.once("dialog", lambda d: d.dismiss())
    page.locator("#scenes-delete-all").click()
    expect(cards).to_have_count(3)
    asked.clear()
    page.once("dialog", lambda d: (asked.append(d.message), d.accept()))
    page.locator("#scenes-delete-all").click()
    expect(page.locator("#scenes-message")).to_contain_text(
        "Deleted 3 scenes. The chat, its messages and its settings are untouched."
    )
    expect(page.locator("#scenes-empty")).to_be_visible()
    assert asked and "Delete all 3 scenes" in asked[0]
    with live.session() as s:
        assert s.exec(select(Scene).where(Scene.chat_id == chat_id)).all() == []
        assert s.get(Chat, chat_id) is not None
        assert len(s.exec(select(Message).where(Message.chat_id == chat_id)).all()) == 8
    shot("all-deleted")


def test_a_bad_import_file_changes_nothing_and_says_why(page: Page, live, shot):
    chat_id = _chat(live)
    bridge, _, _ = _seed(live, chat_id)
    with live.client() as c:
        exported = c.get(f"/api/chats/{chat_id}/scenes/export").content
    _open(page, live, chat_id)
    page.locator(".scenes-import > summary").click()
    form = page.locator("#scenes-import-form")
    form.locator("input[type=file]").set_input_files(
        {"name": "broken.json", "mimeType": "application/json", "buffer": b'{"type": "something else"}'}
    )
    form.get_by_role("button", name="Import").click()
    expect(page.locator("#scenes-error")).to_contain_text(
        'This is not a Sugo scenes file (expected type "sugo_scenes", version 1). Nothing was changed.'
    )
    expect(page.locator("#scene-list .scene-card")).to_have_count(3)
    with live.session() as s:
        assert len(s.exec(select(Scene).where(Scene.chat_id == chat_id)).all()) == 3
    assert _scene(live, bridge).summary == "Aria and the user crossed the BRIDGE by rope."
    shot("import-refused")

    # A good file without Replace is refused too (the chat has scenes); with Replace it takes their place.
    form = page.locator("#scenes-import-form")
    form.locator("input[type=file]").set_input_files(
        {"name": "road.sugo.json", "mimeType": "application/json", "buffer": exported}
    )
    form.get_by_role("button", name="Import").click()
    expect(page.locator("#scenes-error")).to_contain_text("This chat already has 3 scenes")
    form = page.locator("#scenes-import-form")
    form.locator("input[type=file]").set_input_files(
        {"name": "road.sugo.json", "mimeType": "application/json", "buffer": exported}
    )
    form.locator("input[name=replace]").check()
    form.get_by_role("button", name="Import").click()
    expect(page.locator("#scenes-message")).to_have_text("Imported 3 scenes, in place of 3.")
    expect(page.locator("#scene-list .scene-card")).to_have_count(3)
    expect(page.locator("#scene-list .scene-card").nth(0)).to_contain_text(
        "Aria and the user crossed the BRIDGE by rope."
    )


def test_markup_in_a_summary_or_a_message_stays_text(page: Page, live, shot, no_script_runs):
    chat_id = _chat(live)
    evil = '<script>alert("summary")</script><img src=x onerror="alert(\'img\')">'
    scene_id = stored_scene(
        live,
        chat_id,
        [("You", "<img src=y onerror=\"alert('msg')\">"), ("Aria", "Fine.")],
        state="written",
        summary=evil,
        participants=['<b onmouseover="alert(1)">Aria</b>'],
    )
    _open(page, live, chat_id)
    card = page.locator(f"#scene-{scene_id}")
    expect(card.locator(".scene-summary")).to_have_text(evil)
    expect(card).to_contain_text('<b onmouseover="alert(1)">Aria</b>')
    card.locator(".scene-source > summary").click()
    expect(card.locator(".scene-message").nth(0)).to_contain_text("<img src=y onerror=")
    expect(card.locator("img")).to_have_count(0)
    expect(card.locator("script")).to_have_count(0)
    card.get_by_role("button", name="Edit summary").click()
    expect(card.locator("textarea[name=summary]")).to_have_value(evil)
    shot("markup-inert")
    assert no_script_runs == []
