"""Issue 11 item 1 over real HTTP: the same lorebook twice. The Seraphina card carries the "Eldoria"
book that Eldoria.json holds too: whichever comes second does not make a twin (a card links the
book already stored; a file is named as already there, and comes in as "Eldoria (2)" only when
asked); a different book whose name is taken is renamed; an entry text two attached books share is
sent once, and Active Context says why the other was left out."""

import json
from pathlib import Path

from tests.conftest import add_connection, new_chat, read_sse

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ELDORIA = FIXTURES / "Eldoria.json"
SERAPHINA = FIXTURES / "default_Seraphina.png"
TWIN = "Eldoria is already in your lorebooks with the same entries."


def _card(api, name="Seraphina.png"):
    r = api.post("/api/characters/import", files={"file": (name, SERAPHINA.read_bytes())})
    assert r.status_code == 201, r.text
    return r.json()


def _book_file(api, raw=None, **params):
    return api.post(
        "/api/lorebooks/import", files={"file": ("Eldoria.json", raw or ELDORIA.read_bytes())}, params=params
    )


def test_a_card_whose_book_is_already_stored_links_that_book_and_says_so(api):
    stored = _book_file(api).json()
    char = _card(api)
    books = api.get("/api/lorebooks").json()
    assert [(b["id"], b["name"]) for b in books] == [(stored["id"], "Eldoria")]
    assert api.get(f"/api/lorebooks/{stored['id']}").json()["links"] == [{"character_id": char["id"]}]
    assert char["notes"] == [
        "Its lorebook “Eldoria” was already in your lorebooks with the same entries: "
        "Seraphina uses that one, no copy was made."
    ]
    # The page import says so on the character page it opens.
    page = api.post(
        "/characters/import",
        files={"file": ("S.png", SERAPHINA.read_bytes())},
        headers={"HX-Request": "true"},
    )
    opened = page.headers["HX-Redirect"]
    assert page.status_code == 204 and opened.endswith(f"?reused_book={stored['id']}")
    shown = api.get(opened).text
    assert (
        f'Its lorebook <a href="/lorebooks/{stored["id"]}">Eldoria</a> was already in your lorebooks with the same '
        "entries: Seraphina uses that one, no copy was made."
    ) in shown
    assert "was already in your lorebooks" not in api.get(opened.split("?")[0]).text
    assert api.get(opened.split("?")[0] + "?reused_book=nope").status_code == 200
    # The same card again: its book is the one already stored, now used by every such character.
    again = _card(api, "Seraphina again.png")
    assert len(api.get("/api/lorebooks").json()) == 1
    links = api.get(f"/api/lorebooks/{stored['id']}").json()["links"]
    assert (
        links[0] == {"character_id": char["id"]}
        and links[-1] == {"character_id": again["id"]}
        and len(links) == 3
    )
    # The card still exports with its book.
    card = api.get(f"/api/characters/{char['id']}/export", params={"format": "json", "spec": "v2"}).json()
    assert {e["comment"] for e in card["data"]["character_book"]["entries"]} >= {"shadowfang", "glade"}


def test_a_file_whose_entries_are_stored_is_named_and_copied_only_when_asked(api):
    char = _card(api)
    (card_book,) = api.get("/api/lorebooks").json()
    r = _book_file(api)
    assert r.status_code == 409 and r.json() == {"detail": TWIN, "existing_id": card_book["id"]}
    assert len(api.get("/api/lorebooks").json()) == 1
    copy = _book_file(api, copy="true")
    assert copy.status_code == 201 and copy.json()["name"] == "Eldoria (2)"
    assert sorted(b["name"] for b in api.get("/api/lorebooks").json()) == ["Eldoria", "Eldoria (2)"]
    assert _book_file(api, copy="true").json()["name"] == "Eldoria (3)"
    assert api.get(f"/api/lorebooks/{card_book['id']}").json()["links"] == [{"character_id": char["id"]}]


