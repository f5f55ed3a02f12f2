"""The overlap check that holds a refusal or an unrelated answer for review (issue 21, item 7), tried on
realistic roleplay messages with summaries a model writes of them (names, places, paraphrase) and with
the refusals and stray answers models give instead."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.memory.summaries.core.overlap import UNRELATED, content_words, says_nothing, shared_words, unrelated
from app.memory.summaries.core.prompts import TranscriptLine, transcript

HARBOUR = transcript(
    [
        TranscriptLine(
            "Mira",
            "*She pulls her hood lower as the rain hammers the docks of Saltmere.* We need a boat "
            "before the tide turns. The harbourmaster owes me a favour, but he won't like it.",
        ),
        TranscriptLine(
            "Kael",
            "Then we don't ask him. I saw a fishing skiff tied up by the old lighthouse. Nobody "
            "guards it after dark.",
        ),
        TranscriptLine(
            "Mira",
            "Stealing from fishermen? *She sighs.* Fine. But we leave coin on the pier. I'm not "
            "starting this voyage with a curse on us.",
        ),
        TranscriptLine(
            "Kael",
            "*He grins and tosses a silver piece onto the wet planks.* For luck, then. Now hurry, "
            "the lanterns on the watchtower are lighting up.",
        ),
        TranscriptLine(
            "Mira", "*They row out past the breakwater, the lighthouse beam sweeping just over their heads.*"
        ),
    ]
)

THRONE = transcript(
    [
        TranscriptLine(
            "Queen Isolde",
            "You kneel before me, yet your letters to the Duke of Varn say otherwise. "
            "Explain yourself, Lord Aldric.",
        ),
        TranscriptLine(
            "Aldric",
            "Your Majesty, those letters were forged. My seal was stolen in Highgarden three "
            "weeks ago; I reported it to the captain of your guard.",
        ),
        TranscriptLine(
            "Queen Isolde",
            "Captain Rhys says no such report exists. *She turns the ring on her finger.* "
            "You have until the feast of Saint Elowen to prove it.",
        ),
        TranscriptLine(
            "Aldric",
            "Then I ask leave to ride to Highgarden at dawn, and for Rhys to come with me, so he "
            "sees with his own eyes what I find.",
        ),
    ]
)

CAFE = transcript(
    [
        TranscriptLine(
            "Alex",
            "I finally told my sister about the new job in Lisbon. She cried, then asked if she "
            "could visit in spring.",
        ),
        TranscriptLine("Noa", "That's huge! How do you feel about leaving Porto after six years?"),
        TranscriptLine("Alex", "Nervous. I'll miss the bakery on our street and the Sunday football games."),
        TranscriptLine(
            "Noa",
            "You can come back for the games. And Lisbon has better custard tarts anyway, don't "
            "tell the bakery.",
        ),
    ]
)

TOKYO = transcript(
    [
        TranscriptLine("ユキ", "昨日、渋谷の古本屋で祖父の日記を見つけたの。表紙に桜の絵が描いてあった。"),
        TranscriptLine("ハル", "本当に？中には何が書いてあったの？"),
        TranscriptLine(
            "ユキ", "戦争の後、京都で小さな喫茶店を開いたことが書いてあった。名前は「月光」だって。"
        ),
    ]
)

GOOD = [
    # names and places as they appear
    (
        "harbour, names and places",
        HARBOUR,
        "In the rain at Saltmere, Mira and Kael decided against asking the harbourmaster and took a fishing skiff "
        "from beside the old lighthouse, leaving a silver coin on the pier for luck before rowing out past the "
        "breakwater.",
    ),
    # no names at all: places and objects carry it
    (
        "harbour, no names",
        HARBOUR,
        "The pair stole a small boat from the docks at night, paid for it with a coin, and slipped out of the "
        "harbor under the lighthouse beam.",
    ),
    # paraphrase: different forms of the same words (rowed/row, lanterns/lantern)
    ("harbour, paraphrase", HARBOUR, "They rowed away as the watchtower lit its lanterns."),
    (
        "court intrigue",
        THRONE,
        "Queen Isolde confronted Lord Aldric over letters to the Duke of Varn. Aldric claimed they were forged "
        "with a seal stolen in Highgarden; Captain Rhys denied any report. The queen gave him until the feast of "
        "Saint Elowen, and he asked to ride out at dawn with Rhys as witness.",
    ),
    (
        "court intrigue, short",
        THRONE,
        "Aldric must clear his name before the feast; he rides for Highgarden.",
    ),
    (
        "conversation",
        CAFE,
        "Alex told their sister about the job in Lisbon and feels nervous about leaving Porto; Noa cheered them "
        "on and joked about the custard tarts.",
    ),
    (
        "japanese",
        TOKYO,
        "ユキは渋谷の古本屋で祖父の日記を見つけた。祖父は戦後、京都で喫茶店「月光」を開いていた。",
    ),
    ("summary label and markdown", HARBOUR, "**Summary:** Mira & Kael — *stolen skiff*, Saltmere docks."),
]

BAD = [
    ("prose refusal", HARBOUR, "I would rather not say."),
    ("apology", THRONE, "I'm sorry, but I can't help with that request."),
    (
        "policy refusal",
        HARBOUR,
        "I apologize, but I cannot summarize this content as it may not be appropriate according to my "
        "guidelines. Is there anything else I can help you with?",
    ),
    ("as an AI", CAFE, "As an AI language model, I don't feel comfortable sharing personal information."),
    ("asks a question back", THRONE, "Could you please provide the messages you would like me to summarise?"),
    ("empty placeholder", HARBOUR, "Summary: N/A"),
    (
        "off topic",
        HARBOUR,
        "To bake sourdough, mix flour, water and salt, fold the dough every half hour, then proof it overnight.",
    ),
    (
        "another story",
        CAFE,
        "The dragon Vermithrax burned the village of Oakvale and flew north to his cave.",
    ),
    ("won't", HARBOUR, "I won't do that."),
    ("japanese refusal", TOKYO, "申し訳ありませんが、その依頼にはお応えできません。"),
]


@pytest.mark.parametrize(("name", "source", "summary"), GOOD, ids=[g[0] for g in GOOD])
def test_real_summaries_pass(name, source, summary):
    assert unrelated(summary, source) is None, (name, content_words(summary), content_words(source))
    assert shared_words(summary, source)


@pytest.mark.parametrize(("name", "source", "answer"), BAD, ids=[b[0] for b in BAD])
def test_refusals_and_unrelated_answers_are_held(name, source, answer):
    assert unrelated(answer, source) == UNRELATED, (name, shared_words(answer, source))


def test_key_details_count_with_the_summary():
    day = transcript(
        [
            TranscriptLine("Alex", "Dentist on Friday at nine, then lunch with Priya near the river."),
            TranscriptLine("Noa", "Don't forget the umbrella, the forecast says storms all afternoon."),
        ]
    )
    assert unrelated(["A calm, ordinary day.", "Dentist on Friday at 9", "Lunch with Priya"], day) is None
    assert unrelated(["I cannot help with that.", "N/A"], day) == UNRELATED


def test_too_little_to_judge_passes_unless_the_answer_says_nothing_at_all():
    tiny = transcript([TranscriptLine("Alex", "ok"), TranscriptLine("Noa", "*nods* sure.")])
    assert unrelated("They agreed.", tiny) is None
    assert unrelated("I would rather not say.", tiny) == UNRELATED


@pytest.mark.parametrize(
    "answer",
    [
        ["I would rather not say."],
        ["I'm sorry, but I can't summarize this conversation.", ""],
        ["As an AI language model, I cannot help with that request."],
        ["N/A"],
        ["Summary:", "None"],
    ],
)
def test_an_answer_made_only_of_refusal_words_says_nothing(answer):
    assert says_nothing(answer)


@pytest.mark.parametrize(
    "answer",
    [
        ["A slow, warm evening of small talk and quiet company."],  # a day's field notes sharing no word
        ["Summary number 1.", "detail 1"],
        ["They agreed."],
        ["雨の日、静かな会話。"],
    ],
)
def test_an_answer_with_words_of_its_own_says_something(answer):
    assert not says_nothing(answer)


def test_a_refusal_that_happens_to_use_a_word_of_the_messages_still_fails():
    source = transcript(
        [
            TranscriptLine("Mira", "I'd rather not say where the key is, Kael. Not yet."),
            TranscriptLine("Kael", "Then tell me why the abbey bells stopped ringing at midnight."),
        ]
    )
    assert unrelated("I would rather not say.", source) == UNRELATED
    assert unrelated("Mira refused to say where the key was; the abbey bells had stopped.", source) is None


WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=4, max_size=10)


@given(st.lists(WORD, min_size=8, max_size=40, unique=True), st.data())
def test_a_summary_quoting_any_content_word_of_its_messages_passes(words, data):
    source = "Mira: " + " ".join(words)
    word = data.draw(st.sampled_from(words))
    if content_words(word):  # not a stopword or a word refusals are made of
        assert unrelated(f"Then {word} happened.", source) is None


@given(st.lists(WORD, min_size=8, max_size=40, unique=True))
def test_an_answer_sharing_no_word_is_held_when_there_is_enough_to_judge(words):
    source = "Mira: " + " ".join(words)
    if len(content_words(source)) >= 6:
        assert unrelated("I would rather not say; sorry.", source) == UNRELATED
