"""Memory Recall ranking that word matching alone cannot pass, and that vectors alone cannot pass:
the real built-in model (all-MiniLM-L6-v2), SQLite FTS5 and the sign-bit index, through the search API.

Each memory is one message of its own chunk, so a chunk's rank is the rank of that memory."""

from datetime import UTC, datetime

import pytest
from sqlmodel import Session, select

from app.chats.core.window import MIN_RECENT_LIMIT
from app.chats.service import new_message
from app.memory.recall.core.lexical import index_text, query_terms
from app.memory.recall.jobs import embed_chat
from app.memory.recall.models import MemoryChunk
from tests.conftest import add_character, new_chat

# The other four messages of each memory's chunk: short, and sharing no word with any query below.
REPLIES = ("Go on.", "Hmm.", "I see.", "Really?")

# Each target says what its query asks in other words. The distractors are near it in topic (an
# animal, an old man at work, an engagement, a ship, a cough) but answer no query; no memory shares
# a word with any query, so the word side scores every chunk 0 and only the vectors can rank.
PARAPHRASES = {
    "the elderly gardener's dog": "Old Tom who tends the roses has a beagle.",
    "the physician's wife": "Doctor Aldous married a seamstress called Ines.",
    "the captain's illness": "The ship's commander has been coughing blood since winter.",
}
DISTRACTORS = (
    "A black cat sleeps every afternoon on the bakery's windowsill.",
    "The lighthouse keeper waves a lantern at every passing vessel.",
    "The mayor's son is engaged to a fisherman's daughter from the bay.",
    "We bought a grey mare named Pepper from the stables at the crossroads.",
    "The merchant sold us salted fish and two loaves of bread at the market.",
    "Rowan lost a game of dice to a soldier and owes him three coins.",
    "Aria tuned her lute by the campfire and hummed an old ballad.",
    "The miller's boy sneezes all spring because of the pollen.",
)


def _chat_with_memories(api, sugo, memories) -> tuple[int, dict[str, int], list[str]]:
    """A chat holding `memories`, each the first message of its own chunk, chunked and embedded by
    the real job; returns the chat id, each memory's chunk id and the text of every chunk."""
    char = add_character(api)
    chat_id = new_chat(api, [char["id"]])["id"]
    # The live window (the newest messages) is never chunked: the smallest one allowed, filled.
    r = api.put(
        f"/api/chats/{chat_id}/options", json={"settings": {"recent_message_limit": MIN_RECENT_LIMIT}}
    )
    assert r.status_code == 200, r.text
    tail = [f"Day {i}." for i in range(MIN_RECENT_LIMIT)]
    lines = [line for memory in memories for line in (memory, *REPLIES)] + tail
    with Session(sugo.engine) as s:
        for i, line in enumerate(lines):
            role, name, character_id = ("user", "Rowan", None) if i % 2 else ("assistant", "Aria", char["id"])
            s.add(new_message(chat_id, role, name, [line], character_id=character_id))
        s.commit()
    embed_chat(sugo.services, chat_id)
    with Session(sugo.engine) as s:
        chunks = list(s.exec(select(MemoryChunk).where(MemoryChunk.chat_id == chat_id)))
    assert all(c.status == "vectorized" for c in chunks)
    chunk_of = {m: [c.id for c in chunks if m in c.content] for m in memories}
    assert all(len(ids) == 1 for ids in chunk_of.values()), chunk_of
    return chat_id, {m: ids[0] for m, ids in chunk_of.items()}, [c.content for c in chunks]


def _search(api, chat_id, query) -> list[dict]:
    r = api.get(f"/api/chats/{chat_id}/memories/search", params={"q": query, "k": 50})
    assert r.status_code == 200, r.text
    return r.json()["results"]


def _shared_words(query, text) -> set[str]:
    """The words the full-text index would match between a query and a memory (stemmed, without
    stopwords; in any one chat, so the chat prefix both sides carry does not matter)."""
    return set(query_terms(query, 0)) & set(index_text(text, 0).split())


