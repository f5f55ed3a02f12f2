"""API keys at rest: Fernet (AES-128-CBC + HMAC) with a key kept in the data folder.

The key file is created on first use with owner-only permissions. Someone who copies the database
alone gets ciphertext; whoever has the whole data folder has the keys, which is the honest limit of
a self-hosted app that must call the provider unattended."""

from __future__ import annotations

import os
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken
from sqlalchemy.engine import Engine

from app.platform.shared_secrets import API_KEY_CHECK, ensure_secret, replace_secret

# Marks a sealed (encrypted) value among plain ones: extra header values saved before they were
# encrypted are still read as they are.
SEALED = "sealed:"


class KeyBox:
    def __init__(self, key_path: Path) -> None:
        self._fernet = Fernet(_load_or_create_key(key_path))

    def encrypt(self, secret: str) -> str:
        return self._fernet.encrypt(secret.encode()).decode()

    def decrypt(self, token: str) -> str:
        try:
            return self._fernet.decrypt(token.encode()).decode()
        except InvalidToken as err:
            raise ValueError(
                "A saved API key could not be decrypted: the data folder's secret.key changed. "
                "Enter the key again."
            ) from err

    def seal(self, secret: str) -> str:
        """`secret` encrypted and marked as such (extra header values)."""
        return SEALED + self.encrypt(secret)

    def unseal(self, value: str) -> str:
        """A value `seal` made, decrypted; an unmarked value is plain text and comes back as is."""
        return self.decrypt(value.removeprefix(SEALED)) if is_sealed(value) else value


class KeyFileMismatch(ValueError):
    """This server's key file is not the one the database's API keys were sealed with."""


_CHECK_TEXT = "sugo api key check"


def check_key_file(engine: Engine, keybox: KeyBox, key_path: Path, *, shared: bool) -> None:
    """Make sure this server seals API keys with the key the database's were sealed with: the first
    server leaves a text sealed with its key in the database, every later start opens it. On a
    database several servers share (PostgreSQL), another key refuses the start: it would seal keys the
    other servers cannot open. A single server (SQLite) whose key file was replaced carries on with
    the new key, as before: its saved keys ask to be entered again."""
    sealed = ensure_secret(engine, API_KEY_CHECK, lambda: keybox.seal(_CHECK_TEXT))
    try:
        if keybox.unseal(sealed) == _CHECK_TEXT:
            return
    except ValueError:
        pass
    if shared:
        raise KeyFileMismatch(
            f"This server's key file {key_path} is not the one the API keys in this database were saved "
            "with. Every Sugo server sharing a database needs the same key: copy the first server's "
            "secret.key here, or point SUGO_SECRET_KEY_FILE at a copy of it."
        )
    replace_secret(engine, API_KEY_CHECK, keybox.seal(_CHECK_TEXT))


def is_sealed(value: str) -> bool:
    return value.startswith(SEALED)


def _load_or_create_key(path: Path) -> bytes:
    if path.exists():
        path.chmod(0o600)  # a key file copied in by hand keeps whatever mode it came with
        return path.read_bytes().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    key = Fernet.generate_key()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(key)
    return key
