"""The backgrounds' pure parts: the shipped list, the stored choice's forms, SillyTavern's
custom_background read and written, and the chat settings' check (issue 29)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from app.backgrounds.core.builtin import BUILTINS, builtin, builtin_by_file
from app.backgrounds.core.choice import (
    check_character_default,
    check_chat_choice,
    clean_file_name,
    st_css,
    st_file_name,
)
from app.chats import st_metadata
from app.chats.settings import ChatSettings

STATIC = Path(__file__).resolve().parents[2] / "static" / "backgrounds"


def test_the_shipped_backgrounds_are_a_few_small_svg_files_of_their_own():
    assert 5 <= len(BUILTINS) <= 6
    assert len({b.name for b in BUILTINS}) == len(BUILTINS)
    for b in BUILTINS:
        svg = (STATIC / b.file_name).read_bytes()
        assert svg.startswith(b"<svg") and len(svg) < 4096, b.name
        assert b"http" not in svg.replace(b"http://www.w3.org/2000/svg", b""), "nothing fetched"
    assert builtin("dusk").url == "/static/backgrounds/dusk.svg"
    assert builtin("nope") is None
    assert builtin_by_file("Night-City.SVG").name == "night-city"


@pytest.mark.parametrize(
    "value", ["", "none", "builtin:dusk", "builtin:night-city", "image:1", "image:42", "st:Forest Night.jpg"]
)
def test_a_chat_stores_one_of_its_forms(value):
    assert check_chat_choice(value) == value
    assert ChatSettings(background=value).background == value


@pytest.mark.parametrize(
    "value",
    [
        "None",
        "builtin:",
        "builtin:Dusk",
        "image:",
        "image:0",
        "image:x",
        "image:01",
        "st:",
        "st:a/b.png",
        "st:a\nb",
        "url(x)",
    ],
)
def test_anything_else_is_refused_with_a_sentence(value):
    with pytest.raises(ValidationError, match="The background must be"):
        ChatSettings(background=value)


def test_a_characters_default_is_shipped_or_uploaded_or_none():
    assert check_character_default("") is None
    assert check_character_default("builtin:sea") == "builtin:sea"
    assert check_character_default("image:3") == "image:3"
    for bad in ("none", "st:x.png", "image:-1"):
        with pytest.raises(ValueError, match="default background"):
            check_character_default(bad)


@pytest.mark.parametrize(
    ("css", "name"),
    [
        ('url("backgrounds/Forest.jpg")', "Forest.jpg"),
        ("url('backgrounds/Forest%20Night.jpg')", "Forest Night.jpg"),
        ("url(backgrounds/beach.png)", "beach.png"),
        ('url("backgrounds/%E5%A4%9C.webp")', "夜.webp"),
        ("Forest.jpg", "Forest.jpg"),
        ('url("/backgrounds/a.png?v=2")', "a.png"),
        ("", None),
        ("   ", None),
        (None, None),
        (42, None),
        ('url("")', None),
        ("url(x" + "a" * 3000 + ")", None),
    ],
)
def test_sillytaverns_custom_background_names_a_file(css, name):
    assert st_file_name(css) == name


def test_written_as_sillytavern_writes_it_and_read_back():
    assert st_css("Forest Night.jpg") == 'url("backgrounds/Forest%20Night.jpg")'
    for name in ("Forest Night.jpg", "夜 (2).webp", "a&b#c.png"):
        assert st_file_name(st_css(name)) == name


def test_file_names_are_cut_at_255_keeping_the_extension():
    long = "x" * 300 + ".jpeg"
    assert clean_file_name(long) == "x" * 250 + ".jpeg"
    assert clean_file_name("C:\\pics\\sea.png") == "sea.png"
    assert clean_file_name("a\x00b.png") == "ab.png"
    assert clean_file_name("  ") is None and clean_file_name("..") is None


def test_metadata_reads_the_background_with_or_without_sugos_key():
    assert (
        st_metadata.read_metadata({"custom_background": 'url("backgrounds/Sea.png")'}).background_file
        == "Sea.png"
    )
    both = st_metadata.read_metadata(
        {"custom_background": 'url("backgrounds/Sea.png")', "sugo": {"version": 1}}
    )
    assert both.background_file == "Sea.png"
    off = st_metadata.read_metadata({"sugo": {"version": 1, "background": "none"}})
    assert off.settings["background"] == "none"
    bad = st_metadata.read_metadata({"custom_background": 'url("")'})
    assert bad.background_file is None and "names no file" in bad.notes[0]


def test_export_writes_it_back_keeping_the_originals_spelling_when_the_same_file():
    ours = st_metadata.chat_metadata(
        ChatSettings(background="st:Forest Night.jpg"),
        name="c",
        mode="roleplay",
        lorebooks=(),
        background_file="Forest Night.jpg",
    )
    assert ours["custom_background"] == 'url("backgrounds/Forest%20Night.jpg")'
    original = {"custom_background": 'url("backgrounds/Forest Night.jpg")', "variables": {"x": 1}}
    merged = st_metadata.merge_metadata(original, ours)
    assert merged["custom_background"] == 'url("backgrounds/Forest Night.jpg")' and merged["variables"] == {
        "x": 1
    }
    changed = st_metadata.chat_metadata(
        ChatSettings(), name="c", mode="roleplay", lorebooks=(), background_file="Sea.png"
    )
    assert st_metadata.merge_metadata(original, changed)["custom_background"] == 'url("backgrounds/Sea.png")'
    gone = st_metadata.chat_metadata(ChatSettings(background="none"), name="c", mode="roleplay", lorebooks=())
    assert "custom_background" not in st_metadata.merge_metadata(original, gone)
    assert gone["sugo"]["background"] == "none"