def test_the_page_names_the_twin_with_a_link_and_a_button_and_writes_nothing(api):
    _card(api)
    (card_book,) = api.get("/api/lorebooks").json()
    files = {"file": ("Eldoria.json", ELDORIA.read_bytes())}
    page = api.post("/lorebooks/import", files=files, headers={"HX-Request": "true"})
    assert page.status_code == 200 and "<html" not in page.text
    assert page.headers["HX-Retarget"] == "#import-result" and page.headers["HX-Reswap"] == "outerHTML"
    assert TWIN in page.text and f'href="/lorebooks/{card_book["id"]}"' in page.text
    assert 'name="copy" value="1"' in page.text and "Import a copy anyway" in page.text
    assert len(api.get("/api/lorebooks").json()) == 1
    copied = api.post("/lorebooks/import", files=files, data={"copy": "1"}, headers={"HX-Request": "true"})
    assert copied.status_code == 200 and "Eldoria (2)" in copied.text
    assert copied.headers["HX-Push-Url"] != "/lorebooks"


def test_a_different_book_with_a_taken_name_is_renamed(api):
    _book_file(api)
    other = {
        "name": "Eldoria",
        "entries": {"0": {"uid": 0, "key": ["moon"], "content": "Two moons rise.", "comment": "Moons"}},
    }
    r = _book_file(api, json.dumps(other).encode())
    assert r.status_code == 201 and r.json()["name"] == "Eldoria (2)"


def test_an_entry_two_attached_books_share_is_sent_once_and_the_other_is_named(api, models):
    add_connection(api, models)
    char = _card(api)
    copy = _book_file(api, copy="true").json()
    chat = new_chat(api, [char["id"]])
    assert api.put(f"/api/chats/{chat['id']}/lorebooks", json={"book_ids": [copy["id"]]}).status_code == 200
    read_sse(
        api.post(
            f"/api/chats/{chat['id']}/generate", json={"action": "send", "content": "What is a shadowfang?"}
        )
    )
    everything = "\n".join(m["content"] for m in models.last_request.json["messages"])
    assert everything.count("The Shadowfangs are beasts of darkness") == 1
    scan = api.get(f"/api/chats/{chat['id']}/lorebooks").json()["last_scan"]
    # The card's greeting fires more entries than shadowfang; each is sent from the older book only.
    sent = [a["title"] for a in scan["active"]]
    assert "shadowfang" in sent and {a["book"] for a in scan["active"]} == {"Eldoria"}
    assert [(r["book"], r["title"], r["reason"]) for r in scan["rejected"]] == [
        ("Eldoria (2)", t, f"same text as “{t}” in Eldoria, sent once") for t in sent
    ]


def test_chat_settings_keep_the_chats_own_link_to_a_book_that_also_comes_through_the_character(api):
    char = _card(api)
    (card_book,) = api.get("/api/lorebooks").json()
    chat = new_chat(api, [char["id"]])
    assert (
        api.put(f"/api/chats/{chat['id']}/lorebooks", json={"book_ids": [card_book["id"]]}).status_code == 200
    )
    html = api.get(f"/chats/{chat['id']}/settings", headers={"HX-Request": "true"}).text
    row = html[html.index(f'id="chat-lorebook-row-{card_book["id"]}"') :]
    row = row[: row.index("</li>")]
    assert "this chat, and via the character Seraphina" in row and " disabled" in row
    # The disabled box is not sent with the form: the hidden field keeps the chat's own link.
    assert f'<input type="hidden" name="lorebook_ids" value="{card_book["id"]}">' in row
    assert f'<label for="chat-lorebook-{card_book["id"]}">Eldoria</label>' in row
    # The JSON twin says the same.
    sources = api.get(f"/api/chats/{chat['id']}/lorebooks").json()["sources"]
    assert sources == [
        {
            "id": card_book["id"],
            "name": "Eldoria",
            "applies": True,
            "in_chat": True,
            "via": [{"kind": "character", "name": "Seraphina"}],
        }
    ]
