"""Lexical ranking for Memory Recall, and its fusion with vector similarity. Pure functions.

Chats are full of names, objects and places, which a small embedding model blurs; BM25 with
Snowball stems and stopwords counts them, rare words weighing most. SQLite FTS5 holds each chunk's
words as `index_text` gives them, prefixed with their chat (index.py finds the chunks sharing the
query's rarer words and scores them). A word weighs what its rarity in the chat says
(`chat_weights`), not in every chat together, so other chats do not change a chat's ranking.
Similarities are min-max normalised over the candidates; BM25 scores are counted in units of what
a word only one of the chat's chunks holds weighs (`word_weight(1, chunks)`), not min-max
normalised: a match on a word most chunks hold then adds almost nothing, where scaling would have
lifted it to the full lexical weight, and two rare names add about twice one. The two are mixed
with tested weights (reciprocal-rank fusion did worse on chat memory; a chat may set its own), and
a fraction of each neighbouring chunk's score is added, since a conversation spills across chunk
borders. Lexical ranking also serves alone when no embedding source answers.
"""

from __future__ import annotations

import functools
import math
import re
import threading
import unicodedata
from collections.abc import Mapping, Sequence

import Stemmer

# Default mix (a chat may set its own: Chat Settings → Memory Recall → Ranking). The dense weight
# was 0.45 while lexical scores were min-max scaled; counted in one-word units they run past 1, and
# 0.5 raised every figure of the long-chat dev set (bench/recall_quality.py; 0.45 left hit@10 where
# it was, 0.55 lets the vectors outvote a rare name). Checked again after Snowball stems and the
# chat's own word weights: dense 0.45–0.6 and share 0.1–0.3 all land within a question or two of
# each other, so the defaults stay.
DENSE_WEIGHT = 0.5
NEIGHBOUR_SHARE = 0.15

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below
    between both but by can did do does doing down during each few for from further had has have having he
    her here hers herself him himself his how i if in into is it its itself just me more most my myself no
    nor not now of off on once only or other our ours ourselves out over own same she should so some such
    than that the their theirs them themselves then there these they this those through to too under until
    up very was we were what when where which while who whom why will with you your yours yourself
    yourselves would could also oh yes yeah ok okay
    o a os as um uma de do da dos das em no na nos nas e é que por para com sem se não mas eu tu ele ela
    и в во не что он она на я с со как а то все так его но да ты к у же вы за бы по ее мне было вот от
    меня еще нет о из ему""".split()
)


_STEMMERS = threading.local()  # PyStemmer's stemmers keep state between calls: one per thread
_CYRILLIC = re.compile(r"[\u0400-\u04ff]")


def _stemmer(language: str) -> Stemmer.Stemmer:
    held = _STEMMERS.__dict__
    if language not in held:
        held[language] = Stemmer.Stemmer(language)
    return held[language]


STEM_CACHE_WORDS = 65_536
# Longer "words" (a pasted base64 picture, a hash, a URL's path run together) are stemmed each time: they
# seldom come back, and cached they could hold 256 KB each (a message's limit) in a cache counted in words.
MAX_CACHED_WORD = 40


def stem(word: str) -> str:
    """A word's Snowball stem (adoption/adopted/adopting → adopt, stories → stori): Russian's for
    Cyrillic words, English's for the others, so query and memory words meet on one form. A
    language of Latin script other than English is stemmed as English: both sides alike, so it
    still matches its own forms, a little less often than its own stemmer would."""
    return _cached_stem(word) if len(word) <= MAX_CACHED_WORD else _stem(word)


def _stem(word: str) -> str:
    language = "russian" if _CYRILLIC.match(word) else "english"
    return _stemmer(language).stemWord(word)


# At most STEM_CACHE_WORDS words of at most MAX_CACHED_WORD characters: ~20 MB in the worst case.
_cached_stem = functools.lru_cache(maxsize=STEM_CACHE_WORDS)(_stem)


def fold(text: str) -> str:
    """Lower case without accents, so "cafe" finds "café" (and "ёлка" finds "елка")."""
    text = text.lower()
    if text.isascii():
        return text
    return "".join(ch for ch in unicodedata.normalize("NFKD", text) if not unicodedata.combining(ch))


def tokenize(text: str) -> list[str]:
    return [stem(w) for w in _WORD.findall(fold(text)) if w not in STOPWORDS and len(w) > 1]


def chat_term(chat_id: int, token: str) -> str:
    """A word as the index holds it: prefixed with its chat ("c12qlighthouse"), so a search only
    meets its own chat's words and BM25 weighs a word by how rare it is in that chat. The first
    "q" after the digits ends the chat id, so no two chats' words can collide."""
    return f"c{chat_id}q{token}"


