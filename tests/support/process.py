"""Sugo as `python -m app` (what `make run` starts) in a process of its own on 127.0.0.1, so a test can
kill it outright (SIGKILL, like a power cut or the OOM killer) and start it again on the same data
folder. `LiveSugo` runs in the test's own process and cannot be killed that way."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx

from tests.support.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class SugoProcess:
    def __init__(self, data_dir: Path, *, flush_interval_s: float = 0.05, **env: str) -> None:
        """`env`: more SUGO_* settings (SUGO_PASSWORD="…"); any SUGO_* of the test's own environment is left out."""
        self.data_dir = data_dir
        # Discovery points at a closed port: the first-run page must not probe whatever else runs here.
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("SUGO_")},
            "SUGO_DATA_DIR": str(data_dir),
            "SUGO_STREAM_FLUSH_S": str(flush_interval_s),
            "SUGO_DISCOVERY_PORTS": "none=1",
            "HF_HUB_OFFLINE": "1",
            **env,
        }
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.log_path = data_dir.parent / "sugo-process.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self, **kwargs) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30, **kwargs)

    def start(self) -> SugoProcess:
        self.port = _free_port()
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "app", "--host", "127.0.0.1", "--port", str(self.port)],
                cwd=REPO,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        # A bound for a hung start only: on a loaded machine (eight test runs on two cores) the imports alone
        # took over 60 s of wall time.
        wait_for(
            self._healthy,
            timeout=240,
            interval=0.05,
            what=f"Sugo to answer on {self.url} (log: {self.log_path})",
        )
        return self

    def _healthy(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"Sugo exited with {self.proc.returncode}; log: {self.log_path}")
        try:
            return httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def kill(self) -> None:
        """SIGKILL: no shutdown hook, no last flush, no rollback but SQLite's own."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()

    def __enter__(self) -> SugoProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
