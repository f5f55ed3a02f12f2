"""Deliberate Tool Mode's triggers: literal messages in, declared tools out."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.tools.core.deliberate import (
    MAX_PHRASE_CHARS,
    RecentToolTurn,
    declare,
    fold,
    normalise_phrase,
    phrase_matches,
    phrase_problem,
)

AVAILABLE = {
    "create_task": "task",
    "update_task": "task",
    "web_search": "web_search",
    "fetch_url": "url_fetch",
    "create_long_term_memory": "memory",
    "update_long_term_memory": "memory",
    "update_short_term_memory": "short_term_memory",
    "read_document": "document",
    "manage_message": "manage_message",
    "message_metadata": "metadata",
    "update_user_info": "user_info",
    "review_capabilities": "capabilities",
    "mcp_notes__add_note": "mcp",
}
FAMILY_TOOLS = {
    "task": {"create_task", "update_task"},
    "web_search": {"web_search", "fetch_url"},  # a search often needs the page read next
    "url_fetch": {"fetch_url"},
    "memory": {"create_long_term_memory", "update_long_term_memory", "update_short_term_memory"},
    "document": {"read_document"},
    "manage_message": {"manage_message"},
    "metadata": {"message_metadata"},
    "user_info": {"update_user_info"},
    "capabilities": {"review_capabilities"},
}


def declared(message, previous=(), custom=None, available=AVAILABLE):
    return set(declare(message, previous=previous, custom=custom or {}, available=available).names)


EXAMPLES = {
    "task": {
        "en": [
            "remind me tomorrow",
            "Set an alarm for 7am please",
            "ping me in 10 minutes",
            "cancel my reminder",
        ],
        "pt": [
            "lembra-me amanhã às 9",
            "me avisa daqui a 10 minutos",
            "cria um lembrete",
            "lembra-me de comprar pão",
        ],
        "es": [
            "recuérdame mañana a las 9",
            "avísame en 5 minutos",
            "pon una alarma",
            "cancela el recordatorio",
        ],
        "ru": ["напомни мне завтра", "напомни в 9", "поставь будильник на 7", "отмени напоминание"],
    },
    "web_search": {
        "en": [
            "search the web for rust 2.0",
            "can you look it up online?",
            "what's the latest news on the election",
        ],
        "pt": ["pesquisa isso na internet", "quais as últimas notícias?"],
        "es": ["busca en internet el clima", "¿cuáles son las últimas noticias?"],
        "ru": ["погугли погоду", "найди это в интернете", "последние новости"],
    },
    "url_fetch": {
        "en": ["can you read https://example.com/a and summarize it?"],
        "pt": ["lê este link https://example.com/a por favor"],
        "es": ["resume www.example.com/post"],
        "ru": ["прочитай https://example.com/a"],
    },
    "memory": {
        "en": [
            "Remember that I hate mushrooms.",
            "please remember my birthday is May 3",
            "update your memory",
        ],
        "pt": ["lembre-se que eu odeio cogumelos", "guarda isso", "não esqueça que sou vegetariana"],
        "es": ["no te olvides de que odio los hongos", "acuérdate de mi cumpleaños", "guarda esto"],
        "ru": ["запомни, что я не ем грибы", "забудь это", "не забудь, что у меня кошка"],
    },
    "document": {
        "en": ["please read the attached pdf", "summarize this file for me", "what's in the attachment?"],
        "pt": ["lê o anexo", "resume o arquivo que mandei"],
        "es": ["lee el archivo adjunto", "resume este documento"],
        "ru": ["прочитай этот файл", "что во вложении?"],
    },
    "manage_message": {
        "en": ["edit your last message", "delete that reply"],
        "pt": ["apaga a tua última mensagem", "edita a sua resposta"],
        "es": ["borra tu último mensaje", "edita tu respuesta"],
        "ru": ["удали своё последнее сообщение", "исправь свой ответ"],
    },
    "metadata": {
        "en": ["when did I say that?", "what's the message id?"],
        "pt": ["quando eu disse isso?", "qual o horário da mensagem?"],
        "es": ["¿cuándo dije eso?", "¿cuál es la hora del mensaje?"],
        "ru": ["когда я это сказал?", "какое время сообщения?"],
    },
    "user_info": {
        "en": ["call me Ro from now on", "my pronouns are they/them", "my time zone is UTC+3"],
        "pt": ["me chame de Rô", "meu fuso horário é UTC-3"],
        "es": ["llámame Ro", "mis pronombres son elle"],
        "ru": ["зови меня Ро", "мой часовой пояс UTC+3"],
    },
    "capabilities": {
        "en": ["what can you do?", "which tools do you have?", "why can't you search?"],
        "pt": [
            "o que você consegue fazer?",
            "quais são as suas ferramentas?",
            "por que você não consegue pesquisar?",
        ],
        "es": ["¿qué puedes hacer?", "¿por qué no puedes buscar?"],
        "ru": ["что ты умеешь?", "какие у тебя инструменты?", "почему ты не можешь поискать?"],
    },
}
CASES = [
    (family, language, message)
    for family, languages in EXAMPLES.items()
    for language, messages in languages.items()
    for message in messages
]


@pytest.mark.parametrize(("family", "language", "message"), CASES)
def test_each_family_in_each_language(family, language, message):
    assert FAMILY_TOOLS[family] <= declared(message), (language, message)


@pytest.mark.parametrize(
    "message",
    ["lembra-me amanhã às 9", "remind me tomorrow", "напомни мне завтра", "recuérdame mañana a las 9"],
)
def test_the_issue_s_reminders_declare_the_task_tools_and_only_them(message):
    assert declared(message) == {"create_task", "update_task"}
    match = declare(message, previous=(), custom={}, available=AVAILABLE).matches[0]
    assert match.source == "built-in" and match.family == "task" and match.trigger


ROLEPLAY = (
    "She leaned against the tavern wall, remembering the old days when the two of them had wandered "
    'the northern roads together. "You remind me of him," she said softly, tracing the rim of her cup. '
    "Outside, the rain kept falling; tomorrow the caravan would leave at dawn, and she would search the "
    "crowd for his face one last time. I remember how he laughed. *I open the door and read the letter "
    "she left on the table, then save the last candle for later.*"
)


@pytest.mark.parametrize(
    "message",
    [
        "How are you today?",
        ROLEPLAY,
        "Como você está hoje?",
        "¿Cómo estás hoy?",
        "Как ты сегодня?",
        "Why can't you stay with me?",
        "Save it for later, okay?",
        "Call me when you get home.",
        "Do you remember the first time we met?",
        "I'll see you tomorrow at 9, okay?",
        "*I draw my sword and search the room for traps.*",
        "isso me lembra de quando éramos crianças",
        "Que tal mañana por la mañana?",
        "",
    ],
)
def test_plain_messages_declare_nothing(message):
    assert declared(message) == set()


def test_every_language_is_read_on_every_message():
    mixed = "ok so remind me tomorrow, e pesquisa isso na internet, и запомни это"
    assert declared(mixed) == FAMILY_TOOLS["task"] | FAMILY_TOOLS["web_search"] | FAMILY_TOOLS["memory"]


def test_only_available_tools_are_declared():
    assert declared("remind me tomorrow", available={"web_search": "web_search"}) == set()
    assert declared("remind me tomorrow", available={"create_task": "task"}) == {"create_task"}


def test_a_function_named_in_the_message_is_declared():
    assert declared("use mcp_notes__add_note for this") == {"mcp_notes__add_note"}
    assert declared("call web_search please") >= {"web_search"}


def test_names_and_matches_follow_the_registry_order():
    result = declare("search the web and remind me tomorrow", previous=(), custom={}, available=AVAILABLE)
    assert result.names == ("create_task", "update_task", "web_search", "fetch_url")
    assert [m.name for m in result.matches] == list(result.names)


# Follow-ups and recent tools.

TOOL_TURN = RecentToolTurn(names=("web_search",), turns_ago=1, declared=("web_search", "fetch_url"))


@pytest.mark.parametrize(
    "message",
    [
        "do it again but shorter",
        "faz de novo",
        "otra vez, por favor",
        "ещё раз",
        "please",
        "sim",
        "Sí!",
        "да",
    ],
)
def test_follow_ups_re_declare_the_previous_tool_turn(message):
    result = declare(message, previous=[TOOL_TURN], custom={}, available=AVAILABLE)
    assert set(result.names) == {"web_search", "fetch_url"}
    assert {m.source for m in result.matches} == {"follow-up"}


def test_a_follow_up_needs_a_tool_turn_just_before():
    older = RecentToolTurn(names=(), turns_ago=2, declared=("web_search",))
    assert declared("do it again but shorter", previous=[older]) == set()
    assert declared("please", previous=[]) == set()
    assert declared("please tell me a story", previous=[RecentToolTurn((), 1, ("create_task",))]) == set()


def test_a_tool_used_in_the_last_three_turns_stays_declared():
    previous = [
        RecentToolTurn(("create_task",), 3),
        RecentToolTurn(("web_search",), 4),
        RecentToolTurn(("read_document",), 2),
    ]
    result = declare("and what about the weekend?", previous=previous, custom={}, available=AVAILABLE)
    assert result.names == ("create_task", "read_document")
    assert [(m.source, m.trigger) for m in result.matches] == [
        ("recent", "used 3 turns ago"),
        ("recent", "used 2 turns ago"),
    ]
    assert declared("hello", previous=[RecentToolTurn(("gone_tool",), 1)]) == set()


def test_the_first_reason_wins():
    previous = [RecentToolTurn(("create_task",), 1)]
    result = declare("remind me tomorrow", previous=previous, custom={}, available=AVAILABLE)
    assert {m.source for m in result.matches} == {"built-in"}


# Custom triggers.


def test_custom_phrases_are_normalised_and_match_whole_words():
    custom = {"task": ["  Ping   ME  "], "web_search": ["pic"]}
    assert declared("hey, ping me", custom=custom) == FAMILY_TOOLS["task"]
    assert declared("PING  me!", custom=custom) == FAMILY_TOOLS["task"]
    assert declared("a picnic today", custom=custom) == set()  # "pic" is not in "picnic"
    assert declared("send a pic", custom=custom) == FAMILY_TOOLS["web_search"]
    result = declare("send a pic", previous=(), custom=custom, available=AVAILABLE)
    assert {(m.source, m.trigger) for m in result.matches} == {("custom", "pic")}


def test_a_star_matches_words_starting_so():
    custom = {"reminder": ["remind*"]}  # TomoriBot's target name works too
    for message in ("reminding you", "a Reminder", "remind"):
        assert declared(message, custom=custom) == FAMILY_TOOLS["task"], message
    assert declared("unremindful", custom=custom) == set()


def test_cjk_phrases_match_inside_words():
    custom = {"task": ["提醒"], "memory": ["覚えて"], "web_search": ["검색"]}
    assert declared("明天早上提醒我开会", custom=custom) == FAMILY_TOOLS["task"]
    assert declared("これを覚えてね", custom=custom) == FAMILY_TOOLS["memory"]
    assert declared("날씨검색해줘", custom=custom) == FAMILY_TOOLS["web_search"]


def test_accents_and_case_do_not_matter_and_keys_may_name_a_function():
    custom = {"update_user_info": ["Apelidão"], "document": ["c++"]}
    assert declared("meu APELIDAO é Ro", custom=custom) == {"update_user_info"}
    assert declared("compile my c++ code", custom=custom) == {"read_document"}


def test_phrase_limits_and_problems():
    assert phrase_problem("remind*") is None
    assert phrase_problem("   ") and phrase_problem("*")
    assert phrase_problem("x" * (MAX_PHRASE_CHARS + 1))
    assert phrase_problem("re*mind") and phrase_problem("remind**")
    assert declared("anything", custom={"task": ["*", "", "re*mind"]}) == set()
    assert normalise_phrase("  Recuérdame\t ahora ") == "recuerdame ahora"


def test_folding_keeps_cyrillic_letters():
    assert fold("Ёлка ЙОД Ça Mañana Don’t") == "ёлка йод ca manana don't"


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab -*_é提", max_size=12), st.text(alphabet="ab -_é提.", max_size=60))
def test_phrase_matching_agrees_with_a_word_by_word_reading(phrase, text):
    phrase, text = normalise_phrase(phrase), fold(text)
    if phrase_problem(phrase) is not None or "提" in phrase or " " in phrase.rstrip("*"):
        return
    words = [w for w in "".join(c if c.isalnum() or c in "_-" else " " for c in text).split()]
    stem = phrase.rstrip("*")
    if not all(c.isalnum() or c in "_-" for c in stem):
        return
    expected = any(w.startswith(stem) if phrase.endswith("*") else w == stem for w in words)
    assert phrase_matches(phrase, text) == expected


def test_hostile_messages_and_phrases_stay_linear():
    # Structure, not time: a long message is read at its start and end, each phrase with str.find.
    long = "remind " * 200_000 + "me tomorrow"
    assert declared(long) == FAMILY_TOOLS["task"]
    assert declared("a" * 500_000, custom={"task": ["a" * 99 + "b"]}) == set()
    assert declared("(" * 100_000 + "https://x.y " * 1000) == set()


def test_a_long_message_is_read_at_its_start_and_its_end():
    filler = "The caravan moved on through the valley. " * 2_000
    assert declared("remind me tomorrow. " + filler) == FAMILY_TOOLS["task"]
    assert declared(filler + " search the web for this") == FAMILY_TOOLS["web_search"]
    assert declared(filler + " search the web for this " + filler) == set()  # the middle is not read
