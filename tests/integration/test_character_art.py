"""Issue 29, character art and expressions over HTTP: the character page's uploads (art, expression
pictures one by one or by SillyTavern's file names; refusals store nothing), the chat page's picture
beside the story, and the [expression: name] tag: asked for only when the chat turns it on, never
shown, never sent back, and picking the expression's picture."""

import html
import io

from PIL import Image
from sqlalchemy import text

from tests.conftest import add_character, add_connection, new_chat, read_sse
from tests.support.model_server import Reply

HX = {"HX-Request": "true"}


def _png(colour: str = "red", size: tuple[int, int] = (40, 60)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, colour).save(out, "PNG")
    return out.getvalue()


def _images(sugo) -> int:
    with sugo.engine.connect() as conn:
        return conn.execute(text("SELECT count(*) FROM image")).scalar_one()


def _character(sugo, character_id: int) -> tuple[int | None, dict]:
    with sugo.engine.connect() as conn:
        art_id, expressions = conn.execute(
            text("SELECT art_id, expressions FROM character WHERE id = :i"), {"i": character_id}
        ).one()
    if isinstance(expressions, str):
        import json

        expressions = json.loads(expressions)
    return art_id, expressions


def _send(api, chat_id: int, content: str) -> list:
    r = api.post(f"/api/chats/{chat_id}/generate", json={"action": "send", "content": content})
    assert r.status_code == 200, r.text
    return read_sse(r)


def _figure(page: str) -> str:
    start = page.index('id="character-art"')
    return page[start : page.index("</figure>", start)]


class TestArtUpload:
    def test_art_is_stored_shown_and_removed(self, api, sugo):
        char = add_character(api)
        r = api.post(f"/characters/{char['id']}/art", files={"art": ("art.png", _png())}, headers=HX)
        assert r.status_code == 200, r.text
        art_id, _ = _character(sugo, char["id"])
        assert art_id and f'src="/images/{art_id}"' in r.text and "<html" not in r.text
        assert api.get(f"/images/{art_id}").headers["content-type"] == "image/png"
        r = api.post(f"/characters/{char['id']}/art/delete", headers=HX)
        assert r.status_code == 200 and _character(sugo, char["id"])[0] is None
        assert 'id="art-none"' in r.text

    def test_a_file_that_is_no_picture_is_refused_and_stores_nothing(self, api, sugo):
        char = add_character(api)
        before = _images(sugo)
        r = api.post(
            f"/characters/{char['id']}/art", files={"art": ("art.png", b"not a picture")}, headers=HX
        )
        assert r.status_code == 400 and "not a picture Sugo can read" in html.unescape(r.text)
        assert r.headers["HX-Retarget"] == "#toasts"
        assert _images(sugo) == before and _character(sugo, char["id"])[0] is None


class TestExpressionUpload:
    def test_one_picture_for_a_chosen_name(self, api, sugo):
        char = add_character(api)
        r = api.post(
            f"/characters/{char['id']}/expressions",
            data={"name": "joy"},
            files={"files": ("x.png", _png())},
            headers=HX,
        )
        assert r.status_code == 200, r.text
        assert set(_character(sugo, char["id"])[1]) == {"joy"}
        assert 'data-expression="joy"' in r.text

    def test_several_files_are_named_by_their_file_names(self, api, sugo):
        char = add_character(api)
        files = [("files", ("joy.png", _png("yellow"))), ("files", ("Anger.PNG", _png("red")))]
        r = api.post(f"/characters/{char['id']}/expressions", data={"name": ""}, files=files, headers=HX)
        assert r.status_code == 200, r.text
        assert set(_character(sugo, char["id"])[1]) == {"joy", "anger"}
        # Listed in SillyTavern's order (anger before joy), each with its remove button.
        assert r.text.index('data-expression="anger"') < r.text.index('data-expression="joy"')
        r = api.post(f"/characters/{char['id']}/expressions/anger/delete", headers=HX)
        assert r.status_code == 200 and set(_character(sugo, char["id"])[1]) == {"joy"}

    def test_an_unknown_name_refuses_the_whole_batch(self, api, sugo):
        char = add_character(api)
        before = _images(sugo)
        files = [("files", ("joy.png", _png())), ("files", ("smug.png", _png()))]
        r = api.post(f"/characters/{char['id']}/expressions", files=files, headers=HX)
        assert r.status_code == 400
        said = html.unescape(r.text)
        assert "“smug.png”: its name is not an expression name, so nothing was stored" in said
        assert "Name each file after one in the Expression list" in said
        assert _images(sugo) == before and _character(sugo, char["id"])[1] == {}

    def test_a_bad_picture_in_a_batch_stores_none_of_it(self, api, sugo):
        char = add_character(api)
        before = _images(sugo)
        files = [("files", ("joy.png", _png())), ("files", ("anger.png", b"not a picture"))]
        r = api.post(f"/characters/{char['id']}/expressions", files=files, headers=HX)
        assert r.status_code == 400 and _images(sugo) == before
        assert _character(sugo, char["id"])[1] == {}


