"""The one reader of model answers (app/connections/core/answers.py): reasoning apart from the text, whole or
streamed in any pieces, and the reply's timing and judgement (app/generation/reasoning.py)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from app.connections.core.answers import (
    THINK_CLOSE,
    THINK_OPEN,
    Answer,
    Piece,
    ReasoningSplitter,
    read_answer,
    strip_thinking,
    without_reasoning,
)
from app.generation.reasoning import (
    EMPTY_REPLY,
    ONLY_THINKING,
    ReplyReading,
    thought_label,
    version_reasoning,
)


def stream(deltas, reasoning=()):
    """Feed the deltas one by one; (pieces, splitter)."""
    splitter = ReasoningSplitter()
    pieces = [p for r in reasoning for p in splitter.feed_reasoning(r)]
    for delta in deltas:
        pieces += splitter.feed(delta)
    pieces += splitter.finish()
    return pieces, splitter


def shown_text(pieces):
    """The reply text a page shows from the pieces: text appended, `moved` clears it."""
    text = ""
    for piece in pieces:
        if piece.kind == "text":
            text += piece.text
        elif piece.kind == "moved":
            text = ""
    return text


def shown_reasoning(pieces):
    """The reasoning a page shows from the pieces: reasoning appended, `moved` takes the text shown."""
    reasoning = text = ""
    for piece in pieces:
        if piece.kind == "text":
            text += piece.text
        elif piece.kind == "moved":
            reasoning, text = reasoning + text, ""
        else:
            reasoning += piece.text
    return reasoning


def _visible(text):
    return "".join(text.split())


# Whole answers -------------------------------------------------------------------------------------


def test_blocks_of_each_name_and_case_are_reasoning_wherever_they_are():
    assert read_answer("<think>Plan the scene.</think>\n\nAria bows.") == Answer(
        "Aria bows.", "Plan the scene.", True
    )
    assert read_answer("<THINKING>hmm</THINKING>A. <reasoning a='1'>x</reasoning>B.") == Answer(
        "A. B.", "hmm\n\nx", True
    )
    assert read_answer("Just words.") == Answer("Just words.", "", False)
    assert read_answer("<think></think>Hi") == Answer("Hi", "", True)


def test_an_unclosed_block_makes_the_rest_reasoning():
    assert read_answer("Sure. <think>wait, maybe not") == Answer("Sure.", "wait, maybe not", True)
    assert read_answer("<think>still thinking when the budget ran out") == Answer(
        "", "still thinking when the budget ran out", True
    )


def test_a_closer_before_any_opener_makes_everything_before_it_reasoning():
    # R1/QwQ templates put <think> in the prompt: the answer starts inside the block
    assert read_answer("Okay, the user greets me.\n</think>\n\nHello!") == Answer(
        "Hello!", "Okay, the user greets me.", True
    )
    # later stray closers are dropped, the text around them kept
    assert read_answer("<think>a</think>One</think> two") == Answer("One two", "a", True)


def test_an_opener_inside_a_block_is_part_of_the_reasoning():
    assert read_answer("<think>I could write <think> here</think>Done") == Answer(
        "Done", "I could write <think> here", True
    )


def test_the_providers_reasoning_field_comes_first():
    assert read_answer("Hello.", "The user said hi.") == Answer("Hello.", "The user said hi.", True)
    assert read_answer("<think>inline</think>Hello.", "field") == Answer("Hello.", "field\n\ninline", True)
    assert read_answer("", "only the field") == Answer("", "only the field", True)


def test_look_alikes_are_text():
    for text in ("<thinker>no</thinker>", "a < b > c", "<think-tank is here", "</ think>", "<b>bold</b>"):
        assert read_answer(text) == Answer(text.strip(), "", False), text


def test_strip_thinking_keeps_its_old_answer_shape():
    assert strip_thinking("<think>x</think> The recap.").answer == "The recap."
    assert strip_thinking("The recap.").had_thinking is False


def test_stored_text_without_tags_comes_back_unchanged():
    assert without_reasoning("  Hello\n") == "  Hello\n"
    assert without_reasoning("<think>secret</think>Visible") == "Visible"


def test_hostile_answers_are_read_in_linear_time():
    for text in ("<think></think>" * 50_000, "</think>" * 50_000, "<" * 100_000, "<think a" * 40_000):
        read_answer(text)  # seconds with a scan per tag; here well under one


# Streams --------------------------------------------------------------------------------------------


def test_a_tag_cut_across_deltas_never_shows_in_the_text():
    pieces, splitter = stream(["Hi <th", "ink>plan</th", "ink>", " there"])
    texts = [p.text for p in pieces if p.kind == "text"]
    assert texts == ["Hi ", "there"] and splitter.reasoning == "plan"
    pieces, _ = stream(["<", "t", "h", "i", "n", "k", ">", "x", "<", "/", "t", "h", "i", "n", "k", ">", "A"])
    assert [p for p in pieces if p.kind == "text"] == [Piece("text", "A")]


def test_a_held_start_that_cannot_become_a_tag_is_shown_at_once():
    pieces, _ = stream(["a <", "b>"])
    assert [p.text for p in pieces if p.kind == "text"] == ["a ", "<b>"]
    splitter = ReasoningSplitter()
    assert splitter.feed("x <thinker") == [Piece("text", "x <thinker")]


def test_a_closer_first_moves_what_was_shown_into_the_reasoning():
    pieces, splitter = stream(["Let me ", "see.</think>", "Hello"])
    assert [p.kind for p in pieces] == ["text", "text", "moved", "text"]
    assert shown_text(pieces) == "Hello" and splitter.reasoning == "Let me see."


def test_whitespace_after_reasoning_is_dropped_even_in_pieces():
    pieces, _ = stream(["\n", "\n", "Hi"], reasoning=["r"])
    assert shown_text(pieces) == "Hi"
    pieces, _ = stream(["<think>r</think>", " ", "\n", " Hi ", "there "])
    assert shown_text(pieces) == "Hi there "  # only the whitespace after the reasoning goes


_FRAGMENTS = st.sampled_from(
    [
        "<think>",
        "</think>",
        "<thinking x='1'>",
        "</reasoning >",
        "<THINK>",
        "<",
        "</",
        ">",
        "think",
        "a",
        " ",
        "\n",
        "Hello",
        "<b>",
        "<think",
        "</thi",
        "nk>",
    ]
)


@settings(max_examples=400, deadline=None)
@given(parts=st.lists(_FRAGMENTS, max_size=30), data=st.data())
def test_any_cut_of_a_stream_reads_as_the_whole_answer(parts, data):
    text = "".join(parts)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=12)))
    deltas = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    pieces, splitter = stream(deltas)
    whole = read_answer(text)
    assert splitter.text.strip() == whole.text and splitter.reasoning == whole.reasoning
    assert splitter.had_reasoning == whole.had_reasoning
    # what the page shows while streaming is what the stored reply holds
    assert shown_text(pieces) == splitter.text
    assert _visible(shown_reasoning(pieces)) == _visible(whole.reasoning)


@settings(max_examples=200, deadline=None)
@given(words=st.lists(st.sampled_from(["Hello", " ", "world", "\n", "<b>", "a < b", "x>y"]), max_size=20))
def test_text_without_tags_streams_through_unchanged(words):
    text = "".join(words)
    pieces, splitter = stream(list(text))
    assert splitter.text == text and shown_text(pieces) == text
    assert not THINK_OPEN.search(shown_text(pieces)) and not THINK_CLOSE.search(shown_text(pieces))


# The reply: timing and judgement ------------------------------------------------------------------


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_thinking_time_runs_from_the_request_to_the_first_words():
    clock = Clock()
    reading = ReplyReading(clock)
    clock.now = 103.0
    reading.feed("", "hmm")
    assert reading.take_thought() is None  # still thinking
    clock.now = 112.4
    reading.feed("Hello")
    assert reading.take_thought() == 12_400 and reading.take_thought() is None
    clock.now = 200.0
    reading.feed(" more")
    reading.finish()
    assert reading.reasoning_ms == 12_400 and reading.reasoning == "hmm"


def test_thinking_to_the_end_counts_to_the_end():
    clock = Clock()
    reading = ReplyReading(clock)
    reading.feed("<think>still")
    clock.now = 130.0
    reading.finish()
    assert reading.reasoning_ms == 30_000
    assert reading.silence("") == ("only_thinking", ONLY_THINKING)


def test_a_reply_that_says_nothing_is_named_by_why():
    reading = ReplyReading(Clock())
    reading.feed("  \n")
    reading.finish()
    assert reading.silence("  \n") == ("empty", EMPTY_REPLY) and reading.reasoning_ms is None
    assert reading.silence("Hi") is None


def test_a_continuation_adds_its_reasoning_and_time_to_the_versions():
    clock = Clock()
    reading = ReplyReading(clock)
    reading.feed("", "second thought")
    clock.now = 102.0
    reading.feed("more")
    assert version_reasoning({"reasoning": "first", "reasoning_ms": 5000}, reading) == {
        "reasoning": "first\n\nsecond thought",
        "reasoning_ms": 7000,
    }
    assert version_reasoning({}, None) == {}
    assert version_reasoning({"reasoning": "kept"}, None) == {"reasoning": "kept", "reasoning_ms": None}


def test_the_folds_title():
    assert thought_label(12_400) == "Thought for 12 s"
    assert thought_label(300) == "Thought for less than a second"
    assert thought_label(125_000) == "Thought for 2 min 5 s"
    assert thought_label(120_000) == "Thought for 2 min"
    assert thought_label(None) == "Reasoning"
