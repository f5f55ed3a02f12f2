from app.chats.core.imported import (
    MAX_CHAT_NAME,
    choose_name,
    clean_name,
    import_sentence,
    name_from_file,
    unique_name,
)


def test_a_name_is_one_clean_line():
    assert clean_name("Night\x00 talk\r\n\tagain\x7f") == "Night talk again"
    assert (
        clean_name("left\u202eright\u2066x\u2069\u200b") == "leftrightx"
    )  # nothing that reorders or hides text
    assert clean_name("Café 小明 🌙") == "Café 小明 🌙"
    assert clean_name(None) == clean_name("") == clean_name(" \x01 ") == ""
    long = clean_name("a" * 500)
    assert len(long) == MAX_CHAT_NAME and long.endswith("…")


def test_the_name_a_file_gives():
    assert name_from_file("Aria - 2024-05-01@21h13m05s.jsonl") == "Aria - 2024-05-01@21h13m05s"
    assert name_from_file("C:\\fakepath\\Trip.JSONL") == "Trip"
    assert name_from_file("/home/me/old.chat.json") == "old.chat"
    assert name_from_file("notes.txt") == "notes" and name_from_file("archive.tar") == "archive.tar"
    assert name_from_file("Two%0D%0Alines%22quoted%22.jsonl") == 'Two lines"quoted"'  # a browser's escapes
    assert name_from_file("100%25 sure.jsonl") == "100%25 sure"  # nothing else is unescaped
    assert name_from_file(".jsonl") == ".jsonl" and name_from_file(None) == name_from_file("") == ""


def test_the_name_inside_a_sugo_export_wins_only_while_the_file_keeps_sugos_name():
    stored = "Road trip: day 2/3"
    assert choose_name("Road trip day 23.jsonl", stored, "fallback") == stored  # as Sugo's download named it
    assert choose_name("Road trip (1).jsonl", stored, "fallback") == "Road trip (1)"  # renamed: the file's
    assert choose_name(None, stored, "fallback") == stored
    assert (
        choose_name("  .jsonl", " \n", "Aria – imported 2026-01-01 10:00")
        == "Aria – imported 2026-01-01 10:00"
    )
    assert (
        choose_name("x.jsonl", "Line\nbreak", "f") == "x"
        and choose_name("", "Line\nbreak", "f") == "Line break"
    )


def test_a_taken_name_is_numbered():
    assert unique_name("Talk", set()) == "Talk"
    assert unique_name("Talk", {"Talk"}) == "Talk (2)"
    assert unique_name("Talk", {"Talk", "Talk (2)", "Talk (3)"}) == "Talk (4)"
    long = "x" * MAX_CHAT_NAME
    assert len(unique_name(long, {long})) == MAX_CHAT_NAME and unique_name(long, {long}).endswith(" (2)")


def test_what_arrived_in_one_sentence():
    assert import_sentence(160, 3, 2) == "Imported 160 messages (3 summaries, 2 lorebooks attached)."
    assert import_sentence(1, 1, 1) == "Imported 1 message (1 summary, 1 lorebook attached)."
    assert import_sentence(12_000, 0, 0) == "Imported 12,000 messages."
    assert import_sentence(5, 0, 1) == "Imported 5 messages (1 lorebook attached)."
    assert import_sentence(0, 0, 0) == "Imported 0 messages."
