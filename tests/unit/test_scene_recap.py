import json

from hypothesis import given, settings
from hypothesis import strategies as st

from app.memory.scenes.core.participants import (
    Audience,
    match_participants,
    missing_speakers,
    recap_audience,
)
from app.memory.scenes.core.recap import (
    DEFAULT_RECAP_PROMPT,
    MAX_ANCHORS,
    MAX_PARTICIPANTS,
    MIN_BATCH_TOKENS,
    RECAP_FORMAT,
    Recap,
    RecapPart,
    SceneMessage,
    combine_groups,
    combine_request,
    finish_combined,
    read_recap,
    recap_batches,
    recap_header,
    recap_max_tokens,
    recap_request,
    scene_transcript,
    split_text,
    timeframe_hint,
    timeline_anchors,
)
from app.memory.summaries.core.answers import Failure, request_max_tokens
from app.prompt.core.tokens import count_tokens


def msg(number, text, name="Kaito"):
    return SceneMessage(number, name, text)


def answer(summary="Kaito and Mei crossed the bridge.", participants=("Kaito", "Mei"), timeframe="dusk"):
    obj = {"summary": summary, "timeframe": timeframe}
    if participants is not None:
        obj["participants"] = list(participants)
    return json.dumps(obj)


def words(text):
    return "".join(text.split())


# Output budget ------------------------------------------------------------------------------------


def test_recap_requests_at_least_8196_output_tokens():
    assert recap_max_tokens(1024) == 8196  # the reference app's 1,024 cut recaps off
    assert recap_max_tokens(4096) == 8196
    assert recap_max_tokens(16_000) == 16_000
    assert request_max_tokens(4096, 1) == 16_392  # the retry after a cut-off answer doubles it


# Batches ------------------------------------------------------------------------------------------


def test_a_short_scene_is_one_batch_in_order_without_empty_messages():
    scene = [msg(1, "Hello."), msg(2, "   "), msg(3, "Goodbye.", "Mei")]
    assert recap_batches(scene, input_budget_tokens=1000) == [[scene[0], scene[2]]]


def test_batches_hold_whole_messages_within_the_budget_and_lose_none():
    scene = [msg(n, f"Message {n}. " + "word " * 150, "Kaito" if n % 2 else "Mei") for n in range(1, 41)]
    batches = recap_batches(scene, input_budget_tokens=1000)
    assert len(batches) > 5
    assert [m for batch in batches for m in batch] == scene  # whole, in order, none dropped
    for batch in batches:
        assert count_tokens(scene_transcript(batch)) <= 1000


def test_a_message_bigger_than_a_batch_is_split_at_paragraphs_never_dropped():
    paragraphs = [f"Paragraph {n}. " + "rain " * 100 for n in range(6)]
    big = msg(7, "\n\n".join(paragraphs))
    batches = recap_batches([msg(6, "Before."), big, msg(8, "After.")], input_budget_tokens=300)
    pieces = [m for batch in batches for m in batch if m.number == 7]
    assert len(pieces) >= 3
    assert [p.part for p in pieces] == [(k, len(pieces)) for k in range(1, len(pieces) + 1)]
    assert words("".join(p.text for p in pieces)) == words(big.text)
    assert all(p.text.endswith("rain") for p in pieces)  # cut between paragraphs, not inside them
    assert batches[0] == [msg(6, "Before.")] and batches[-1] == [msg(8, "After.")]
    for batch in batches:
        assert count_tokens(scene_transcript(batch)) <= 300
    assert "#7 Kaito (part 2/" in scene_transcript([pieces[1]])


def test_a_paragraph_too_big_is_split_at_sentences_then_words_then_characters():
    sentences = " ".join(f"Sentence number {n} goes on for a while." for n in range(200))
    pieces = split_text(sentences, 50, count_tokens)
    assert "".join(pieces) == sentences
    assert all(count_tokens(p) <= 50 for p in pieces)
    assert all(p.rstrip().endswith(".") for p in pieces)
    blob = "x" * 5000
    pieces = split_text(blob, 100, count_tokens)
    assert "".join(pieces) == blob and all(count_tokens(p) <= 100 for p in pieces)


def test_a_tiny_budget_is_raised_to_the_minimum():
    scene = [msg(n, "word " * 30) for n in range(1, 30)]
    assert len(recap_batches(scene, input_budget_tokens=1)) == len(
        recap_batches(scene, input_budget_tokens=MIN_BATCH_TOKENS)
    )


