"""Files attached to messages, end to end over real HTTP: upload (checked by content, limited in size
and number), send with the message, shown in the prompt, downloaded, read by read_document, removed
with their message."""

from __future__ import annotations

import json
import os
import time

import pytest
from sqlmodel import select

from app.chats import attachments as attachments_module
from app.chats.attachments import Attachment, file_path
from app.platform.timeutil import utcnow
from app.tools.documents.source import cleanup
from app.tools.registry import ToolContext, ToolError
from tests.conftest import add_character, add_connection, new_chat, read_sse
from tests.support.pdfs import make_pdf

PDF_PAGES = ["The lighthouse keepers log.\nDay one: calm seas.", "", "Day three: a storm from the east."]
PY_TEXT = 'def greet(name):\n    return f"Hello, {name}!"\n'
JSON_TEXT = '{"ship": "Marigold", "crew": 12, "note": "ünïcødé ok"}\n'


def _chat(api, models) -> dict:
    add_connection(api, models)
    char = add_character(api)
    return new_chat(api, [char["id"]])


def _upload(api, chat_id: int, name: str, data: bytes, media: str = "application/octet-stream"):
    return api.post(f"/api/chats/{chat_id}/attachments", files={"file": (name, data, media)})


def _send(api, chat_id: int, content: str, ids: list[int]):
    r = api.post(
        f"/api/chats/{chat_id}/generate", json={"action": "send", "content": content, "attachment_ids": ids}
    )
    return r


def _tool(sugo):
    return sugo.services.tools.get("read_document")


def _read(sugo, chat_id: int, **args):
    tool = _tool(sugo)
    ctx = ToolContext(
        services=sugo.services,
        chat_id=chat_id,
        character_id=None,
        persona_id=None,
        message_id=None,
        now=utcnow(),
    )
    return tool.run(ctx, tool.args.model_validate(args))


class TestUpload:
    def test_a_pdf_and_text_files_are_taken_and_described(self, api, models):
        chat = _chat(api, models)
        r = _upload(api, chat["id"], "log.pdf", make_pdf(PDF_PAGES))
        assert r.status_code == 201, r.text
        body = r.json()
        assert body["name"] == "log.pdf" and body["media_type"] == "application/pdf" and body["pages"] == 3
        assert body["message_id"] is None and body["size"] > 0
        py = _upload(api, chat["id"], "greet.py", PY_TEXT.encode()).json()
        assert py["media_type"] == "text/x-python" and py["pages"] is None
        js = _upload(api, chat["id"], "../../etc/ship.json", JSON_TEXT.encode()).json()
        assert js["name"] == "ship.json"  # the path the browser sent is never kept

    def test_a_binary_file_is_refused_with_a_clear_message(self, api, models, sugo):
        chat = _chat(api, models)
        r = _upload(api, chat["id"], "photo.pdf", b"\x89PNG\r\n\x1a\n\x00\x00binary")
        assert r.status_code == 400
        assert r.json()["detail"] == "Sugo reads PDFs and text files; this file is neither."
        bad_utf8 = _upload(api, chat["id"], "notes.txt", "café".encode("latin-1"))
        assert bad_utf8.status_code == 400
        with sugo.session() as session:
            assert session.exec(select(Attachment)).all() == []
        # Nothing of a refused file stays on disk.
        folder = sugo.settings.data_dir / "attachments"
        assert not folder.exists() or not [p for p in folder.rglob("*") if p.is_file()]

    def test_a_file_over_the_limit_is_refused(self, api, models, monkeypatch):
        monkeypatch.setattr(attachments_module, "MAX_FILE_BYTES", 1024)
        chat = _chat(api, models)
        r = _upload(api, chat["id"], "big.txt", b"a" * 1025)
        assert r.status_code == 400
        assert "larger than 1 KB" in r.json()["detail"]
        assert _upload(api, chat["id"], "small.txt", b"a" * 1024).status_code == 201

    def test_a_damaged_pdf_and_an_empty_file_are_refused(self, api, models):
        chat = _chat(api, models)
        r = _upload(api, chat["id"], "broken.pdf", b"%PDF-1.4\nthis is not really a pdf")
        assert r.status_code == 400 and "could not be read" in r.json()["detail"]
        assert _upload(api, chat["id"], "empty.txt", b"").json()["detail"] == "This file is empty."

    def test_at_most_ten_uploads_wait_per_chat(self, api, models):
        chat = _chat(api, models)
        for i in range(10):
            assert _upload(api, chat["id"], f"f{i}.txt", f"file {i}".encode()).status_code == 201
        r = _upload(api, chat["id"], "eleventh.txt", b"one too many")
        assert r.status_code == 400 and "at most 10 files" in r.json()["detail"]

    def test_an_upload_to_a_missing_chat_is_404(self, api):
        assert _upload(api, 999, "a.txt", b"hello").status_code == 404


