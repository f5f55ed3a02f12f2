"""The app-wide tool settings (Settings → Tools and Permissions): one JSON value in AppDefault, read
once per turn. Secrets in it (the Brave key) are sealed with the key box and never sent back."""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field, fields

from sqlalchemy import text
from sqlmodel import Session

from app.connections.models import AppDefault
from app.tools.registry import PERMISSIONS

log = logging.getLogger(__name__)

TOOLS_KEY = "tools"
ROUND_CAP_RANGE = (1, 20)
DEFAULT_ROUND_CAP = 5


@dataclass
class ToolSettings:
    # Permission switches by PERMISSIONS key; a missing key takes its default.
    permissions: dict[str, bool] = field(default_factory=dict)
    round_cap: int = DEFAULT_ROUND_CAP  # tool rounds per reply (1–20)
    # Deliberate Tool Mode, app-wide (a persona may override it). On by default: a plain message then
    # declares no tools, so a plain turn's prompt is what it was before tools existed (same tokens, same
    # cached prefix), and a message that asks for a reminder, a search or a memory gets those tools.
    deliberate: bool = True
    # Custom trigger phrases per tool family (Deliberate Tool Mode): {"task": ["remind*", "alarm"]}.
    custom_triggers: dict[str, list[str]] = field(default_factory=dict)
    # Web search engines: Brave with a key (sealed), a SearXNG URL; DuckDuckGo needs neither.
    brave_key_sealed: str = ""
    searxng_url: str = ""
    duckduckgo: bool = True  # the last engine, no key (off: the chain ends with SearXNG)

    def allowed(self, permission: str | None) -> bool:
        if permission is None:
            return True
        default = PERMISSIONS.get(permission, ("", False))[1]
        return bool(self.permissions.get(permission, default))


# Read on every turn: plain SQL (the ORM's get of this one row cost a quarter of a millisecond).
_VALUE_SQL = text("SELECT value FROM app_default WHERE key = :key")


def load_tool_settings(session: Session) -> ToolSettings:
    value = session.connection().execute(_VALUE_SQL, {"key": TOOLS_KEY}).scalar()
    if not value:
        return ToolSettings()
    try:
        raw = json.loads(value)
    except ValueError:
        log.warning("the saved tool settings could not be read; the defaults apply")
        return ToolSettings()
    known = {f.name for f in fields(ToolSettings)}
    return (
        ToolSettings(**{k: v for k, v in raw.items() if k in known})
        if isinstance(raw, dict)
        else ToolSettings()
    )


def save_tool_settings(session: Session, settings: ToolSettings) -> None:
    """Write in the caller's transaction."""
    row = session.get(AppDefault, TOOLS_KEY) or AppDefault(key=TOOLS_KEY)
    row.value = json.dumps(asdict(settings), sort_keys=True)
    session.add(row)
    session.flush()  # a read after it in this transaction (plain SQL, not the ORM) sees it
