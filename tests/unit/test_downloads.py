"""Download file names: one cleaner and one Content-Disposition header for every export."""

from urllib.parse import unquote

from app.platform.core.downloads import MAX_STEM, attachment, content_disposition, safe_stem


def _star(value: str) -> str:
    assert "; filename*=UTF-8''" in value, value
    return unquote(value.split("; filename*=UTF-8''", 1)[1])


def test_ascii_names_keep_the_plain_form_only():
    assert attachment("Eldoria", "json") == 'attachment; filename="Eldoria.json"'
    assert attachment("My book", "marinara.json") == 'attachment; filename="My book.marinara.json"'


def test_names_in_other_scripts_travel_in_filename_star_with_an_ascii_fallback():
    value = attachment("小明", "png", fallback="character")
    assert value.startswith('attachment; filename="character.png"; ')
    assert _star(value) == "小明.png"
    assert value.encode("latin-1")  # a header value Starlette can send
    accented = attachment("Café Noir", "json")
    assert (
        accented.startswith('attachment; filename="Cafe Noir.json"') and _star(accented) == "Café Noir.json"
    )


def test_quotes_slashes_backslashes_and_line_breaks_never_reach_the_header():
    for name in ('say "hi"', "../../etc/passwd", "a\\b", "two\r\nlines", "tab\there", "semi;colon"):
        value = attachment(name, "json")
        plain = value.split('filename="', 1)[1].split('"', 1)[0]
        assert not set(plain) & set('"/\\\r\n\t;'), (name, value)
        assert "\r" not in value and "\n" not in value
    assert attachment("../../etc/passwd", "json") == 'attachment; filename="etcpasswd.json"'
    # No line break survives, so no header can be smuggled in after it.
    assert (
        content_disposition('evil"\r\nX-Injected: 1.json') == 'attachment; filename="evilX-Injected: 1.json"'
    )


def test_empty_or_unusable_names_fall_back():
    assert attachment("", "jsonl", fallback="chat") == 'attachment; filename="chat.jsonl"'
    assert attachment("  ///  ", "jsonl", fallback="chat") == 'attachment; filename="chat.jsonl"'
    assert safe_stem("", "lorebook") == "lorebook"
    assert content_disposition("") == 'attachment; filename="download"'


def test_very_long_names_are_cut_and_keep_their_extension():
    stem = safe_stem("x" * 5000)
    assert stem == "x" * MAX_STEM
    value = attachment("明" * 5000, "marinara.json")
    assert _star(value) == "明" * MAX_STEM + ".marinara.json" and len(value) < 1200


def test_spaces_collapse_and_letters_of_any_script_stay():
    assert safe_stem("  Mirela   and\tRowan  ") == "Mirela and Rowan"
    assert safe_stem("Σοφία 小明 – 2") == "Σοφία 小明 2"
