"""A real Sugo in its own process for the benches, as a user runs it (scheduler on), on a fresh
data folder; and the two small waits around it. Its own process because in the bench's, the
threads of both would fight over one GIL and blur the figures."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not come up")


@contextmanager
def running_sugo(**env: str) -> Iterator[str]:
    """`python -m app` with SUGO_SCHEDULER=1 on a temporary data folder (plus `env`); yields its URL
    once /healthz answers, and stops it afterwards."""
    with sugo_process(**env) as (url, _process):
        yield url


@contextmanager
def sugo_process(**env: str) -> Iterator[tuple[str, subprocess.Popen]]:
    """`running_sugo`, yielding the process too (a bench that reads its memory use)."""
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        full_env = {
            **os.environ,
            "SUGO_DATA_DIR": str(Path(tmp) / "data"),
            "SUGO_SCHEDULER": "1",
            "PYTHONPATH": str(ROOT),
            **env,
        }
        sugo = subprocess.Popen(
            [sys.executable, "-m", "app", "--port", str(port)],
            cwd=ROOT,
            env=full_env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            wait_for(url + "/healthz")
            yield url, sugo
        finally:
            sugo.terminate()
            sugo.wait(timeout=30)