@settings(max_examples=60, deadline=None)
@given(
    texts=st.lists(st.text(alphabet="ab .!\n漢é", max_size=3000), max_size=8),
    budget=st.integers(min_value=1, max_value=900),
)
def test_batches_never_lose_text_and_always_fit(texts, budget):
    scene = [msg(n, t) for n, t in enumerate(texts, 1)]
    batches = recap_batches(scene, input_budget_tokens=budget)
    for number, text in enumerate(texts, 1):
        kept = "".join(m.text for batch in batches for m in batch if m.number == number)
        assert words(kept) == words(text)
    for batch in batches:
        assert count_tokens(scene_transcript(batch)) <= max(budget, MIN_BATCH_TOKENS)


# Requests -----------------------------------------------------------------------------------------


def test_the_recap_request_asks_for_json_with_participants_and_numbers_the_messages():
    scene = [msg(12, "Date: 3 May 1890\nWe meet at the docks."), msg(13, "Mei nods.", "Mei")]
    system, user = recap_request(scene, first_number=12, last_number=13)
    assert system["role"] == "system" and user["role"] == "user"
    assert system["content"].startswith(DEFAULT_RECAP_PROMPT) and RECAP_FORMAT in system["content"]
    assert "2 to 3 paragraphs" in system["content"] and '"participants"' in system["content"]
    assert user["content"].startswith("Scene messages #12–#13")
    assert "Date: 3 May 1890 (#12)" in user["content"]
    assert "#12 Kaito: Date: 3 May 1890" in user["content"] and "#13 Mei: Mei nods." in user["content"]


def test_custom_instructions_keep_the_json_format_and_blank_ones_mean_the_default():
    custom = recap_request([msg(1, "Hi.")], first_number=1, last_number=1, instructions="Write noir.")
    assert custom[0]["content"].startswith("Write noir.") and RECAP_FORMAT in custom[0]["content"]
    blank = recap_request([msg(1, "Hi.")], first_number=1, last_number=1, instructions="  ")
    assert blank[0]["content"].startswith(DEFAULT_RECAP_PROMPT)


def test_a_part_request_says_which_part_and_a_retry_names_who_must_be_included():
    system, user = recap_request(
        [msg(5, "Hi.")], first_number=5, last_number=5, part=(2, 3), must_include=["Mei", "Rin"]
    )
    assert "(part 2 of 3 of a longer scene" in user["content"]
    assert 'must be in "participants"' in system["content"] and "Mei, Rin" in system["content"]


# Reading the answer -------------------------------------------------------------------------------


def test_a_good_answer_is_read():
    assert read_recap(answer(), "stop") == Recap(
        "Kaito and Mei crossed the bridge.", ("Kaito", "Mei"), "dusk"
    )
    fenced = "<think>who?</think>Here:\n```json\n" + answer(timeframe="unknown") + "\n```"
    assert read_recap(fenced, "stop") == Recap("Kaito and Mei crossed the bridge.", ("Kaito", "Mei"), "")
    paragraphs = json.dumps({"summary": ["One.", "Two."], "participants": "Kaito, Mei and Rin"})
    assert read_recap(paragraphs, None) == Recap("One.\n\nTwo.", ("Kaito", "Mei", "Rin"), "")


def test_a_cut_off_answer_is_a_failure_to_retry_larger_never_a_shortened_recap():
    for result in (
        read_recap(answer(), "length"),
        read_recap('{"summary": "Kaito crossed the bridge and then', None),
        read_recap("<think>Let me plan the recap carefully", "max_tokens"),
    ):
        assert isinstance(result, Failure) and result.retry_larger, result


def test_empty_thinking_junk_and_missing_summary_fail():
    cases = {
        "": "empty",
        "<think>hmm</think>": "only_thinking",
        "Kaito drew his sword and the rain kept falling.": "not_json",  # the model continued the story
        '{"participants": ["Kaito"]}': "missing_summary",
        '{"summary": "  "}': "missing_summary",
        '{"summary": 42}': "missing_summary",
        '{"summary": "\\u0000\\u0001 bytes"}': "garbage",
        '{"summary": "1234 5678"}': "garbage",
    }
    for text, kind in cases.items():
        result = read_recap(text, "stop")
        assert isinstance(result, Failure) and result.kind == kind, (text, result)
    assert read_recap("", "stop", reasoning="thought a lot").kind == "only_thinking"