def _expressive_chat(api, models, *, on: bool) -> tuple[dict, dict, dict]:
    add_connection(api, models)
    char = add_character(api)
    api.post(f"/characters/{char['id']}/art", files={"art": ("art.png", _png("blue"))}, headers=HX)
    files = [("files", ("joy.png", _png("yellow"))), ("files", ("anger.png", _png("red")))]
    api.post(f"/characters/{char['id']}/expressions", files=files, headers=HX)
    chat = new_chat(api, [char["id"]])
    if on:
        api.put(f"/api/chats/{chat['id']}/options", json={"settings": {"expressions": True}})
    return char, chat, api.get(f"/api/characters/{char['id']}").json()


class TestChatPage:
    def test_the_page_opens_with_the_characters_art(self, api, models, sugo):
        char, chat, _ = _expressive_chat(api, models, on=False)
        art_id, _ = _character(sugo, char["id"])
        figure = _figure(api.get(f"/chats/{chat['id']}").text)
        assert (
            f'src="/images/{art_id}"' in figure and 'aria-hidden="true"' in figure and "hidden>" not in figure
        )

    def test_a_character_with_no_picture_shows_none(self, api, models):
        add_connection(api, models)
        chat = new_chat(api, [add_character(api)["id"]])
        assert "src=" not in _figure(api.get(f"/chats/{chat['id']}").text)

    def test_a_tagged_reply_shows_no_tag_and_its_expression(self, api, models, background_held):
        sugo = background_held
        char, chat, _ = _expressive_chat(api, models, on=True)
        _, pictures = _character(sugo, char["id"])
        models.script(Reply(text="*She beams.* We made it!\n\n[expression: anger]"))
        _send(api, chat["id"], "We won!")
        request = models.last_request.json["messages"]
        asked = [m["content"] for m in request if "[expression: name]" in m["content"]]
        assert asked and "one of: anger, joy." in asked[0]
        page = api.get(f"/chats/{chat['id']}").text
        assert "[expression" not in page
        assert f'src="/images/{pictures["anger"]}"' in _figure(page)  # the tag wins over the word rule
        assert f'data-art="/images/{pictures["anger"]}"' in page
        assert "We made it!" in api.get("/").text and "[expression" not in api.get("/").text  # the chat list
        # The model never reads its tag back.
        models.script(Reply(text="Onwards."))
        _send(api, chat["id"], "And now?")
        history = " ".join(str(m["content"]) for m in models.last_request.json["messages"])
        assert "We made it!" in history and "[expression: anger]" not in history

    def test_without_a_tag_the_word_rule_picks(self, api, models, background_held):
        sugo = background_held
        char, chat, _ = _expressive_chat(api, models, on=True)
        _, pictures = _character(sugo, char["id"])
        models.script(Reply(text="She smiles, happy to see you. :)"))
        _send(api, chat["id"], "Hi")
        assert f'src="/images/{pictures["joy"]}"' in _figure(api.get(f"/chats/{chat['id']}").text)

    def test_off_asks_for_no_tag_and_shows_the_art(self, api, models, background_held):
        sugo = background_held
        char, chat, _ = _expressive_chat(api, models, on=False)
        art_id, _ = _character(sugo, char["id"])
        models.script(Reply(text="She smiles. [expression: joy]"))
        _send(api, chat["id"], "Hi")
        assert not any("[expression" in str(m["content"]) for m in models.last_request.json["messages"])
        page = api.get(f"/chats/{chat['id']}").text
        assert "[expression" not in page and f'src="/images/{art_id}"' in _figure(page)

    def test_chat_settings_switch_the_expressions(self, api, models):
        _, chat, _ = _expressive_chat(api, models, on=False)
        panel = api.get(f"/chats/{chat['id']}/settings", headers=HX).text
        assert 'name="expressions"' in panel
        assert api.get(f"/api/chats/{chat['id']}").json()["settings"]["expressions"] is False