class TestSend:
    def test_sending_links_the_files_and_the_prompt_lists_them(self, api, models, sugo):
        chat = _chat(api, models)
        pdf = _upload(api, chat["id"], "log.pdf", make_pdf(PDF_PAGES)).json()
        py = _upload(api, chat["id"], "greet.py", PY_TEXT.encode()).json()
        r = _send(api, chat["id"], "Please look at these two files.", [pdf["id"], py["id"]])
        assert r.status_code == 200, r.text
        assert read_sse(r)[-1][0] == "done"
        listed = api.get(f"/api/chats/{chat['id']}/attachments").json()
        user_msg = [m for m in api.get(f"/api/chats/{chat['id']}/messages").json() if m["role"] == "user"][-1]
        assert {a["message_id"] for a in listed} == {user_msg["id"]}
        # The model heard of the files in the reply's prompt ...
        sent = json.dumps(models.last_request.json, ensure_ascii=False)
        assert f"[#{pdf['id']}] log.pdf (PDF, 3 pages" in sent and "read_document" in sent
        # ... and Peek Prompt shows them in the "retrieved_documents" slot.
        prompt = api.get(f"/api/chats/{chat['id']}/prompt").json()
        blocks = [b for b in prompt["blocks"] if b["name"] == "retrieved_documents"]
        assert len(blocks) == 1
        text = blocks[0]["text"]
        assert f"[#{py['id']}] greet.py (Python, " in text
        assert 'with "Please look at these two files."' in text

    def test_a_chat_without_files_gets_no_block(self, api, models):
        chat = _chat(api, models)
        assert read_sse(_send(api, chat["id"], "Hello there", []))[-1][0] == "done"
        prompt = api.get(f"/api/chats/{chat['id']}/prompt").json()
        assert not [b for b in prompt["blocks"] if b["name"] == "retrieved_documents"]

    def test_another_chats_or_an_already_sent_file_is_refused(self, api, models):
        chat = _chat(api, models)
        other = new_chat(api, [add_character(api, "Bram")["id"]])
        theirs = _upload(api, other["id"], "theirs.txt", b"not yours").json()
        r = _send(api, chat["id"], "Sneaky", [theirs["id"]])
        assert r.status_code == 400 and "not uploaded to this chat" in r.json()["detail"]
        mine = _upload(api, chat["id"], "mine.txt", b"mine").json()
        assert read_sse(_send(api, chat["id"], "Here", [mine["id"]]))[-1][0] == "done"
        again = _send(api, chat["id"], "Again", [mine["id"]])
        assert again.status_code == 400 and "already attached" in again.json()["detail"]
        # Nothing was stored by the refused sends.
        contents = [m["content"] for m in api.get(f"/api/chats/{chat['id']}/messages").json()]
        assert "Sneaky" not in contents and "Again" not in contents

    def test_files_alone_need_a_few_words(self, api, models):
        chat = _chat(api, models)
        up = _upload(api, chat["id"], "a.txt", b"text").json()
        r = _send(api, chat["id"], "  ", [up["id"]])
        assert r.status_code == 400 and "Write a few words" in r.json()["detail"]
        assert api.get(f"/api/chats/{chat['id']}/attachments").json()[0]["message_id"] is None

    def test_post_message_links_files_too(self, api, models):
        chat = _chat(api, models)
        up = _upload(api, chat["id"], "a.md", b"# Title\n").json()
        r = api.post(
            f"/api/chats/{chat['id']}/messages", json={"content": "A note", "attachment_ids": [up["id"]]}
        )
        assert r.status_code == 201
        assert api.get(f"/api/chats/{chat['id']}/attachments").json()[0]["message_id"] == r.json()["id"]

    def test_a_waiting_upload_can_be_taken_back_but_not_a_sent_one(self, api, models):
        chat = _chat(api, models)
        up = _upload(api, chat["id"], "a.txt", b"text").json()
        assert api.delete(f"/api/chats/{chat['id']}/attachments/{up['id']}").status_code == 204
        sent = _upload(api, chat["id"], "b.txt", b"text b").json()
        read_sse(_send(api, chat["id"], "with b", [sent["id"]]))
        r = api.delete(f"/api/chats/{chat['id']}/attachments/{sent['id']}")
        assert r.status_code == 400


