"""The pure rules of attached files (app/chats/core/attachments.py) and of read_document
(app/tools/core/documents.py), with literals."""

from __future__ import annotations

import pytest

from app.chats.core.attachments import (
    MAX_NAME_CHARS,
    clean_name,
    human_size,
    media_type,
    sniff_kind,
    type_label,
)
from app.tools.core.documents import cut_text, page_span


class TestSniff:
    def test_pdf_text_and_binaries(self):
        assert sniff_kind(b"%PDF-1.7\n...") == "pdf"
        assert sniff_kind("plain ünïcode\n".encode()) == "text"
        assert sniff_kind(b"a\x00b") is None
        assert sniff_kind("café".encode("latin-1")) is None
        assert sniff_kind(b"\x89PNG\r\n\x1a\n") is None


class TestNames:
    def test_paths_and_control_characters_go(self):
        assert clean_name("C:\\Users\\me\\report.pdf", "pdf") == "report.pdf"
        assert clean_name("../../etc/passwd", "text") == "passwd"
        assert clean_name("bad\x00\x1bname\t.txt", "text") == "badname .txt"
        assert clean_name("  ", "pdf") == "document.pdf"
        assert clean_name(None, "text") == "file.txt"

    def test_long_names_keep_their_ending(self):
        name = clean_name("x" * 500 + ".json", "text")
        assert len(name) == MAX_NAME_CHARS and name.endswith(".json")

    def test_types_and_labels(self):
        assert media_type("a.pdf", "pdf") == "application/pdf"
        assert media_type("a.py", "text") == "text/x-python"
        assert media_type("README", "text") == "text/plain"
        assert type_label("conf.YAML", "text") == "YAML"
        assert type_label("x.unknown", "text") == "text"

    def test_sizes(self):
        assert human_size(1) == "1 byte"
        assert human_size(900) == "900 bytes"
        assert human_size(2048) == "2 KB"
        assert human_size(1_258_291) == "1.2 MB"


class TestPages:
    def test_default_single_and_range(self):
        assert page_span(None, 12) == (1, 12)
        assert page_span(None, 120) == (1, 50)
        assert page_span("3", 12) == (3, 3)
        assert page_span(" 3 - 5 ", 12) == (3, 5)

    @pytest.mark.parametrize(
        ("spec", "message"),
        [
            ("0", "starts before page 1"),
            ("5-3", "backwards"),
            ("11-13", "This PDF has 12 pages"),
            ("three", "one number"),
            ("1,2", "one number"),
        ],
    )
    def test_refusals(self, spec, message):
        with pytest.raises(ValueError, match=message):
            page_span(spec, 12)

    def test_at_most_fifty_pages(self):
        with pytest.raises(ValueError, match="At most 50 pages"):
            page_span("1-51", 100)


class TestCut:
    def test_short_text_whole(self):
        assert cut_text("hello", 0).text == "hello" and cut_text("hello", 0).note is None

    def test_cut_and_read_on(self):
        text = "a" * 25 + "b" * 10
        first = cut_text(text, 0, limit=20)
        assert first.text == "a" * 20
        assert first.note == "… (cut at 20 characters; call again with offset=20)"
        rest = cut_text(text, 20, limit=20)
        assert rest.text == "a" * 5 + "b" * 10 and rest.note is None

    def test_offset_past_the_end(self):
        with pytest.raises(ValueError, match="past its end"):
            cut_text("abc", 3)
