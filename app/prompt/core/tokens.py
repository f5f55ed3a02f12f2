"""The one token estimator. Everything that budgets or displays tokens calls count_tokens(), so a
real tokenizer can replace the heuristic in one place.

The heuristic: ~4 characters per token for ASCII text (what BPE tokenizers average on English),
one token per CJK character (they rarely merge), ~2.5 characters per token for other scripts
(Cyrillic, accented Latin), plus a fixed overhead per chat message for role markers."""

from __future__ import annotations

import math
import re

MESSAGE_OVERHEAD_TOKENS = 4
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def count_tokens(text: str) -> int:
    if not text:
        return 0
    if text.isascii():
        return math.ceil(len(text) / 4)
    non_ascii = len(_NON_ASCII.findall(text))
    cjk = len(_CJK.findall(text))
    ascii_chars = len(text) - non_ascii
    return math.ceil(ascii_chars / 4 + cjk + (non_ascii - cjk) / 2.5)


def count_message_tokens(text: str) -> int:
    return count_tokens(text) + MESSAGE_OVERHEAD_TOKENS
