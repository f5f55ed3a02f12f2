"""Backgrounds over HTTP (issue 29): uploads of each picture format chosen for the chat at once, a
50-megapixel picture and a file that is no picture refused with the reason and nothing stored, the
chat page's backdrop (the chat's own, else its character's default), and SillyTavern's
custom_background imported (an uploaded name resolves, an unknown one is kept and resolves once
uploaded) and exported back."""

from __future__ import annotations

import io
import json

import lxml.html
from PIL import Image as PILImage
from sqlmodel import func, select

from app.backgrounds.models import Background
from app.images.models import Image
from tests.conftest import add_character, new_chat

HX = {"HX-Request": "true"}
BACKDROP = "//*[@id='chat-backdrop']"
BACKDROP_OOB = "//*[@id='chat-backdrop'][@hx-swap-oob]"
SETTINGS = {"name": "Aria", "recent_message_limit": "40"}


def _one(text: str, xpath: str):
    found = lxml.html.fragment_fromstring(text, create_parent="div").xpath(xpath)
    return found[0] if found else None


def _picture(fmt: str, size: tuple[int, int] = (64, 40), mode: str = "RGB") -> bytes:
    out = io.BytesIO()
    PILImage.new(mode, size, (40, 60, 90) if mode == "RGB" else 1).save(out, format=fmt)
    return out.getvalue()


def _counts(sugo) -> tuple[int, int]:
    with sugo.session() as s:
        return (
            s.exec(select(func.count()).select_from(Background)).one(),
            s.exec(select(func.count()).select_from(Image)).one(),
        )


def _settings(api, chat_id: int) -> dict:
    return api.get(f"/api/chats/{chat_id}").json()["settings"]


def _upload(api, chat_id: int, name: str, raw: bytes):
    return api.post(f"/chats/{chat_id}/backgrounds", files={"background_file": (name, raw)}, headers=HX)


def _chat(api) -> int:
    return new_chat(api, [add_character(api, "Aria")["id"]])["id"]


def test_each_picture_format_uploads_and_is_chosen_for_the_chat(api, sugo):
    chat_id = _chat(api)
    for fmt, name in (("PNG", "a.png"), ("JPEG", "b.jpg"), ("WEBP", "c.webp"), ("GIF", "d.gif")):
        r = _upload(api, chat_id, name, _picture(fmt))
        assert r.status_code == 200, r.text
        assert "<html" not in r.text
        checked = _one(r.text, "//*[@id='background-section']//input[@name='background'][@checked]")
        background_id = int(checked.get("value").removeprefix("image:"))
        assert _settings(api, chat_id)["background"] == f"image:{background_id}"
        assert _one(r.text, f"//label[input[@value='image:{background_id}']]").text_content().strip() == name
        picture = api.get(_one(r.text, BACKDROP_OOB + "/img").get("src"))
        assert picture.status_code == 200 and picture.headers["content-type"] == f"image/{fmt.lower()}"
    assert _counts(sugo) == (4, 4)


def test_a_50_megapixel_picture_is_refused_with_the_reason_and_nothing_stored(api, sugo):
    chat_id = _chat(api)
    big = _picture("PNG", (10_000, 5_000), mode="1")  # one colour: a small file that claims 50 MP
    assert len(big) < 1_000_000
    before = _counts(sugo)
    r = _upload(api, chat_id, "huge.png", big)
    assert r.status_code == 400
    error = _one(r.text, "//*[@id='background-section']//*[@id='background-error']").text_content()
    assert "10000 × 5000 pixels" in error and "40 megapixels" in error
    assert _counts(sugo) == before
    assert _settings(api, chat_id).get("background", "") == ""


def test_a_file_that_is_no_picture_is_refused_and_nothing_stored(api, sugo):
    chat_id = _chat(api)
    before = _counts(sugo)
    r = _upload(api, chat_id, "notes.png", b"Just some text, not a picture.")
    assert r.status_code == 400
    assert "not a picture Sugo can read" in _one(r.text, "//*[@id='background-error']").text_content()
    r = api.post(f"/chats/{chat_id}/backgrounds", files={"other": ("a", b"a")}, headers=HX)
    assert r.status_code == 400 and "Choose a picture" in r.text
    assert _counts(sugo) == before


