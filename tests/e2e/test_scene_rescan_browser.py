"""Issue 14, Chat Settings → Advanced Memory → Re-scan scenes, with the test model server as the helper on a
30-message chat whose scenes 1–8 and 9–18 are closed: the open scene as the default range, a re-scan whose
new end closes a scene (its step while it runs, then the scene written), and a hand-edited summary that
stops the re-scan with its sentence and nothing changed. Desktop and phone."""

import threading

from playwright.sync_api import Page, expect

from app.memory.scenes.models import Scene, SceneState
from tests.e2e.test_scenes_settings_browser import _chat, _open, _scenes
from tests.integration.test_scene_prepare import _checks, _ends, _recap
from tests.support.model_server import Reply


def _closed(live, chat_id: int, *, manual: bool = False) -> None:
    """Scenes 1–8 and 9–18 closed and written (the second edited by hand when `manual`)."""
    with live.client() as c:
        ids = [m["id"] for m in c.get(f"/api/chats/{chat_id}/messages").json() if m["kind"] == "message"]
    with live.session() as s:
        for k, (a, b) in enumerate(((1, 8), (9, 18)), 1):
            summary = (
                "Aria crossed the old bridge, as I wrote it myself." if manual and k == 2 else f"Recap {k}."
            )
            s.add(
                Scene(
                    chat_id=chat_id,
                    first_message_id=ids[a - 1],
                    last_message_id=ids[b - 1],
                    state="written",
                    summary=summary,
                    participants=["Aria"],
                    manual=manual and k == 2,
                )
            )
        s.add(SceneState(chat_id=chat_id, checked_through_id=ids[17]))
        s.commit()


def test_re_scan_the_open_scene_and_a_new_end_closes_a_scene(page: Page, live, models, shot):
    chat_id = _chat(live, models, advanced=True)
    _closed(live, chat_id)
    panel = _open(page, live, chat_id).locator("#scenes-rescan")
    panel.scroll_into_view_if_needed()
    expect(panel.locator("#rescan-first")).to_have_value("19")
    expect(panel.locator("#rescan-last")).to_have_value("30")
    expect(panel.locator("#scenes-rescan-default")).to_contain_text(
        "Default: the open scene, messages 19–30."
    )
    expect(panel.locator("#scenes-rescan-start")).to_be_enabled()
    shot("defaults")
    # Windows 19–28 and 29–30; the first answer is held at the model until the page has shown its step.
    first = threading.Event()
    models.script(Reply(_ends([24]), gate=first), _ends([]), _recap(3))
    panel.locator("#scenes-rescan-start").click()
    expect(page.locator("#scenes-rescan-step")).to_contain_text("Finding scenes: messages 19–28 of 19–30")
    shot("running")
    first.set()
    done = page.locator("#scenes-rescan-done")
    expect(done).to_contain_text(
        "Re-scan of messages 19–30 finished. New scene: 3. 1 recap written.", timeout=20_000
    )
    assert _checks(models) == [(19, 28), (29, 30)]
    assert _scenes(live, chat_id) == [(1, 8, "written"), (9, 18, "written"), (19, 24, "written")]
    # The open scene is now 25–30: the next default.
    expect(page.locator("#rescan-first")).to_have_value("25")
    expect(page.locator("#scenes-prepare")).to_be_visible()  # the Prepare panel is still there above
    shot("done")


def test_a_hand_edited_summary_stops_the_re_scan_and_names_its_scene(page: Page, live, models, shot):
    chat_id = _chat(live, models, advanced=True)
    _closed(live, chat_id, manual=True)
    before = _scenes(live, chat_id)
    panel = _open(page, live, chat_id).locator("#scenes-rescan")
    panel.scroll_into_view_if_needed()
    panel.locator("#rescan-first").fill("9")
    panel.locator("#rescan-last").fill("18")
    models.script(_ends([12]))  # one window, 9–18: a new end inside the hand-edited scene 2
    panel.locator("#scenes-rescan-start").click()
    stopped = page.locator("#scenes-rescan-stopped")
    expect(stopped).to_contain_text(
        "Re-scan stopped: Scene 2 has a summary you edited: “Aria crossed the old bridge, "
        "as I wrote it myself.” The re-scan",
        timeout=20_000,
    )
    expect(stopped).to_contain_text("changed nothing")
    expect(stopped.get_by_role("link", name="Open scenes (Advanced Memory)")).to_have_attribute(
        "href", f"/chats/{chat_id}/scenes"
    )
    expect(page.locator("#rescan-first")).to_have_value("9")  # the range stays, to change it
    expect(page.locator("#rescan-last")).to_have_value("18")
    page.locator("#scenes-rescan").scroll_into_view_if_needed()
    shot("stopped")
    assert _scenes(live, chat_id) == before
