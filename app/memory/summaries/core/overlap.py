"""Does a model's summary speak of the messages it covers? A cheap check for refusals ("I would rather not
say") and answers about something else, which would otherwise go into every prompt. Pure functions.

Decisions:
- A summary passes when it shares one word with the messages it covers: a name, a place, any content
  word. The default prompt asks the model to keep the names as they appear, and a recap of events names
  who and where, so a real summary shares several; a paraphrase ("walked" for "walk", "harbours" for
  "harbour") meets its source through the Snowball stems Memory Recall's word pass uses.
- Left out on both sides: stopwords, and the words refusals and answers about the request are made of
  (REQUEST_WORDS: "sorry", "rather", "say", "summary", "content", "guidelines"...), so "I would rather not
  say" shares nothing with messages that happen to hold "say". A refusal that names a character ("I
  won't summarise Mira's scene") does pass: the check is cheap, not a judge.
- Chinese, Japanese, Korean and Thai are written without spaces: runs of their letters are compared as
  overlapping pairs of characters, so a summary in those scripts meets its source as well; a pair of
  hiragana only is left out (Japanese particles and endings: "には" is in every refusal and every story).
- An answer with no content word at all ("I would rather not say.") fails whatever the messages; one
  with words of its own passes when there is too little to judge: messages with fewer than
  MIN_SOURCE_WORDS distinct content words ("ok" / "*nods*") can be summarised in words they never used.
- What fails is not refused: a Roleplay entry is kept for review, inactive, with UNRELATED as its reason.
- A Conversation day or week summary is only checked by `says_nothing`: its prompt asks for mood-level
  "field notes" ("A slow, warm evening of small talk.") that may share no word with the day, and a day
  has no review state, so a summary held by the overlap check would leave the day unsummarised for good.
  A JSON refusal made only of refusal words is still an unusable answer there (day_runs.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from app.memory.recall.core.lexical import STOPWORDS, fold, stem

MIN_SOURCE_WORDS = 6
UNRELATED = (
    "It mentions none of the names, places or words of the messages it covers: "
    "a refusal, or an answer about something else?"
)
SAYS_NOTHING = (
    "The answer holds no name, place or word of its own, only the words a refusal or a reply "
    "about the request is made of."
)

# Scripts written without spaces between words (Thai, kana, CJK ideographs, Hangul).
_DENSE = "\u0e00-\u0e7f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_DENSE}]+|[^\W_{_DENSE}]+", re.UNICODE)
_DENSE_RUN = re.compile(rf"[{_DENSE}]")
_HIRAGANA = re.compile(r"[\u3040-\u309f]+")

REQUEST_WORDS = frozenset(
    stem(w)
    for w in """
    sorry apologize apologise apology apologies unfortunately unable cannot refuse decline
    won don didn doesn isn aren wasn weren wouldn couldn shouldn haven hasn
    rather prefer say saying said tell help assist assistance assistant provide request requested comply
    fulfil fulfill content nature explicit graphic appropriate inappropriate guideline guidelines policy
    policies ethical ethics safe safety harmful language model ai openai anthropic claude gpt chatgpt
    summary summaries summarize summarise summarizing summarising summarization summarisation recap
    conversation messages message text chat roleplay role play write writing written create produce
    generate continue instead however happy glad anything something else please let know understand
    comfortable feel discuss topic topics share sharing question questions answer context information detail
    details respond
    response reply able allowed permitted sure certainly here thing things way like want need would
    user users character characters story scene given above below following provided none null nothing empty
""".split()
)


def content_words(text: str) -> set[str]:
    """The text's words that can say what it is about: folded, stemmed, without stopwords and
    REQUEST_WORDS; runs of a space-less script as pairs of characters."""
    out: set[str] = set()
    for token in _TOKEN.findall(fold(text)):
        if _DENSE_RUN.match(token):
            pairs = (token[i : i + 2] for i in range(max(1, len(token) - 1)))
            out.update(p for p in pairs if not _HIRAGANA.fullmatch(p))
        elif len(token) > 1 and token not in STOPWORDS:
            word = stem(token)
            if word not in REQUEST_WORDS:
                out.add(word)
    return out


def shared_words(summary: str, source: str) -> set[str]:
    return content_words(summary) & content_words(source)


def says_nothing(texts: Iterable[str]) -> bool:
    """Whether the texts (a summary and its key details) hold no content word at all."""
    return not content_words("\n".join(texts))


def unrelated(summary: str | Iterable[str], source: str) -> str | None:
    """Why the summary (with its key details, if given as several texts) seems not to speak of `source`
    (the messages it covers, as the model read them): UNRELATED; None when it shares a word with them or
    there is too little to judge."""
    said = content_words(summary if isinstance(summary, str) else "\n".join(summary))
    if not said:
        return UNRELATED
    words = content_words(source)
    if len(words) < MIN_SOURCE_WORDS:
        return None
    return None if said & words else UNRELATED
