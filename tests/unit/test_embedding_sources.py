from app.memory.recall.core.sources import (
    ConnectionInfo,
    builtins_in_use,
    choose_embedding_source,
    parse_default,
)

PLAIN = ConnectionInfo(1, "Local chat", "openai", "http://127.0.0.1:8080/v1", None)
OWN = ConnectionInfo(
    2, "OpenAI", "openai", "https://api.openai.com/v1", "sk-own", embedding_model="text-embedding-3-small"
)
OWN_URL = ConnectionInfo(
    3,
    "Ollama chat",
    "openai",
    "http://127.0.0.1:11434/v1",
    "k3",
    embedding_model="nomic-embed-text",
    embedding_url="http://10.0.0.5:11434/v1",
)
BORROWS = ConnectionInfo(
    4,
    "Claude",
    "anthropic",
    "https://api.anthropic.com/v1",
    "ak",
    embedding_model="text-embedding-3-small",
    embedding_connection_id=2,
)
ALL = {c.id: c for c in (PLAIN, OWN, OWN_URL, BORROWS)}


def choose(chat_builtin=None, chat_connection=None, default=None):
    return choose_embedding_source(
        chat_builtin=chat_builtin, chat_connection=chat_connection, default=default, connections=ALL
    )


def test_nothing_set_gives_the_builtin_minilm():
    choice = choose(chat_connection=PLAIN)
    assert (choice.kind, choice.model, choice.origin) == ("builtin", "all-MiniLM-L6-v2", "the built-in model")


def test_the_chat_connections_embedding_model_comes_first():
    choice = choose(chat_connection=OWN, default="connection:3")
    assert (choice.kind, choice.model, choice.base_url, choice.api_key) == (
        "openai",
        "text-embedding-3-small",
        "https://api.openai.com/v1",
        "sk-own",
    )
    assert "chat's connection" in choice.origin


def test_own_endpoint_url_keeps_the_connections_key():
    choice = choose(chat_connection=OWN_URL)
    assert (choice.base_url, choice.api_key) == ("http://10.0.0.5:11434/v1", "k3")


def test_borrowing_uses_the_other_connections_key_and_address():
    choice = choose(chat_connection=BORROWS)
    assert (choice.base_url, choice.api_key, choice.model) == (
        "https://api.openai.com/v1",
        "sk-own",
        "text-embedding-3-small",
    )
    assert "“OpenAI”" in choice.origin


def test_defaults_serve_connections_without_their_own_model():
    choice = choose(chat_connection=PLAIN, default="connection:3")
    assert (choice.model, choice.origin) == ("nomic-embed-text", "Connections → Defaults")
    assert (
        choose(chat_connection=PLAIN, default="builtin:multilingual-e5-small").model
        == "multilingual-e5-small"
    )


def test_a_default_connection_that_lost_its_model_falls_back_to_builtin():
    choice = choose(chat_connection=PLAIN, default="connection:1")
    assert choice.kind == "builtin" and "no embedding model" in choice.origin
    assert choose(chat_connection=PLAIN, default="connection:99").kind == "builtin"


def test_a_chats_own_builtin_pick_wins():
    choice = choose(chat_builtin="multilingual-e5-small", chat_connection=OWN, default="connection:3")
    assert (choice.kind, choice.model, choice.origin) == (
        "builtin",
        "multilingual-e5-small",
        "this chat's setting",
    )


def test_bad_default_values_read_as_builtin():
    assert parse_default("connection:x") == ("builtin", "all-MiniLM-L6-v2")
    assert parse_default("builtin:unknown") == ("builtin", "all-MiniLM-L6-v2")
    assert parse_default(None) == ("builtin", "all-MiniLM-L6-v2")
    assert parse_default("connection:12") == ("connection", 12)


def test_the_builtin_models_the_data_uses():
    def used(chats, default=None):
        return builtins_in_use(chats, default=default, connections=ALL)

    assert used([]) == set()  # no chat yet: nothing to load at start
    assert used([(None, PLAIN)]) == {"all-MiniLM-L6-v2"}
    assert used([(None, None)], default="connection:2") == set()
    assert used([(None, OWN)]) == set()
    assert used([("multilingual-e5-small", OWN)]) == {"multilingual-e5-small"}
    assert used([(None, PLAIN), ("multilingual-e5-small", None)]) == {
        "all-MiniLM-L6-v2",
        "multilingual-e5-small",
    }
    assert used([(None, None)], default="builtin:multilingual-e5-small") == {"multilingual-e5-small"}