def test_a_shipped_background_saved_in_chat_settings_shows_behind_the_messages(api):
    chat_id = _chat(api)
    assert _one(api.get(f"/chats/{chat_id}").text, BACKDROP).get("hidden") is not None
    panel = api.get(f"/chats/{chat_id}/settings", headers=HX).text
    values = [
        i.get("value")
        for i in lxml.html.fragment_fromstring(panel, create_parent="div").xpath(
            "//input[@name='background']"
        )
    ]
    assert values[:3] == ["none", "", "builtin:dusk"] and len(values) == 8
    r = api.post(f"/chats/{chat_id}/settings", data={**SETTINGS, "background": "builtin:forest"}, headers=HX)
    assert r.status_code == 200, r.text
    assert _one(r.text, BACKDROP_OOB + "/img").get("src") == "/static/backgrounds/forest.svg"
    page = api.get(f"/chats/{chat_id}").text
    assert _one(page, BACKDROP + "/img").get("src") == "/static/backgrounds/forest.svg"
    assert api.get("/static/backgrounds/forest.svg").headers["content-type"].startswith("image/svg+xml")
    # A form without the section keeps the choice; a value of no known form is refused.
    assert api.post(f"/chats/{chat_id}/settings", data=SETTINGS, headers=HX).status_code == 200
    assert _settings(api, chat_id)["background"] == "builtin:forest"
    bad = api.post(f"/chats/{chat_id}/settings", data={**SETTINGS, "background": "http://x"})
    assert bad.status_code == 400 and "The background must be" in bad.json()["detail"]
    assert _settings(api, chat_id)["background"] == "builtin:forest"


def test_a_chat_without_its_own_follows_its_characters_default_and_none_turns_it_off(api):
    aria = add_character(api, "Aria")
    chat_id = new_chat(api, [aria["id"]])["id"]
    r = api.post(f"/characters/{aria['id']}", data={"name": "Aria", "background": "builtin:sea"}, headers=HX)
    assert r.status_code == 200, r.text
    edit = api.get(f"/characters/{aria['id']}").text
    assert _one(edit, "//*[@id='character-background']//option[@selected]").get("value") == "builtin:sea"
    page = api.get(f"/chats/{chat_id}").text
    assert _one(page, BACKDROP + "/img").get("src") == "/static/backgrounds/sea.svg"
    api.post(f"/chats/{chat_id}/settings", data={**SETTINGS, "background": "none"})
    page = api.get(f"/chats/{chat_id}").text
    assert _one(page, BACKDROP).get("hidden") is not None and _one(page, BACKDROP + "/img") is None
    refused = api.post(f"/characters/{aria['id']}", data={"name": "Aria", "background": "st:x.png"})
    assert refused.status_code == 400 and "default background" in refused.json()["detail"]


def test_deleting_an_upload_leaves_its_chats_with_none(api, sugo):
    chat_id = _chat(api)
    _upload(api, chat_id, "sky.png", _picture("PNG"))
    background_id = int(_settings(api, chat_id)["background"].removeprefix("image:"))
    r = api.post(f"/chats/{chat_id}/backgrounds/{background_id}/delete", headers=HX)
    assert r.status_code == 200
    assert _one(r.text, BACKDROP_OOB).get("hidden") is not None
    assert _counts(sugo) == (0, 0)
    assert _one(api.get(f"/chats/{chat_id}").text, BACKDROP + "/img") is None


def _st_chat(background: str | None) -> bytes:
    meta = {} if background is None else {"custom_background": background}
    lines = [
        {
            "user_name": "Rowan",
            "character_name": "Aria",
            "create_date": "2024-05-01@21h13m05s",
            "chat_metadata": meta,
        },
        {
            "name": "Aria",
            "is_user": False,
            "is_system": False,
            "send_date": "2024-05-01T21:13:05.000Z",
            "mes": "Hi.",
        },
    ]
    return ("\n".join(json.dumps(line) for line in lines) + "\n").encode()


