"""Every download carries its name in Content-Disposition, in any script: a character, chat,
lorebook or memory file named "小明" downloads as 小明.… (it was a 500 before), with an ASCII
fallback for old clients."""

import re
from urllib.parse import unquote

from sqlmodel import Session

from app.chats.service import new_message
from app.memory.recall.jobs import embed_chat
from tests.conftest import add_character, add_connection, new_chat

NAME = "小明"


def _download(api, url, **params) -> tuple[str, str]:
    r = api.get(url, params=params)
    assert r.status_code == 200, r.text[:300]
    header = r.headers["content-disposition"]
    plain = re.fullmatch(r'attachment; filename="([ -~]+)"; filename\*=UTF-8\'\'([A-Za-z0-9%._~-]+)', header)
    assert plain, header
    return plain.group(1), unquote(plain.group(2))


def test_exports_named_in_chinese_download_under_that_name(api, sugo, models):
    add_connection(api, models)
    char = add_character(api, NAME)
    assert _download(api, f"/api/characters/{char['id']}/export", format="json") == (
        "character.json",
        "小明.json",
    )
    assert _download(api, f"/api/characters/{char['id']}/export", format="png") == (
        "character.png",
        "小明.png",
    )

    chat = new_chat(api, [char["id"]], name=NAME)
    assert _download(api, f"/api/chats/{chat['id']}/export") == ("chat.jsonl", "小明.jsonl")
    fallback, name = _download(api, f"/api/chats/{chat['id']}/prompt/snapshot", format="json")
    assert re.fullmatch(r"__ prompt \d{8}-\d{6}\.json", fallback) and re.fullmatch(
        r"小明 prompt \d{8}-\d{6}\.json", name
    )

    book = api.post("/api/lorebooks", json={"name": NAME}).json()
    assert _download(api, f"/api/lorebooks/{book['id']}/export", format="world_info") == (
        "lorebook.json",
        "小明.json",
    )
    assert _download(api, f"/api/lorebooks/{book['id']}/export", format="marinara")[1] == "小明.marinara.json"
    assert (
        _download(api, f"/api/lorebooks/{book['id']}/export", format="character_book")[1]
        == "小明.character_book.json"
    )

    with Session(sugo.engine) as s:
        for i in range(1, 121):
            s.add(
                new_message(
                    chat["id"], "user" if i % 2 else "assistant", NAME, [f"第{i}天，我们沿着海边走。"]
                )
            )
        s.commit()
    embed_chat(sugo.services, chat["id"])
    fallback, name = _download(api, f"/api/chats/{chat['id']}/memories/export")
    assert name == "小明-memory-recall.marinara.json" and fallback.endswith("-memory-recall.marinara.json")


def test_plain_names_keep_the_plain_header(api):
    char = add_character(api, "Aria / the bard")
    r = api.get(f"/api/characters/{char['id']}/export", params={"format": "json"})
    assert r.headers["content-disposition"] == 'attachment; filename="Aria the bard.json"'