def test_a_summary_over_the_maximum_output_size_is_refused_not_cut():
    result = read_recap(answer(summary="word " * 500), "stop", max_summary_tokens=100)
    assert isinstance(result, Failure) and result.kind == "too_long"


def test_participants_are_cleaned_bounded_and_absent_means_not_said():
    assert read_recap(answer(participants=None), "stop").participants is None
    assert read_recap(answer(participants=()), "stop").participants == ()
    junk = json.dumps(
        {"summary": "A recap.", "participants": ["Kaito", "kaito", 7, None, {"name": "Mei"}, "", "x" * 500]}
    )
    assert read_recap(junk, "stop").participants == ("Kaito", "Mei")
    many = answer(participants=[f"Name {n}" for n in range(100)])
    assert len(read_recap(many, "stop").participants) == MAX_PARTICIPANTS
    long_time = read_recap(answer(timeframe="dawn " * 100), "stop").timeframe
    assert len(long_time) <= 120 and long_time.endswith("…")


# A long scene, in saved batches then combined ----------------------------------------------------


def test_a_long_scene_is_recapped_in_saved_batches_then_combined_without_losing_anyone():
    speakers = ["Kaito Nakamura", "Mei", "Rin"]
    scene = [msg(n, f"Line {n}. " + "story " * 120, speakers[n % 3]) for n in range(100, 160)]
    batches = recap_batches(scene, input_budget_tokens=2000)
    assert len(batches) >= 4
    saved: list[RecapPart] = []
    for k, batch in enumerate(batches, 1):
        request = recap_request(
            batch, first_number=batch[0].number, last_number=batch[-1].number, part=(k, len(batches))
        )
        assert f"part {k} of {len(batches)}" in request[1]["content"]
        # each part's helper names only who spoke in it; Rin only in the first part
        names = ["Kaito", "Mei"] + (["Rin"] if k == 1 else [])
        summary = f"Part {k} events. " + "detail " * 100
        recap = read_recap(answer(summary, names, "night" if k == 1 else ""), "stop")
        saved.append(RecapPart(batch[0].number, batch[-1].number, recap))
    rounds = 0
    parts = saved
    while len(parts) > 1:
        rounds += 1
        next_parts = []
        for group in combine_groups(parts, input_budget_tokens=MIN_BATCH_TOKENS):
            if len(group) == 1:
                next_parts.append(group[0])
                continue
            request = combine_request(group)
            assert RECAP_FORMAT in request[0]["content"]
            assert "[Part 1] Messages #" in request[1]["content"]
            combined = read_recap(answer("Combined.", ["Kaito"], ""), "stop")  # the helper drops Mei and Rin
            next_parts.append(finish_combined(combined, group))
        assert len(next_parts) < len(parts)
        parts = next_parts
    assert rounds >= 2
    final = parts[0]
    assert (final.first, final.last) == (100, 159)
    assert set(final.recap.participants) == {"Kaito", "Mei", "Rin"}
    assert final.recap.timeframe == "night"
    assert recap_header(final.first, final.last, final.recap.timeframe) == (
        "Messages #100–#159; story timeframe: night."
    )
    assert missing_speakers(final.recap, speakers, characters=speakers, persona="Ann") == []


def test_combine_groups_take_at_least_two_parts_even_past_the_budget():
    big = Recap("word " * 2000, ("Kaito",), "")
    parts = [RecapPart(n, n, big) for n in range(5)]
    assert [len(g) for g in combine_groups(parts, input_budget_tokens=300)] == [2, 2, 1]


# Participants -------------------------------------------------------------------------------------

CAST = ["Kaito Nakamura", "Mei Tanaka", "Rin", "Hana Sato", "Hana Mori"]


def test_a_short_name_counts_when_it_matches_exactly_one_character():
    assert match_participants(["Kaito", "nakamura", "Rin"], CAST, "Ann") == (["Kaito Nakamura", "Rin"], [])
    assert match_participants(["KAITO NAKAMURA"], CAST, None) == (["Kaito Nakamura"], [])


def test_shared_names_descriptions_and_notes_do_not_count():
    named = ["Hana", "Kaito's sister", "Mei (mentioned)", "Rin [absent]", "The guard"]
    assert match_participants(named, CAST, "Ann") == ([], named)


