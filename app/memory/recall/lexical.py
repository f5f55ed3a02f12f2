"""Lexical ranking for Memory Recall, and its fusion with vector similarity. Pure functions.

Chats are full of names, objects and places, which a small embedding model blurs; BM25 (SQLite
FTS5 with the Porter stemmer, see index.lexical_scores) counts them, rare words weighing most. This
module turns a message into the FTS5 query (stopwords dropped) and fuses the two rankings: scores
are min-max normalised over the candidates and mixed with tested weights (reciprocal-rank fusion did
worse on chat memory), and a fraction of each neighbouring chunk's score is added, since a
conversation spills across chunk borders. Lexical ranking also serves alone when no embedding
source answers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

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


MAX_QUERY_TERMS = 32


def match_expression(query: str) -> str | None:
    """An FTS5 expression matching any meaningful word of the query (None when it has none). Words
    are quoted, so nothing the user typed is read as FTS5 syntax."""
    words: list[str] = []
    for word in (m.lower() for m in _WORD.findall(query)):
        if word not in STOPWORDS and len(word) > 1 and word not in words:
            words.append(word)
    return " OR ".join(f'"{w}"' for w in words[:MAX_QUERY_TERMS]) or None


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
) -> dict[int, float]:
    """Combined score of each chunk in `lexical` (which names every chunk considered, 0 where no
    word matched). `dense` gives their similarities (missing means 0), or is None without an
    embedding source, and the lexical ranking stands alone. `neighbours` maps a chunk to the chunks
    before and after it in time."""
    ids = list(lexical)
    if not ids:
        return {}
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
