"""Waiting on a condition instead of sleeping: as fast as the condition allows, and a failure that
says what never happened rather than a later assertion that cannot say why."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(condition: Callable[[], T], *, timeout: float = 10, interval: float = 0.01, what: str = "") -> T:
    """Call `condition` until it returns something truthy and return that; fail the test when
    `timeout` seconds pass first, naming `what` was awaited."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"waited {timeout} s for {what or condition.__qualname__}, in vain")
        time.sleep(interval)