class TestPages:
    def test_waiting_uploads_and_sent_files_show_on_the_chat_page(self, api, models):
        chat = _chat(api, models)
        waiting = _upload(api, chat["id"], "draft.md", b"# Draft\n").json()
        page = api.get(f"/chats/{chat['id']}").text
        # After a reload the composer still holds the upload, ready to send.
        assert f'data-attachment-id="{waiting["id"]}"' in page and "Remove draft.md" in page
        read_sse(_send(api, chat["id"], "The draft", [waiting["id"]]))
        user = [m for m in api.get(f"/api/chats/{chat['id']}/messages").json() if m["role"] == "user"][-1]
        fragment = api.get(f"/chats/{chat['id']}/messages/{user['id']}", headers={"HX-Request": "true"}).text
        assert "<html" not in fragment
        assert (
            f'href="/chats/{chat["id"]}/attachments/{waiting["id"]}"' in fragment and "draft.md" in fragment
        )
        assert 'id="composer-files" aria-label="Files to send" hidden' in api.get(f"/chats/{chat['id']}").text


class TestDownload:
    def test_the_file_downloads_as_an_attachment(self, api, models):
        chat = _chat(api, models)
        html = _upload(api, chat["id"], "page.html", b"<script>alert(1)</script>").json()
        r = api.get(f"/chats/{chat['id']}/attachments/{html['id']}")
        assert r.status_code == 200
        assert r.content == b"<script>alert(1)</script>"
        assert r.headers["content-type"] == "text/plain; charset=utf-8"
        assert r.headers["content-disposition"].startswith('attachment; filename="page.html"')
        assert r.headers["x-content-type-options"] == "nosniff"
        pdf = _upload(api, chat["id"], "log.pdf", make_pdf(PDF_PAGES)).json()
        r = api.get(f"/chats/{chat['id']}/attachments/{pdf['id']}")
        assert r.headers["content-type"] == "application/pdf" and r.content.startswith(b"%PDF-")
        # Another chat's id does not reach the file.
        other = new_chat(api, [add_character(api, "Bram")["id"]])
        assert api.get(f"/chats/{other['id']}/attachments/{pdf['id']}").status_code == 404


class TestReadDocument:
    def _sent(self, api, models, files: list[tuple[str, bytes]]):
        chat = _chat(api, models)
        ids = [_upload(api, chat["id"], name, data).json()["id"] for name, data in files]
        assert read_sse(_send(api, chat["id"], "Files for you", ids))[-1][0] == "done"
        return chat, ids

    def test_the_pdf_and_the_text_files_are_read(self, api, models, sugo):
        chat, (pdf, py, js) = self._sent(
            api,
            models,
            [
                ("log.pdf", make_pdf(PDF_PAGES)),
                ("greet.py", PY_TEXT.encode()),
                ("ship.json", JSON_TEXT.encode()),
            ],
        )
        result = _read(sugo, chat["id"], attachment_id=pdf)
        assert "log.pdf (PDF, pages 1-3 of 3)" in result.text
        assert "[Page 1]\nThe lighthouse keepers log.\nDay one: calm seas." in result.text
        assert "[Page 2]\n(no text on this page)" in result.text
        assert "Day three: a storm from the east." in result.text
        assert result.notice == "Read log.pdf"
        assert _read(sugo, chat["id"], attachment_id=py).text.endswith(PY_TEXT)
        assert "ünïcødé ok" in _read(sugo, chat["id"], attachment_id=js).text

    def test_page_ranges(self, api, models, sugo):
        chat, (pdf,) = self._sent(api, models, [("log.pdf", make_pdf(PDF_PAGES))])
        three = _read(sugo, chat["id"], attachment_id=pdf, pages="3").text
        assert "Day three" in three and "lighthouse" not in three and "pages 3-3 of 3" in three
        assert "lighthouse" in _read(sugo, chat["id"], attachment_id=pdf, pages="1-2").text
        with pytest.raises(ToolError, match="This PDF has 3 pages"):
            _read(sugo, chat["id"], attachment_id=pdf, pages="2-7")
        with pytest.raises(ToolError, match="no text layer"):
            _read(sugo, chat["id"], attachment_id=pdf, pages="2")

    def test_a_long_pdf_is_read_fifty_pages_at_a_time(self, api, models, sugo):
        pages = [f"Page number {i}" for i in range(1, 61)]
        chat, (pdf,) = self._sent(api, models, [("long.pdf", make_pdf(pages))])
        first = _read(sugo, chat["id"], attachment_id=pdf).text
        assert "pages 1-50 of 60" in first and 'pages="51-60"' in first
        assert "Page number 50" in first and "Page number 51" not in first
        with pytest.raises(ToolError, match="At most 50 pages"):
            _read(sugo, chat["id"], attachment_id=pdf, pages="1-60")

    def test_a_long_text_is_cut_and_read_on_with_offset(self, api, models, sugo):
        text = "".join(f"line {i:05d}\n" for i in range(3000))  # 33,000 characters
        chat, (txt,) = self._sent(api, models, [("long.txt", text.encode())])
        first = _read(sugo, chat["id"], attachment_id=txt).text
        assert first.endswith("… (cut at 20,000 characters; call again with offset=20000)")
        assert text[:20_000] in first and text[20_000:20_050] not in first
        rest = _read(sugo, chat["id"], attachment_id=txt, offset=20_000).text
        assert rest.endswith(text[20_000:]) and "cut at" not in rest
        with pytest.raises(ToolError, match="past its end"):
            _read(sugo, chat["id"], attachment_id=txt, offset=40_000)
        with pytest.raises(ToolError, match="has no pages"):
            _read(sugo, chat["id"], attachment_id=txt, pages="1")

    def test_another_chats_file_and_a_waiting_upload_are_refused(self, api, models, sugo):
        chat, (mine,) = self._sent(api, models, [("mine.txt", b"my words")])
        other = new_chat(api, [add_character(api, "Bram")["id"]])
        with pytest.raises(ToolError, match=f"no file #{mine}"):
            _read(sugo, other["id"], attachment_id=mine)
        waiting = _upload(api, chat["id"], "later.txt", b"not sent").json()["id"]
        with pytest.raises(ToolError, match=f"no file #{waiting}"):
            _read(sugo, chat["id"], attachment_id=waiting)

    def test_bad_arguments_never_reach_the_handler(self, sugo):
        tool = _tool(sugo)
        for bad in (
            {"attachment_id": 0},
            {"attachment_id": 1, "offset": -1},
            {"attachment_id": 1, "pages": "x" * 21},
        ):
            with pytest.raises(ValueError):
                tool.args.model_validate(bad)
        assert tool.permission == "documents" and tool.macro == "document_tool" and tool.family == "document"