def index_text(content: str, chat_id: int) -> str:
    """What the full-text index holds for a chunk: its stemmed words without stopwords, each
    prefixed with the chat (FTS5 splits on the spaces)."""
    return " ".join(chat_term(chat_id, t) for t in tokenize(content))


# PostgreSQL keeps a word of at most this many bytes in a tsvector: a longer one (a pasted blob read
# as one word) still counts in its chunk's length, but no search finds it there.
MAX_INDEXED_WORD_BYTES = 2046


def word_counts(indexed: str) -> tuple[dict[str, int], int]:
    """What PostgreSQL's word index holds for a chunk, from its `index_text`: how many times each
    word occurs (those PostgreSQL can hold) and how many words it has in all, as FTS5 counts them
    for its BM25 (the text's space-separated words)."""
    words = indexed.split()
    counts: dict[str, int] = {}
    for word in words:
        if len(word.encode()) <= MAX_INDEXED_WORD_BYTES:
            counts[word] = counts.get(word, 0) + 1
    return counts, len(words)


def fts5_idf(chunks_with_it: int, chunks: int) -> float:
    """The weight FTS5's bm25() gives a word held by `chunks_with_it` of the index's `chunks`, in
    the same steps as its C code (`log((nRow - nHit + 0.5) / (nHit + 0.5))`, 1e-6 when not above 0):
    PostgreSQL's BM25 reproduces FTS5's to the last bit where it can."""
    idf = math.log((chunks - chunks_with_it + 0.5) / (chunks_with_it + 0.5))
    return idf if idf > 0.0 else 1e-6


def sqlite_sum(values: Sequence[float]) -> float:
    """A sum as SQLite's sum() gives it (Kahan-Babuska-Neumaier compensated, since 3.43): the word
    pass's per-word BM25 scores summed on PostgreSQL come to the same last bit as SQLite's."""
    total, error = values[0], 0.0
    for value in values[1:]:
        step = total + value
        error += (total - step) + value if abs(total) > abs(value) else (value - step) + total
        total = step
    return total + error if math.isfinite(error) else total


MAX_QUERY_TERMS = 32
# Candidate search reads at most about this many postings: the commonest words of a query are left
# out of it (they still count in the scores), so a 100,000-chunk chat answers as fast as a small one.
# 4,000 since issue 23 (was 8,000): FTS5 scores each posting, and at 100,000 memories the word pass was
# the recall's long pole (build p50 21.6 -> 17.9 ms in alternating builds, bench/prompt_build.py's chat);
# the dev set's hit@1/5/10 is unchanged (its chats never reach the cap), and on that 100,000-memory chat
# 40 questions kept the same first memory 95% of the time and 98% of their top 10.
CANDIDATE_POSTINGS = 4_000


# Words that frame a question about the past rather than say what it was about ("Do you remember
# what Melanie said about…", "What did Jon tell Gina…", "How many children…"): a memory seldom
# holds them (it says "my two kids", not "many"), so matching them lifts chats full of talk over
# the answer. Left out of queries only; memories keep them. (On the long-chat dev set: two more
# questions found in the first five and in the first ten.)
QUESTION_WORDS = frozenset(
    stem(w) for w in "remember recall think know tell told say said mention many much".split()
)


