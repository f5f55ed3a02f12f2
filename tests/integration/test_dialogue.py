"""Dialogue styled as dialogue (issue 29) over HTTP: the chat page marks quoted speech and names each
message's speaker, a chat's speakers.css holds only checked colours, and the character and persona
forms set (or clear) a speech colour."""

from __future__ import annotations

import html
import re

import lxml.html
from sqlalchemy import text

from tests.conftest import add_character, new_chat

HX = {"HX-Request": "true"}
RULE = re.compile(
    r'(\[data-theme="light"\] )?(\.msg\[data-speaker="(c\d+|u)"\]\{--speech'
    r'|\.speaker-mark\[data-name="[0-9a-f]{8}"\]\{color|\.dialogue\[data-name="[0-9a-f]{8}"\]\{--speech)'
    r":#[0-9a-f]{6}\}"
)


def _page(api, chat_id: int):
    r = api.get(f"/chats/{chat_id}")
    assert r.status_code == 200, r.text[:300]
    return lxml.html.fromstring(r.text)


def _link(page) -> str:
    (href,) = page.xpath('//head/link[@rel="stylesheet"][contains(@href, "speakers.css")]/@href')
    return href


def _stylesheet(api, page):
    return api.get(_link(page))


def _speech(node) -> list[str]:
    return [s.text_content() for s in node.xpath('.//span[@class="dialogue"]')]


def _rules(css: str) -> list[str]:
    rules = [line for line in css.splitlines() if line and not line.startswith("/*")]
    assert all(RULE.fullmatch(rule) for rule in rules), css
    return rules


def _character_form(char: dict, **fields) -> dict:
    return {
        "name": char["name"],
        "description": char["description"],
        "first_mes": char["first_mes"],
        **fields,
    }


def test_the_chat_page_marks_speech_and_names_each_speaker(api):
    char = add_character(api, "Vex", first_mes='*She smiles.* "Hello," she says. It\'s late.')
    persona = api.post("/api/personas", json={"name": "Rowan"}).json()
    chat = new_chat(api, [char["id"]], persona_id=persona["id"])
    for content in (
        '"<img src=x onerror=alert(1)>" and "<style>body{display:none}</style>"',
        '"</span><script>alert(1)</script>" `"code"`',
    ):
        assert api.post(f"/api/chats/{chat['id']}/messages", json={"content": content}).status_code == 201

    page = _page(api, chat["id"])
    greeting, *mine = page.xpath('//article[contains(@class, "msg ")]')
    assert greeting.get("data-speaker") == f"c{char['id']}"
    assert [m.get("data-speaker") for m in mine] == ["u", "u"]
    (words,) = greeting.xpath('.//div[@class="msg-text"]')
    assert _speech(words) == ['"Hello,"']
    assert words.xpath(".//em")[0].text_content() == "She smiles." and "It's late." in words.text_content()

    first, second = (m.xpath('.//div[@class="msg-text"]')[0] for m in mine)
    assert _speech(first) == ['"<img src=x onerror=alert(1)>"', '"<style>body{display:none}</style>"']
    assert _speech(second) == ['"</span><script>alert(1)</script>"']
    assert second.xpath(".//code")[0].text_content() == '"code"'
    assert not second.xpath(".//code//span | .//span//code")
    for message in mine:
        assert not message.xpath('.//div[@class="msg-text"]//*[self::img or self::style or self::script]')


def test_speakers_css_serves_only_checked_colours_and_is_cached_by_version(api, sugo):
    aria = add_character(api, "Aria", colour="#FF8800")
    bard = add_character(api, "Bard")
    persona = api.post("/api/personas", json={"name": "Rowan", "colour": "#336699"}).json()
    chat = new_chat(api, [aria["id"], bard["id"]], persona_id=persona["id"])
    # A colour that got into the database some other way (an old import, a hand edit) is never written.
    with sugo.engine.begin() as conn:
        conn.execute(text("UPDATE character SET colour = 'red;}*{' WHERE id = :id"), {"id": bard["id"]})

    page = _page(api, chat["id"])
    r = _stylesheet(api, page)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/css")
    assert "immutable" in r.headers["cache-control"]
    rules = _rules(r.text)
    assert f'.msg[data-speaker="c{aria["id"]}"]{{--speech:#ff8800}}' in rules
    assert '[data-theme="light"] .msg[data-speaker="u"]{--speech:#336699}' in rules
    assert sum(f'"c{bard["id"]}"' in rule for rule in rules) == 2  # automatic, in both themes
    assert "red" not in r.text

    stale = api.get(f"/chats/{chat['id']}/speakers.css?v=00000000")
    assert stale.headers["cache-control"] == "no-cache" and stale.text == r.text
    assert api.get("/chats/999999/speakers.css").status_code == 404


