"""An imported object's own shape, kept so that exporting it again gives back the same JSON.

Each format's writer builds the *canonical* object of a Sugo value: the keys Sugo understands, in
the format's terms. On import the same writer runs once on what was just read, and `remember` notes
how the file differs from that canonical object; on export `restore` lays the canonical object over
the file's shape again. So the readers and writers stay plain mappings, and fidelity is one rule:

- the file's key order is kept; keys Sugo does not map come back as they were ("fields");
- a mapped key whose canonical value is unchanged since import comes back in the file's own
  spelling ("was": 1 for 1.0, null for an omitted sampler, a dangling prompt_order entry...);
- a value the file wrote as text (Marinara's SQLite rows: "true", '["a","b"]') is written as text
  again, also after an edit ("style");
- a canonical key the file did not have is left out while its value is the one import assumed
  ("absent": a SillyTavern marker has no role, an older Marinara file no useMaxContext).

An edited value is written in canonical form. Everything in a memo is plain JSON, so a Sugo export
carries it.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Mapping
from typing import Any


def same(a: Any, b: Any) -> bool:
    """Equal as JSON text: 1 and 1.0, or two key orders, differ."""
    return json.dumps(a, ensure_ascii=False) == json.dumps(b, ensure_ascii=False)


def flag(value: Any) -> bool:
    """A boolean as Marinara stores it: true or "true" (its SQLite rows hold text)."""
    return value is True or value == "true"


def number(value: Any) -> float | int | None:
    """A sampler value as written (an int stays an int); None for anything that is not a number."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return value


def count(value: Any) -> int | None:
    """A whole, non-negative number (tokens, top-k, a depth); None otherwise."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def remember(raw: Mapping, canonical: Mapping) -> dict:
    """How `raw` differs from the canonical object Sugo would write for what it read from it."""
    memo: dict[str, Any] = {"keys": list(raw)}
    fields: dict[str, Any] = {}
    was: dict[str, Any] = {}
    styles: dict[str, str] = {}
    for key, value in raw.items():
        if key not in canonical:
            fields[key] = value
            continue
        made = canonical[key]
        if same(value, made):
            continue
        style = _style_of(value, made)
        if style:
            styles[key] = style
        if style is None or _encode(made, style) != value:
            was[key] = [value, made]
    absent = {key: made for key, made in canonical.items() if key not in raw}
    for name, part in (("fields", fields), ("was", was), ("style", styles), ("absent", absent)):
        if part:
            memo[name] = part
    return memo


def restore(canonical: Mapping, memo: Mapping | None, fresh: Mapping | None = None) -> dict:
    """The object to write: `canonical` in the remembered shape; without a memo (made in Sugo),
    `fresh` (the canonical object plus the defaults the format expects), else `canonical`."""
    if memo is None:
        return dict(fresh if fresh is not None else canonical)
    fields = memo.get("fields", {})
    was = memo.get("was", {})
    styles = memo.get("style", {})
    absent = memo.get("absent", {})
    keys = memo.get("keys", [])
    out: dict[str, Any] = {}
    for key in keys:
        if key in canonical:
            made = canonical[key]
            if key in was and same(made, was[key][1]):
                out[key] = copy.deepcopy(was[key][0])
            elif key in styles:
                out[key] = _encode(made, styles[key])
            else:
                out[key] = made
        elif key in fields:
            out[key] = copy.deepcopy(fields[key])
        # else: a mapped key the edited value no longer has (a sampler set back to "leave it")
    for key, made in canonical.items():
        if key in out or key in keys:
            continue
        if key in absent and same(made, absent[key]):
            continue
        out[key] = made
    return out


def _style_of(raw: Any, made: Any) -> str | None:
    if not isinstance(raw, str) or isinstance(made, str) or made is None:
        return None
    if isinstance(made, bool):
        return "bool" if raw in ("true", "false") else None
    try:
        parsed = json.loads(raw)
    except ValueError:
        return None
    return "json" if type(parsed) is type(made) else None


def _encode(value: Any, style: str) -> Any:
    if value is None:
        return None
    if style == "bool":
        return ("true" if value else "false") if isinstance(value, bool) else value
    # JSON.stringify's spelling, as Marinara writes the text columns
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