def query_terms(query: str, chat_id: int) -> list[str]:
    """The query's words as the index holds them for the chat, each once, in order, without the
    words that only frame a question (QUESTION_WORDS)."""
    words = [t for t in dict.fromkeys(tokenize(query)) if t not in QUESTION_WORDS]
    return [chat_term(chat_id, t) for t in words][:MAX_QUERY_TERMS]


def candidate_terms(doc_freq: Mapping[str, int]) -> list[str]:
    """The rarest present words whose postings fit CANDIDATE_POSTINGS. A word in more chunks than
    that tells them apart too little to be worth reading (BM25 gives it almost no weight); the
    vector ranking is left to find what such a query means."""
    present = sorted((f, t) for t, f in doc_freq.items() if f > 0)
    kept, total = [], 0
    for freq, term in present:
        if total + freq > CANDIDATE_POSTINGS:
            break
        kept.append(term)
        total += freq
    return kept


def match_expression(terms: Sequence[str]) -> str | None:
    """An FTS5 expression for chunks holding any of the (chat-prefixed) words, quoted: nothing the
    user typed is read as FTS5 syntax."""
    return " OR ".join(f'"{t}"' for t in terms) or None


def word_weight(chunks_with_it: int, chunks: int) -> float:
    """A word's weight (idf) in BM25 as SQLite FTS5 gives it, from how many of the `chunks` hold it:
    a word in half of them or more weighs almost nothing; one held by a single chunk, about the most."""
    return max(1e-6, math.log((chunks - chunks_with_it + 0.5) / (chunks_with_it + 0.5)))


def chat_weights(doc_freq: Mapping[str, int], *, chat_chunks: int, all_chunks: int) -> dict[str, float]:
    """For each word, what turns its BM25 weight among every chat's chunks (what FTS5 computes) into
    its weight among the chat's own: a chat's ranking then does not change with how many memories
    the user's other chats hold (with 20,000 of them beside the dev set's two chats, hit@5 fell from
    0.899 to 0.865 before)."""
    return {t: word_weight(f, chat_chunks) / word_weight(f, all_chunks) for t, f in doc_freq.items()}


def _minmax(values: Sequence[float]) -> list[float]:
    lo, hi = min(values), max(values)
    if hi - lo <= 1e-12:
        return [1.0 if hi > 0 else 0.0 for _ in values]
    return [(v - lo) / (hi - lo) for v in values]


def fuse(
    dense: Mapping[int, float] | None,
    lexical: Mapping[int, float],
    neighbours: Mapping[int, tuple[int | None, int | None]],
    *,
    dense_weight: float = DENSE_WEIGHT,
    neighbour_share: float = NEIGHBOUR_SHARE,
    lexical_unit: float | None = None,
) -> dict[int, float]:
    """Combined score of each chunk in `lexical` (which names every chunk considered, 0 where no
    word matched). `dense` gives their similarities (missing means 0), or is None without an
    embedding source, and the lexical ranking stands alone. `neighbours` maps a chunk to the chunks
    before and after it in time. `lexical_unit` is the BM25 score lexical scores are counted in
    (see the module's docstring); without it they are min-max normalised, which lifts the best
    match to the full lexical weight however little its words tell the chunks apart."""
    ids = list(lexical)
    if not ids:
        return {}
    if lexical_unit:
        lex = {i: lexical[i] / lexical_unit for i in ids}
    else:
        lex = dict(zip(ids, _minmax([lexical[i] for i in ids]), strict=True))
    if dense is None:
        mixed = lex
    else:
        den = dict(zip(ids, _minmax([dense.get(i, 0.0) for i in ids]), strict=True))
        mixed = {i: dense_weight * den[i] + (1 - dense_weight) * lex[i] for i in ids}
    out = {}
    for i in ids:
        around = [mixed.get(n, 0.0) for n in neighbours.get(i, (None, None)) if n is not None]
        out[i] = mixed[i] + neighbour_share * (sum(around) / len(around) if around else 0.0)
    return out