@pytest.fixture
def paraphrase_chat(api, sugo):
    return _chat_with_memories(api, sugo, [*PARAPHRASES.values(), *DISTRACTORS])


@pytest.mark.parametrize("query", list(PARAPHRASES))
def test_a_paraphrase_sharing_no_word_is_ranked_first_by_the_vectors(api, paraphrase_chat, query):
    chat_id, chunk_of, texts = paraphrase_chat
    target = PARAPHRASES[query]
    for text in texts:
        assert not _shared_words(query, text), text
    results = _search(api, chat_id, query)
    assert all(r["lexical"] == 0 for r in results)  # word matching has nothing to go on
    assert results[0]["chunk_id"] == chunk_of[target]
    assert results[0]["score"] > results[1]["score"]  # ranked first, not first among equals


def test_a_rare_name_beats_a_memory_closer_in_meaning_that_lacks_it(api, sugo):
    query = "What scares Ysolde the most?"
    named = "Ysolde won't cross the old bridge, not even for gold."
    near_miss = "The innkeeper is terrified of spiders and panics at the sight of one."
    chat_id, chunk_of, texts = _chat_with_memories(api, sugo, [near_miss, named, *DISTRACTORS])
    # The name is in one memory, and no other memory shares any word with the query.
    assert [t for t in texts if _shared_words(query, t)] == [t for t in texts if named in t]
    results = _search(api, chat_id, query)
    similarity = {r["chunk_id"]: r["similarity"] for r in results}
    # The vectors alone would pick the other memory, and by a wide margin.
    assert similarity[chunk_of[near_miss]] > similarity[chunk_of[named]] + 0.1
    assert max(similarity, key=similarity.get) == chunk_of[near_miss]
    assert results[0]["chunk_id"] == chunk_of[named]


def test_a_common_word_does_not_lift_its_memories_above_a_clear_paraphrase(api, sugo):
    query = "the elderly gardener's dog"
    target = PARAPHRASES[query]
    # "dog" is in half the memories, so it tells them apart very little; each is further from the
    # query in meaning than the target is.
    owners = ("baker's", "guard's", "miller's", "yellow", "mangy", "big", "wet", "lame")
    dogs = [f"The {who} dog barked at the carts all morning." for who in owners]
    chat_id, chunk_of, _ = _chat_with_memories(api, sugo, [target, *DISTRACTORS, *dogs])
    results = _search(api, chat_id, query)
    similarity = {r["chunk_id"]: r["similarity"] for r in results}
    assert all(similarity[chunk_of[d]] < similarity[chunk_of[target]] - 0.05 for d in dogs)
    assert results[0]["chunk_id"] == chunk_of[target]


def test_a_date_the_question_names_prefers_what_was_said_that_day(api, sugo):
    """Both memories are about Aria's painting; the date in the question tells them apart, which
    their words cannot: only the memory's time span knows when it was said."""
    said = {
        datetime(2023, 10, 13, 14, tzinfo=UTC): "Aria finished a painting of a sunset over the bay.",
        datetime(2023, 10, 20, 14, tzinfo=UTC): "Aria painted the harbour at dusk, her best painting yet.",
    }
    char = add_character(api)
    chat_id = new_chat(api, [char["id"]])["id"]
    r = api.put(
        f"/api/chats/{chat_id}/options", json={"settings": {"recent_message_limit": MIN_RECENT_LIMIT}}
    )
    assert r.status_code == 200, r.text
    with Session(sugo.engine) as s:
        lines = [(day, line) for day, memory in said.items() for line in (memory, *REPLIES)]
        lines += [(datetime(2023, 11, 1, tzinfo=UTC), f"Day {i}.") for i in range(MIN_RECENT_LIMIT)]
        for i, (day, line) in enumerate(lines):
            role, name, character_id = ("user", "Rowan", None) if i % 2 else ("assistant", "Aria", char["id"])
            msg = new_message(chat_id, role, name, [line], character_id=character_id)
            msg.created_at = day
            s.add(msg)
        s.commit()
    embed_chat(sugo.services, chat_id)

    def first(query):
        return _search(api, chat_id, query)[0]["content"]

    earlier, later = said.values()
    assert earlier in first("What did Aria paint?")  # closer in meaning, without a date
    assert later in first("What did Aria paint on 20 October 2023?")
    assert earlier in first("What did Aria paint on October 13, 2023?")