class TestApi:
    def test_the_json_twins(self, api, sugo):
        char = add_character(api)
        r = api.post(f"/api/characters/{char['id']}/art", files={"file": ("a.png", _png())})
        assert r.status_code == 200 and r.json()["art_url"].startswith("/images/")
        files = [("files", ("joy.png", _png())), ("files", ("fear.png", _png()))]
        r = api.post(f"/api/characters/{char['id']}/expressions", files=files)
        assert r.status_code == 200 and set(r.json()["expression_urls"]) == {"joy", "fear"}
        r = api.post(f"/api/characters/{char['id']}/expressions", data={"name": "grief"}, files=[files[0]])
        assert set(r.json()["expression_urls"]) == {"joy", "fear", "grief"}
        before = _images(sugo)
        r = api.post(f"/api/characters/{char['id']}/expressions", files=[("files", ("odd.png", _png()))])
        assert r.status_code == 400 and "odd.png" in r.json()["detail"] and _images(sugo) == before
        assert api.delete(f"/api/characters/{char['id']}/expressions/fear").json()[
            "expression_urls"
        ].keys() == {
            "joy",
            "grief",
        }
        assert api.delete(f"/api/characters/{char['id']}/art").json()["art_url"] is None


class TestPromptUnchangedWhenOff:
    def test_on_without_pictures_sends_the_same_prompt_as_off(self, api, models):
        add_connection(api, models)
        char = add_character(api)
        chat = new_chat(api, [char["id"]])
        off = api.get(f"/api/chats/{chat['id']}/prompt").json()["messages"]
        api.put(f"/api/chats/{chat['id']}/options", json={"settings": {"expressions": True}})
        assert api.get(f"/api/chats/{chat['id']}/prompt").json()["messages"] == off
        files = [("files", ("joy.png", _png()))]
        api.post(f"/characters/{char['id']}/expressions", files=files, headers=HX)
        on = api.get(f"/api/chats/{chat['id']}/prompt").json()["messages"]
        assert on != off and "one of: joy." in on[-1]["content"]
        api.put(f"/api/chats/{chat['id']}/options", json={"settings": {"expressions": False}})
        assert api.get(f"/api/chats/{chat['id']}/prompt").json()["messages"] == off

    def test_the_settings_form_turns_it_on_and_off(self, api, models):
        add_connection(api, models)
        chat = new_chat(api, [add_character(api)["id"]])
        form = {"name": "A chat", "expressions": "true"}
        r = api.post(f"/chats/{chat['id']}/settings", data=form, headers=HX)
        assert r.status_code == 200, r.text
        assert api.get(f"/api/chats/{chat['id']}").json()["settings"]["expressions"] is True
        api.post(f"/chats/{chat['id']}/settings", data={"name": "A chat"}, headers=HX)
        assert api.get(f"/api/chats/{chat['id']}").json()["settings"]["expressions"] is False