def test_a_name_that_is_also_the_persona_s_does_not_count():
    assert match_participants(["Mei"], CAST, "Mei Kobayashi") == ([], ["Mei"])
    # the persona itself is expected in the list: in neither result
    assert match_participants(["Mei Kobayashi", "Rin"], CAST, "Mei Kobayashi") == (["Rin"], [])
    # a character sharing the persona's full name: who was there is unclear
    assert match_participants(["Rin"], CAST, "Rin") == ([], ["Rin"])


def test_a_card_name_with_a_note_matches_itself():
    assert match_participants(["Kaito (ghost)"], ["Kaito (ghost)", "Kaito"], None) == (["Kaito (ghost)"], [])


def test_a_dropped_participant_is_reported_and_the_retry_names_them():
    recap = read_recap(answer(participants=["Kaito", "Ann"]), "stop")
    speakers = ["Kaito Nakamura", "Mei Tanaka"]
    missing = missing_speakers(recap, speakers, characters=CAST, persona="Ann")
    assert missing == ["Mei Tanaka"]
    system, _ = recap_request([msg(1, "Hi.")], first_number=1, last_number=1, must_include=missing)
    assert "Mei Tanaka" in system["content"]
    assert missing_speakers(recap, ["Kaito Nakamura", "Ann"], characters=CAST, persona="Ann") == []


def test_the_audience_never_silently_leaves_out_a_speaker():
    recap = read_recap(answer(participants=["Kaito"]), "stop")
    audience = recap_audience(
        recap, speakers=["Kaito Nakamura", "Rin"], characters=CAST, persona="Ann", group=True
    )
    assert audience == Audience(("Kaito Nakamura", "Rin"), True, False)
    all_named = read_recap(answer(participants=["Kaito", "Rin", "Ann"]), "stop")
    assert recap_audience(
        all_named, speakers=["Rin"], characters=CAST, persona="Ann", group=True
    ) == Audience(("Kaito Nakamura", "Rin"), False, False)


def test_the_audience_when_the_helper_does_not_say_or_names_only_the_persona():
    unsaid = read_recap(answer(participants=None), "stop")
    assert recap_audience(unsaid, speakers=[], characters=CAST, persona="Ann", group=True) == Audience(
        tuple(CAST), True, False
    )
    assert recap_audience(unsaid, speakers=[], characters=["Rin"], persona="Ann", group=False) == Audience(
        ("Rin",), False, False
    )
    only_me = read_recap(answer(participants=["Ann"]), "stop")
    assert recap_audience(only_me, speakers=[], characters=CAST, persona="Ann", group=True) == Audience(
        (), False, True
    )
    shared = read_recap(answer(participants=["Hana"]), "stop")
    assert recap_audience(shared, speakers=[], characters=CAST, persona="Ann", group=True).check_who_was_there


# Header and timeline ------------------------------------------------------------------------------


def test_the_header_states_the_range_and_the_timeframe_or_message_order():
    assert recap_header(3, 9, "the next morning") == "Messages #3–#9; story timeframe: the next morning."
    assert recap_header(3, 9, "") == "Messages #3–#9; story timeframe: unknown (use message order)."
    assert recap_header(4, 4, "  noon\n") == "Message #4; story timeframe: noon."


def test_timeline_anchors_from_date_lines_and_relative_phrases():
    scene = [
        msg(1, "**Date:** 3 May 1890\nThe ship docks."),
        msg(2, "Nothing about time here."),
        msg(3, "The next morning, they left. Three days later they arrived."),
        msg(4, "> Story time: evening"),
        msg(5, "Date:"),
    ]
    assert timeframe_hint(scene) == (
        "Date: 3 May 1890 (#1); The next morning (#3); Three days later (#3); Story time: evening (#4)"
    )
    assert timeframe_hint([msg(1, "No anchors.")]) == ""


def test_anchors_are_bounded_to_the_first_and_last():
    scene = [msg(n, f"{n} days later") for n in range(1, 50)]
    anchors = timeline_anchors(scene)
    assert len(anchors) == MAX_ANCHORS
    assert [a.number for a in anchors] == [1, 2, 3, 47, 48, 49]
    repeated = [msg(n, "The next morning.") for n in range(1, 4)]
    assert len(timeline_anchors(repeated)) == 1