def test_a_colour_set_in_the_character_form_shows_in_the_chat(api):
    char = add_character(api, "Vex")
    chat = new_chat(api, [char["id"]])
    before = _link(_page(api, chat["id"]))

    saved = api.post(f"/characters/{char['id']}", data=_character_form(char, colour="#12AB34"), headers=HX)
    assert saved.status_code == 200, saved.text[:300]
    assert api.get(f"/api/characters/{char['id']}").json()["colour"] == "#12ab34"
    form = lxml.html.fromstring(api.get(f"/characters/{char['id']}").text)
    assert form.xpath('//input[@type="color"][@name="colour"]/@value') == ["#12ab34"]
    assert form.xpath('//input[@name="colour_auto"]')[0].get("checked") is None

    page = _page(api, chat["id"])
    after = _link(page)
    assert after != before
    assert f'.msg[data-speaker="c{char["id"]}"]{{--speech:#12ab34}}' in _rules(_stylesheet(api, page).text)

    # "Automatic" ticked clears it, whatever the colour input still holds.
    form_data = _character_form(char, colour="#12ab34", colour_auto="true")
    assert api.post(f"/characters/{char['id']}", data=form_data, headers=HX).status_code == 200
    assert api.get(f"/api/characters/{char['id']}").json()["colour"] is None
    # A form or an API update that leaves the colour out keeps it.
    api.post(f"/characters/{char['id']}", data=_character_form(char, colour="#abcdef"), headers=HX)
    assert api.post(f"/characters/{char['id']}", data=_character_form(char), headers=HX).status_code == 200
    assert api.get(f"/api/characters/{char['id']}").json()["colour"] == "#abcdef"
    api.post(f"/characters/{char['id']}", data=_character_form(char, colour="#abcdef"), headers=HX)
    body = {
        k: v for k, v in api.get(f"/api/characters/{char['id']}").json().items() if k in _character_form(char)
    }
    assert api.put(f"/api/characters/{char['id']}", json=body).status_code == 200
    assert api.get(f"/api/characters/{char['id']}").json()["colour"] == "#abcdef"


def test_a_bad_colour_is_refused_with_a_sentence(api):
    char = add_character(api, "Vex")
    persona = api.post("/api/personas", json={"name": "Rowan"}).json()
    sentence = "A speech colour is written #rrggbb"
    for bad in ("red", "#abc", "#12345g", "#000000;}body{display:none}"):
        r = api.post(f"/characters/{char['id']}", data=_character_form(char, colour=bad), headers=HX)
        assert r.status_code == 400 and sentence in html.unescape(r.text), r.text[:300]
        r = api.post(f"/personas/{persona['id']}", data={"name": "Rowan", "colour": bad}, headers=HX)
        assert r.status_code == 400 and sentence in html.unescape(r.text), r.text[:300]
        r = api.post("/api/characters", json={"name": "X", "colour": bad})
        assert r.status_code in (400, 422) and sentence in r.text, r.text
    assert api.get(f"/api/characters/{char['id']}").json()["colour"] is None
    assert api.get(f"/api/personas/{persona['id']}").json()["colour"] is None


def test_the_persona_form_sets_the_users_colour(api):
    persona = api.post("/api/personas", json={"name": "Rowan"}).json()
    char = add_character(api, "Vex")
    chat = new_chat(api, [char["id"]], persona_id=persona["id"])
    r = api.post(f"/personas/{persona['id']}", data={"name": "Rowan", "colour": "#2255AA"}, headers=HX)
    assert r.status_code == 200, r.text[:300]
    assert api.get(f"/api/personas/{persona['id']}").json()["colour"] == "#2255aa"
    assert api.post(f"/personas/{persona['id']}", data={"name": "Rowan"}, headers=HX).status_code == 200
    assert api.get(f"/api/personas/{persona['id']}").json()["colour"] == "#2255aa"  # a form without it
    listed = lxml.html.fromstring(api.get("/personas").text)
    assert listed.xpath('//form[contains(@class, "persona-card")]//input[@name="colour"]/@value') == [
        "#2255aa"
    ]
    rules = _rules(_stylesheet(api, _page(api, chat["id"])).text)
    assert '[data-theme="light"] .msg[data-speaker="u"]{--speech:#2255aa}' in rules
    r = api.post(f"/personas/{persona['id']}", data={"name": "Rowan", "colour_auto": "true"}, headers=HX)
    assert api.get(f"/api/personas/{persona['id']}").json()["colour"] is None
    assert not [rule for rule in _rules(_stylesheet(api, _page(api, chat["id"])).text) if '"u"' in rule]
