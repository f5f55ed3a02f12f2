"""Memory Recall reads its scores back as one text row per query (app/memory/recall/index.py,
one_row): that relies on SQLite's printf('%!.17g') giving every double back exactly."""

import random

from app.platform.db import make_engine


def test_sqlite_prints_floats_that_read_back_exactly(tmp_path):
    rng = random.Random(9)
    values = [rng.uniform(-50, 50) for _ in range(3000)] + [
        rng.random() * 10 ** rng.randint(-12, 12) for _ in range(3000)
    ]
    values += [0.0, -0.0, 1 / 3, 0.1, 5e-324, 1.7976931348623157e308, -2.2250738585072014e-308]
    engine = make_engine(tmp_path / "floats.db")
    with engine.connect() as conn:
        conn.exec_driver_sql("CREATE TABLE t (i INTEGER PRIMARY KEY, x REAL)")
        conn.exec_driver_sql("INSERT INTO t (x) VALUES " + ",".join("(?)" for _ in values), tuple(values))
        text = conn.exec_driver_sql(
            "SELECT group_concat(printf('%!.17g', x), ' ') FROM (SELECT x FROM t ORDER BY i)"
        ).scalar()
    engine.dispose()
    assert [float(v) for v in text.split()] == values
