"""bench/scale.py end to end, small: recall over 2,000 memories on SQLite and on PostgreSQL, and
two Sugo servers on one PostgreSQL under a five-user locust load for five seconds. What is checked is
that every figure is printed and that nothing failed, never how fast."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[2]
RECALL = [
    "sqlite_fill_s_2k",
    "recall_windows_2k",
    "pg_copy_s_2k",
    "pg_index_s_2k",
    "sqlite_recall_ms_p50_2k",
    "sqlite_recall_ms_p95_2k",
    "pg_recall_ms_p50_2k",
    "pg_recall_ms_p95_2k",
    "pg_recall_part_ms_p50_2k_embed",
    "pg_recall_part_ms_p50_2k_first_pass",
    "pg_recall_part_ms_p50_2k_word_pass",
]
# The load runs once here, with the model server's embeddings (the built-in model's run is the same
# code with the connection's embedding model left empty; the recall part loads that model).
LOAD = [
    "two_server_endpoint_p95_ms",
    "two_server_endpoint_send_p95_ms",
    "two_server_endpoint_rps",
    "two_server_endpoint_quiet_page_cpu_ms",
    "two_server_endpoint_quiet_send_cpu_ms",
    "two_server_endpoint_cpu_demand_cores",
    "two_server_endpoint_machine_busy_pct",
    "two_server_endpoint_cores_used_servers",
    "two_server_endpoint_cores_used_locust",
]


def _figures(output: str) -> dict[str, str]:
    return dict(
        line.split("=", 1) for line in output.splitlines() if "=" in line and not line.startswith("#")
    )


@pytest.mark.timeout(600)  # only a hung run; on a quiet machine it takes under a minute
def test_scale_bench_prints_every_figure_and_the_load_has_no_failures():
    env = {k: v for k, v in os.environ.items() if not k.startswith("SUGO_")} | {"HF_HUB_OFFLINE": "1"}
    run = subprocess.run(
        [
            sys.executable,
            "bench/scale.py",
            "--memories",
            "2000",
            "--runs",
            "5",
            "--users",
            "5",
            "--seconds",
            "5",
            "--load-embeddings",
            "endpoint",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=590,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    figures = _figures(run.stdout)
    for name in RECALL + LOAD:
        assert float(figures[name]) > 0, (name, run.stdout)
    assert figures["recall_windows_2k"] == "10000"
    assert figures["embedding_model"] == "all-MiniLM-L6-v2"
    assert int(figures["two_server_endpoint_requests"]) > 0
    assert int(figures["two_server_endpoint_failures"]) == 0, run.stdout
    assert int(figures["two_server_endpoint_page_requests"]) + int(
        figures["two_server_endpoint_send_requests"]
    ) == int(figures["two_server_endpoint_requests"])
