"""Cutting and redacting the text a chat's memory keeps. Pure functions.

`cut` shortens a text to a number of code points without splitting what a reader sees as one
character; `redact` replaces secrets of known shapes with "[redacted]" before anything is stored.

Decisions (where the issue is silent):
- A cut backs off to the start of the cluster it would split (a base and its combining marks, an emoji
  and its skin tone, variation selector or tag characters, a ZWJ sequence, a flag's two regional
  indicators, a surrogate pair from bad input); a lone high surrogate left at the end is dropped. So a
  cut text can be a few code points shorter than the limit, never longer.
- A "[redacted]" marker is never cut in the middle: the cut backs off to its start.
- `limit` below 1 gives "" for a text that does not fit: there is no room even for the ellipsis.
- A connection string's user part ends at the first "/": `https://example.com/a:b@c` has no user or
  password (the ":" and "@" are in its path) and is kept whole.
- `sk-…`, bearer and similar tokens must hold a digit: real keys always do in practice, and words
  joined by hyphens ("sk-learn-based-approach", "bearer responsibilities") are prose, not keys.
- An assignment (`password = …`, `"api_key": "…"`, `token: …`, `?pwd=…`) keeps its key and separator and
  loses its value, quoted or not; `password == x` (a comparison), "the password is long" and
  `max_tokens=4096` (a plural, or a key that only ends in one of the words' letters) are kept.
"""

from __future__ import annotations

import re

from app.platform.core.cutting import ELLIPSIS, REDACTED, _cluster_start, cut

__all__ = ["ELLIPSIS", "REDACTED", "_cluster_start", "cut", "redact"]

# Every repetition that can start at many places is bounded ({0,31}, {0,300}, …): unbounded, a long
# run like "a-a-a-…" or "sk-sk-sk-…" is rescanned from each of its words and redaction turns quadratic.
# Each pattern's match is replaced whole by "[redacted]", unless it names a `keep` group: that part
# (a key and its separator, "Bearer ", a URL up to the password) stays in front.
_BOUNDARY = r"(?<![A-Za-z0-9_-])"
_END = r"(?![A-Za-z0-9_-])"
_HAS_DIGIT = r"(?=[A-Za-z_-]{0,300}[0-9])"

_PEM = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.DOTALL
)
_CONNECTION = re.compile(r"(?P<keep>\b[A-Za-z][A-Za-z0-9+.-]{0,31}://[^\s:/@]{0,256}:)[^\s/@]{1,256}(?=@)")
_TOKENS = re.compile(
    _BOUNDARY
    + "(?:"
    + "|".join(
        [
            r"sk-ant-[A-Za-z0-9_-]{20,}",
            r"sk-or-v1-[A-Za-z0-9]{20,}",
            r"sk-(?:proj-)?" + _HAS_DIGIT + r"[A-Za-z0-9_-]{20,}",
            r"gh[pousr]_[A-Za-z0-9]{36,}",
            r"github_pat_[A-Za-z0-9_]{22,}",
            r"xox[abpr]-[A-Za-z0-9-]{10,}",
            r"AKIA[0-9A-Z]{16}",
            r"AIza[0-9A-Za-z_-]{35}",
            r"hf_[A-Za-z0-9]{30,}",
            r"[sr]k_(?:live|test)_[A-Za-z0-9]{16,}",
            r"eyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*",
        ]
    )
    + ")"
    + _END
)
_BEARER = re.compile(
    r"(?P<keep>\bbearer\s{1,8})(?=[A-Za-z._~+/=-]{0,300}[0-9])[A-Za-z0-9._~+/=-]{16,}", re.IGNORECASE
)
_ASSIGNMENT = re.compile(
    r"(?P<keep>\b(?:[A-Za-z0-9]{1,40}[_-]){0,4}(?:password|passwd|pwd|secret|api[_-]?key|apikey|token|access[_-]?key)"
    r"[\"']?[ \t]*[:=](?!=)[ \t]*)"
    r"(?:\"[^\"\n]*\"|'[^'\n]*'|[^\s,;&\"']+)",
    re.IGNORECASE,
)
_PATTERNS = (_PEM, _CONNECTION, _TOKENS, _BEARER, _ASSIGNMENT)


def _replace(match: re.Match[str]) -> str:
    keep = match.groupdict().get("keep") or ""
    return keep + REDACTED


def redact(text: str) -> str:
    """`text` with every secret of a known shape replaced by "[redacted]"."""
    for pattern in _PATTERNS:
        text = pattern.sub(_replace, text)
    return text
