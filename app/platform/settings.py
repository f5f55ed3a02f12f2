"""All configuration, read once from SUGO_* environment variables."""

from __future__ import annotations

import ipaddress
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path

# The loopback ports local model servers answer on out of the box; the first-run page offers
# whichever of them answers.
DEFAULT_DISCOVERY_PORTS = {"Ollama": 11434, "llama.cpp server": 8080, "KoboldCpp": 5001, "LM Studio": 1234}


def _env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def _env_seconds(name: str, default: float) -> float:
    value = os.environ.get(name)
    if value is None or not value.strip():
        return default
    seconds = float(value)
    if not 1 <= seconds <= 86_400:
        raise ValueError(f"{name} must be between 1 and 86400 seconds, not {value}.")
    return seconds


def _discovery_ports() -> dict[str, int]:
    # SUGO_DISCOVERY_PORTS="Ollama=11434,KoboldCpp=5001" replaces the defaults (tests point it at
    # the test model server).
    raw = os.environ.get("SUGO_DISCOVERY_PORTS")
    if not raw:
        return dict(DEFAULT_DISCOVERY_PORTS)
    ports: dict[str, int] = {}
    for part in raw.split(","):
        if "=" in part:
            name, port = part.split("=", 1)
            ports[name.strip()] = int(port)
    return ports


def _trusted_proxies() -> tuple[str, ...]:
    # SUGO_TRUSTED_PROXIES="127.0.0.1,172.16.0.0/12": the reverse proxies whose X-Forwarded-For and
    # X-Forwarded-Proto count. Anything else (a name, "*") is refused at start: trusting every
    # sender would let any client pick the address the login backoff counts.
    raw = os.environ.get("SUGO_TRUSTED_PROXIES", "")
    proxies = []
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        try:
            ipaddress.ip_network(item, strict=False)
        except ValueError:
            raise ValueError(
                f"SUGO_TRUSTED_PROXIES takes the addresses or networks of your reverse proxies "
                f"(127.0.0.1, 172.16.0.0/12), not {item!r}."
            ) from None
        proxies.append(item)
    return tuple(proxies)


POSTGRES_URL_PREFIX = "postgresql+psycopg://"


# What a start with SUGO_DATABASE_URL says while only the copy command and the migrations use it.
def _database_url() -> str | None:
    raw = os.environ.get("SUGO_DATABASE_URL", "").strip()
    if not raw:
        return None
    if not raw.startswith(POSTGRES_URL_PREFIX):
        # Only the scheme is echoed: the rest of a URL may hold a password.
        scheme = raw.split("://", 1)[0] if "://" in raw else "no scheme"
        raise ValueError(
            f"SUGO_DATABASE_URL takes a PostgreSQL URL that starts with {POSTGRES_URL_PREFIX} "
            f"(not {scheme}); leave it unset to keep the SQLite file in SUGO_DATA_DIR."
        )
    return raw


def _path_or_none(raw: str) -> Path | None:
    return Path(raw.strip()).expanduser().resolve() if raw.strip() else None


