"""Issue 21 (19): a data folder Sugo cannot write to gave a traceback at start. `python -m app` (what
`make run` starts) now stops with one sentence naming the folder and a non-zero exit status.

Read-only for real: the folder is chmod 0500. Root ignores permission bits (CAP_DAC_OVERRIDE), so when
the tests run as root Sugo is started through `setpriv` without that capability, as any user's process
is; the test first checks that the folder does refuse a write from such a process."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from app.main import build_services
from app.platform.settings import Settings
from tests.support.process import REPO

AS_A_USER = ["setpriv", "--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search", "--"]


def _as_a_user() -> list[str]:
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: a chmod 0500 folder would not stop root's writes")
    return AS_A_USER


def _start(data_dir: Path) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "SUGO_DATA_DIR": str(data_dir),
        "SUGO_DISCOVERY_PORTS": "none=1",
        "HF_HUB_OFFLINE": "1",
    }
    return subprocess.run(
        [*_as_a_user(), sys.executable, "-m", "app", "--port", "9"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _refused(result: subprocess.CompletedProcess, folder: Path, why: str) -> None:
    assert result.returncode != 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == [
        f"Sugo cannot write to its data folder {folder} ({why}): let the user running Sugo write there, "
        "or point SUGO_DATA_DIR at another folder."
    ], result.stderr


@pytest.fixture
def read_only(tmp_path: Path):
    folders: list[Path] = []

    def make(folder: Path) -> Path:
        folder.chmod(stat.S_IRUSR | stat.S_IXUSR)  # 0500
        folders.append(folder)
        probe = subprocess.run(
            [*_as_a_user(), sys.executable, "-c", f"open({str(folder / 'probe')!r}, 'w')"],
            capture_output=True,
            text=True,
        )
        assert probe.returncode != 0 and "PermissionError" in probe.stderr, "the folder must refuse writes"
        return folder

    yield make
    for folder in folders:
        folder.chmod(0o700)


def test_a_read_only_empty_data_folder_stops_the_start_with_a_sentence(tmp_path, read_only):
    (tmp_path / "data").mkdir()
    folder = read_only(tmp_path / "data")  # made by the owner, then made read-only
    _refused(_start(folder), folder, "permission denied")
    assert list(folder.iterdir()) == []


def test_a_read_only_folder_holding_a_database_stops_the_start_with_a_sentence(tmp_path, read_only):
    folder = tmp_path / "data"
    build_services(Settings(data_dir=folder, start_scheduler=False)).close()
    before = sorted(p.name for p in folder.iterdir())
    read_only(folder)
    _refused(_start(folder), folder, "permission denied")
    assert sorted(p.name for p in folder.iterdir()) == before


def test_a_data_folder_under_a_file_stops_the_start_with_a_sentence(tmp_path):
    (tmp_path / "file").write_text("not a folder")
    folder = tmp_path / "file" / "data"
    _refused(_start(folder), folder, "a part of the path is a file")


def test_an_unreachable_postgresql_stops_the_start_with_a_sentence_and_no_password(tmp_path):
    env = {
        **os.environ,
        "SUGO_DATA_DIR": str(tmp_path / "data"),
        "SUGO_DATABASE_URL": "postgresql+psycopg://sugo:secret-pw@127.0.0.1:9/sugo",
        "SUGO_DISCOVERY_PORTS": "none=1",
        "HF_HUB_OFFLINE": "1",
    }
    done = subprocess.run(
        [sys.executable, "-m", "app", "--port", "9"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0
    assert (
        "Sugo cannot use its PostgreSQL database postgresql+psycopg://sugo:***@127.0.0.1:9/sugo"
        in done.stderr
    )
    assert "secret-pw" not in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "data" / "sugo.db").exists()  # not served from the SQLite file instead
