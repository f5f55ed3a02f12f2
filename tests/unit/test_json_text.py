"""JSON columns' text (app/platform/db.py): strict JSON on both databases."""

import json
import math

from app.platform.db import json_text


def test_plain_values_are_written_as_json_dumps_writes_them():
    value = {"a": [1, 2.5, "x", None, True], "b": {"c": "é"}}
    assert json_text(value) == json.dumps(value)


def test_numbers_json_cannot_hold_become_null_wherever_they_sit():
    value = {"swipe_id": math.inf, "rest": [1.0, -math.inf, {"x": math.nan}], "ok": 3}
    assert json.loads(json_text(value)) == {"swipe_id": None, "rest": [1.0, None, {"x": None}], "ok": 3}
    assert "Infinity" not in json_text(value) and "NaN" not in json_text(value)