def test_another_form_of_a_word_is_matched(api, sugo):
    """ "adoption" in the question, "adopted" in the memory: Snowball stems both to one word (the
    light stemmer before did not, and only the vectors could find it)."""
    query = "How did the adoption go?"
    target = "Caroline adopted two girls from the shelter in town last spring."
    chat_id, chunk_of, _ = _chat_with_memories(api, sugo, [target, *DISTRACTORS])
    results = _search(api, chat_id, query)
    assert results[0]["chunk_id"] == chunk_of[target]
    assert results[0]["lexical"] > 0
    assert all(r["lexical"] == 0 for r in results[1:])


def test_a_chats_word_weights_do_not_change_with_other_chats(api, sugo):
    """How much a word counts follows how rare it is in this chat: another chat's 2,000 memories
    (which FTS5's own weights count) leave the ranking's word scores as they were."""
    query = "Ysolde and the dog"
    named = "Ysolde won't cross the old bridge, not even for gold."
    dogs = [
        f"The {who} dog barked at the carts all morning." for who in ("baker's", "guard's", "miller's", "wet")
    ]
    chat_id, chunk_of, _ = _chat_with_memories(api, sugo, [named, *dogs, *DISTRACTORS])

    def word_scores():
        lexical = {r["chunk_id"]: r["lexical"] for r in _search(api, chat_id, query)}
        return lexical[chunk_of[dogs[0]]] / lexical[chunk_of[named]]

    before = word_scores()
    # In this 13-memory chat a word four memories hold weighs far less than a name one holds.
    assert before < 0.6
    other = new_chat(api, [add_character(api)["id"]])["id"]
    filler = " ".join(["The dog slept by the fire while the rain fell on the old roof."] * 2)
    with Session(sugo.engine) as s:
        for i in range(2_000):
            s.add(
                MemoryChunk(
                    chat_id=other,
                    content=f"Rowan: {filler} {i}",
                    message_ids=[],
                    message_count=1,
                    first_message_at=datetime(2024, 1, 1, tzinfo=UTC),
                    last_message_at=datetime(2024, 1, 1, tzinfo=UTC),
                )
            )
        s.commit()
    assert word_scores() == pytest.approx(before, abs=0.05)


def test_the_chats_own_ranking_weights_rank_its_search(api, sugo):
    """Chat Settings → Memory Recall → Ranking: meaning weight 1 ranks by the vectors alone, so the
    memory closer in meaning beats the rare name; emptied, the default puts the name first again."""
    query = "What scares Ysolde the most?"
    named = "Ysolde won't cross the old bridge, not even for gold."
    near_miss = "The innkeeper is terrified of spiders and panics at the sight of one."
    chat_id, chunk_of, _ = _chat_with_memories(api, sugo, [near_miss, named, *DISTRACTORS])

    def weights(dense, neighbours):
        r = api.put(
            f"/api/chats/{chat_id}/options",
            json={"settings": {"recall_dense_weight": dense, "recall_neighbour_share": neighbours}},
        )
        assert r.status_code == 200, r.text

    assert _search(api, chat_id, query)[0]["chunk_id"] == chunk_of[named]
    weights(1.0, 0.0)
    assert _search(api, chat_id, query)[0]["chunk_id"] == chunk_of[near_miss]
    weights(None, None)
    assert _search(api, chat_id, query)[0]["chunk_id"] == chunk_of[named]
    r = api.put(f"/api/chats/{chat_id}/options", json={"settings": {"recall_dense_weight": 1.5}})
    assert r.status_code == 422