@dataclass(frozen=True)
class Settings:
    data_dir: Path
    host: str = "127.0.0.1"
    port: int = 8000
    password: str | None = None
    # Host names Sugo answers to besides the loopback ones (SUGO_ALLOWED_HOSTS, comma-separated;
    # "*" for any): a page on another name that resolves to us (DNS rebinding) is refused.
    allowed_hosts: tuple[str, ...] = ()
    # SUGO_ALLOW_OPEN=1: listen on a non-loopback address without a password, on purpose.
    allow_open: bool = False
    # Reverse proxies (addresses or networks) whose X-Forwarded-For / X-Forwarded-Proto are believed;
    # none by default, so the address the login backoff counts is the connection's own.
    trusted_proxies: tuple[str, ...] = ()
    discovery_ports: dict[str, int] = field(default_factory=dict)
    # Streamed replies are written to the database at most this often, so a crash loses little
    # and a long reply does not turn into thousands of writes.
    stream_flush_interval_s: float = 0.5
    start_scheduler: bool = True
    # How long Sugo waits for a model's answer (replies, summaries): slow CPU-only local models
    # may need more than the five minutes, a test wants a second.
    model_timeout_s: float = 300.0
    # SUGO_DEBUG_TIMINGS=1: Peek Prompt shows what each prompt source cost to build that prompt.
    debug_timings: bool = False
    # SUGO_FETCH_ALLOW: hosts (names or addresses, comma-separated) that tools may fetch from although
    # they are loopback or private (a SearXNG or an MCP server on this machine); app/tools/net/address.py.
    fetch_allow: tuple[str, ...] = ()
    # How often an open, idle chat page asks whether Sugo started a reply by itself (a reminder came
    # due) or a message arrived from elsewhere: SUGO_CHAT_WATCH_S, seconds.
    chat_watch_s: float = 15.0
    # SUGO_BRAVE_URL: the Brave Search API's base (tests point it at a fake on loopback); app/tools/web/engines.py.
    brave_url: str = "https://api.search.brave.com/res/v1"
    # SUGO_DATABASE_URL: a postgresql+psycopg://… URL to keep everything in PostgreSQL instead; None
    # (unset) is the SQLite file sugo.db in the data folder.
    database_url: str | None = None
    # SUGO_SERVER_NAME: this server's name among several sharing one database (its run claims carry it:
    # a restarted server takes back its own at once, another's wait to go stale). Default: the machine's
    # name and the data folder, unique for servers on one machine with folders of their own.
    server_name: str = ""
    # SUGO_SECRET_KEY_FILE: the file holding the key that encrypts saved API keys (default: secret.key in
    # the data folder). Servers sharing one database need the same key: point each at a copy.
    secret_key_file: Path | None = None

    @property
    def server(self) -> str:
        return self.server_name or f"{socket.gethostname()}:{self.data_dir}"

    @property
    def database_path(self) -> Path:
        return self.data_dir / "sugo.db"

    @property
    def secret_key_path(self) -> Path:
        return self.secret_key_file or self.data_dir / "secret.key"

    @property
    def session_key_path(self) -> Path:
        """Where Sugo kept the session secret before it moved into the database (carried over once)."""
        return self.data_dir / "session.key"


def load_settings() -> Settings:
    return Settings(
        data_dir=Path(os.environ.get("SUGO_DATA_DIR", "./data")).resolve(),
        host=os.environ.get("SUGO_HOST", "127.0.0.1"),
        port=int(os.environ.get("SUGO_PORT", "8000")),
        password=os.environ.get("SUGO_PASSWORD") or None,
        allowed_hosts=tuple(
            h.strip() for h in os.environ.get("SUGO_ALLOWED_HOSTS", "").split(",") if h.strip()
        ),
        allow_open=_env_bool("SUGO_ALLOW_OPEN", False),
        trusted_proxies=_trusted_proxies(),
        discovery_ports=_discovery_ports(),
        stream_flush_interval_s=float(os.environ.get("SUGO_STREAM_FLUSH_S", "0.5")),
        start_scheduler=_env_bool("SUGO_SCHEDULER", True),
        model_timeout_s=_env_seconds("SUGO_MODEL_TIMEOUT_S", 300.0),
        debug_timings=_env_bool("SUGO_DEBUG_TIMINGS", False),
        chat_watch_s=_env_seconds("SUGO_CHAT_WATCH_S", 15.0),
        fetch_allow=tuple(
            h.strip().lower() for h in os.environ.get("SUGO_FETCH_ALLOW", "").split(",") if h.strip()
        ),
        brave_url=os.environ.get("SUGO_BRAVE_URL", "").strip() or "https://api.search.brave.com/res/v1",
        database_url=_database_url(),
        server_name=os.environ.get("SUGO_SERVER_NAME", "").strip(),
        secret_key_file=_path_or_none(os.environ.get("SUGO_SECRET_KEY_FILE", "")),
    )