def _import(api, raw: bytes) -> int:
    r = api.post("/api/chats/import", files={"file": ("Aria.jsonl", raw)})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def _exported_background(api, chat_id: int) -> str | None:
    header = json.loads(api.get(f"/api/chats/{chat_id}/export").text.splitlines()[0])
    return header["chat_metadata"].get("custom_background")


def test_sillytavern_backgrounds_come_in_by_file_name_and_go_back_out(api):
    helper_chat = _chat(api)
    _upload(api, helper_chat, "Forest Night.jpg", _picture("JPEG"))
    uploaded = int(_settings(api, helper_chat)["background"].removeprefix("image:"))

    known = _import(api, _st_chat('url("backgrounds/forest%20night.JPG")'))
    assert _settings(api, known)["background"] == f"image:{uploaded}"
    assert _exported_background(api, known) == 'url("backgrounds/forest%20night.JPG")'  # the same file
    api.post(f"/chats/{known}/settings", data={**SETTINGS, "background": "builtin:tavern"})
    assert _exported_background(api, known) == 'url("backgrounds/tavern.svg")'

    shipped = _import(api, _st_chat('url("backgrounds/dusk.svg")'))
    assert _settings(api, shipped)["background"] == "builtin:dusk"

    original = 'url("backgrounds/Castle Gate.png")'
    unknown = _import(api, _st_chat(original))
    assert _settings(api, unknown)["background"] == "st:Castle Gate.png"
    panel = api.get(f"/chats/{unknown}/settings", headers=HX).text
    assert "Castle Gate.png" in _one(panel, "//*[@id='background-missing']").text_content()
    assert _one(api.get(f"/chats/{unknown}").text, BACKDROP + "/img") is None
    assert _exported_background(api, unknown) == original  # unchanged: written back as it came

    # A file of that name uploaded (from any chat) shows in the imported chat.
    _upload(api, helper_chat, "castle gate.png", _picture("PNG"))
    assert _one(api.get(f"/chats/{unknown}").text, BACKDROP + "/img").get("src").startswith("/images/")
    panel = api.get(f"/chats/{unknown}/settings", headers=HX).text
    assert _one(panel, "//*[@id='background-missing']") is None
    assert (
        _one(panel, "//label[input[@value='st:Castle Gate.png'][@checked]]/img")
        .get("src")
        .startswith("/images/")
    )

    none = _import(api, _st_chat(None))
    assert _settings(api, none).get("background", "") == ""
    assert _exported_background(api, none) is None
    api.post(f"/chats/{none}/settings", data={**SETTINGS, "background": "none"})
    assert _exported_background(api, none) is None


def test_the_json_twin_lists_uploads_refuses_and_deletes(api, sugo):
    listed = api.get("/api/backgrounds").json()
    assert [b["choice"] for b in listed][:2] == ["builtin:dusk", "builtin:forest"] and len(listed) == 6
    r = api.post("/api/backgrounds", files={"file": ("Harbour.webp", _picture("WEBP"))})
    assert r.status_code == 201, r.text
    added = r.json()
    assert added["name"] == "Harbour.webp" and added["choice"].startswith("image:") and not added["shipped"]
    assert api.get(added["url"]).headers["content-type"] == "image/webp"
    before = _counts(sugo)
    huge = api.post(
        "/api/backgrounds", files={"file": ("huge.png", _picture("PNG", (10_000, 5_000), mode="1"))}
    )
    assert huge.status_code == 400 and "40 megapixels" in huge.json()["detail"]
    text = api.post("/api/backgrounds", files={"file": ("a.gif", b"GIF? no.")})
    assert text.status_code == 400 and "not a picture" in text.json()["detail"]
    assert _counts(sugo) == before
    chat_id = _chat(api)
    r = api.put(f"/api/chats/{chat_id}/options", json={"settings": {"background": added["choice"]}})
    assert r.status_code == 200 and r.json()["settings"]["background"] == added["choice"]
    bad = api.put(f"/api/chats/{chat_id}/options", json={"settings": {"background": "url(x)"}})
    assert bad.status_code == 422
    assert api.delete(f"/api/backgrounds/{added['choice'].removeprefix('image:')}").status_code == 204
    assert _counts(sugo) == (0, 0)
    assert api.delete("/api/backgrounds/999").status_code == 404