class TestRemoval:
    def test_deleting_the_message_deletes_its_rows_and_the_unused_file(self, api, models, sugo):
        chat = _chat(api, models)
        up = _upload(api, chat["id"], "a.txt", b"only here").json()
        shared = _upload(api, chat["id"], "b.txt", b"twice").json()
        read_sse(_send(api, chat["id"], "first", [up["id"], shared["id"]]))
        again = _upload(api, chat["id"], "b-again.txt", b"twice").json()  # same content, kept once
        read_sse(_send(api, chat["id"], "second", [again["id"]]))
        with sugo.session() as session:
            rows = {a.id: a for a in session.exec(select(Attachment))}
        paths = {i: file_path(sugo.settings.data_dir, a) for i, a in rows.items()}
        assert paths[shared["id"]] == paths[again["id"]]
        # Files written in the last minutes are kept (an upload's row may not be committed yet): age them.
        old = time.time() - 3600
        for path in paths.values():
            os.utime(path, (old, old))
        first = next(
            m for m in api.get(f"/api/chats/{chat['id']}/messages").json() if m["content"] == "first"
        )
        assert api.delete(f"/api/chats/{chat['id']}/messages/{first['id']}").status_code == 204
        remaining = api.get(f"/api/chats/{chat['id']}/attachments").json()
        assert [a["id"] for a in remaining] == [again["id"]]
        assert not paths[up["id"]].exists()
        assert paths[again["id"]].exists()  # still used by the second message

    def test_unsent_uploads_older_than_a_day_are_removed(self, api, models, sugo):
        chat = _chat(api, models)
        up = _upload(api, chat["id"], "forgotten.txt", b"never sent").json()
        fresh = _upload(api, chat["id"], "fresh.txt", b"just now").json()
        with sugo.session() as session:
            row = session.get(Attachment, up["id"])
            row.created_at = row.created_at.replace(year=row.created_at.year - 1)
            session.add(row)
            session.commit()
            path = file_path(sugo.settings.data_dir, row)
        old = time.time() - 3600
        os.utime(path, (old, old))
        cleanup(sugo.services)
        assert [a["id"] for a in api.get(f"/api/chats/{chat['id']}/attachments").json()] == [fresh["id"]]
        assert not path.exists()

    def test_a_branch_keeps_the_files_of_its_messages(self, api, models):
        chat = _chat(api, models)
        up = _upload(api, chat["id"], "a.txt", b"branch me").json()
        read_sse(_send(api, chat["id"], "with a file", [up["id"]]))
        msgs = api.get(f"/api/chats/{chat['id']}/messages").json()
        branch = api.post(f"/api/chats/{chat['id']}/messages/{msgs[-1]['id']}/branch").json()
        copied = api.get(f"/api/chats/{branch['id']}/attachments").json()
        assert [a["name"] for a in copied] == ["a.txt"]
        assert api.get(f"/chats/{branch['id']}/attachments/{copied[0]['id']}").content == b"branch me"
