"""Issue 21, item 11: one rule for every run a restart can cut short (app/platform/jobs.py). Every table that keeps
runs saying "running" has its kinds declared by a prompt source, each kind resumes or closes with a
sentence, and settling goes on past a kind that fails."""

import logging
from types import SimpleNamespace

from app.models import SQLModel  # every table registered on its metadata
from app.platform.jobs import CLOSE, RESUME, RunKind, settle_runs
from app.sources import default_sources


def _tables_of_runs() -> set[str]:
    """The tables with a `status` column that a new row starts as "running"."""
    found = set()
    for table in SQLModel.metadata.tables.values():
        column = table.columns.get("status")
        default = getattr(column.default, "arg", None) if column is not None else None
        if default == "running":
            found.add(table.name)
    return found


def test_every_table_of_runs_has_its_kinds_and_each_kind_says_what_a_restart_does():
    kinds = default_sources().runs()
    tables = _tables_of_runs()
    assert tables >= {"scene_run", "summary_run", "summary_job"}, tables
    assert tables <= {k.table for k in kinds}, (
        f"runs nobody settles at start: {tables - {k.table for k in kinds}}"
    )
    names = [k.name for k in kinds]
    assert len(names) == len(set(names)), names
    for kind in kinds:
        assert kind.on_restart in (RESUME, CLOSE), kind
        assert (kind.on_restart == CLOSE) == bool(kind.reason), (
            f"{kind.name}: a closed run keeps a sentence, a resumed one none"
        )
        if kind.reason:
            assert kind.reason.endswith(".") and len(kind.reason) < 200, kind.reason


def test_settling_goes_on_past_a_kind_that_fails(caplog):
    def broken(services) -> int:
        raise RuntimeError("the database is locked")

    done = []
    kinds = [
        RunKind("Broken", "t", CLOSE, broken, reason="Stopped."),
        RunKind("Fine", "t", RESUME, lambda s: done.append(s) or 2),
    ]
    services = SimpleNamespace(sources=SimpleNamespace(runs=lambda: kinds))
    with caplog.at_level(logging.WARNING, logger="app.platform.jobs"):
        assert settle_runs(services) == {"Fine": 2}
    assert done == [services]
    assert (
        "settling the Broken runs" in caplog.text
        and "Fine: 2 run(s) cut short by the last shutdown resumed" in caplog.text
    )
