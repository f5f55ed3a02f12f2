"""Lexical ranking for Memory Recall, and its fusion with vector similarity. Pure functions.

Chats are full of names, objects and places, which a small embedding model blurs; BM25 with
stemming and stopwords counts them (rare words weigh most). Scores of the two rankings are
min-max normalised and mixed with tested weights (reciprocal-rank fusion did worse on chat memory),
and a fraction of each neighbouring chunk's score is added, since a conversation spills across
chunk borders. It also serves alone when no embedding source answers.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

K1 = 1.2
B = 0.75
# Default mix; settings may change them.
DENSE_WEIGHT = 0.45
NEIGHBOUR_SHARE = 0.15

_WORD = re.compile(r"\w+", re.UNICODE)
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
def stem(word: str) -> str:
    """A light English stemmer: enough to match lighthouse/lighthouses, story/stories,
    walk/walked/walking."""
    if len(word) <= 3:
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith(("sses", "xes", "zes", "ches", "shes")):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    for suffix in ("ingly", "edly", "ing", "ed", "ly"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def tokenize(text: str) -> list[str]:
    return [stem(w) for w in (m.lower() for m in _WORD.findall(text)) if w not in STOPWORDS and len(w) > 1]


class BM25:
    def __init__(self, documents: Sequence[str]) -> None:
        self.docs = [Counter(tokenize(d)) for d in documents]
        self.lengths = [sum(c.values()) for c in self.docs]
        self.avg = (sum(self.lengths) / len(self.docs)) if self.docs else 0.0
        df: Counter[str] = Counter()
        for doc in self.docs:
            df.update(doc.keys())
        n = len(self.docs)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}

    def scores(self, query: str) -> list[float]:
        terms = set(tokenize(query))
        out = []
        for doc, length in zip(self.docs, self.lengths, strict=True):
            score = 0.0
            for term in terms:
                tf = doc.get(term)
                if tf:
                    norm = K1 * (1 - B + B * length / self.avg) if self.avg else K1
                    score += self.idf[term] * tf * (K1 + 1) / (tf + norm)
            out.append(score)
        return out


def _minmax(values: Sequence[float]) -> list[float]:
    lo, hi = min(values), max(values)
    if hi - lo <= 1e-12:
        return [1.0 if hi > 0 else 0.0 for _ in values]
    return [(v - lo) / (hi - lo) for v in values]


def fuse(
    dense: Sequence[float] | None,
    lexical: Sequence[float],
    *,
    dense_weight: float = DENSE_WEIGHT,
    neighbour_share: float = NEIGHBOUR_SHARE,
) -> list[float]:
    """Combined scores for chunks in chronological order. Without dense scores (no embedding
    source) the lexical ranking stands alone."""
    if not lexical:
        return []
    lex = _minmax(lexical)
    if dense is None:
        mixed = lex
    else:
        den = _minmax(dense)
        mixed = [dense_weight * d + (1 - dense_weight) * x for d, x in zip(den, lex, strict=True)]
    out = []
    for i, score in enumerate(mixed):
        neighbours = [mixed[j] for j in (i - 1, i + 1) if 0 <= j < len(mixed)]
        out.append(score + neighbour_share * (sum(neighbours) / len(neighbours) if neighbours else 0.0))
    return out
