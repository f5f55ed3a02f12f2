"""Background work's threads run at a lower OS priority than the app's other threads (Linux): the
thread that asks is lowered, the others are not."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from app.platform.jobs import BACKGROUND_NICE, lower_this_threads_priority


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a thread's own nice value is Linux's")
def test_only_the_calling_thread_is_lowered():
    seen: dict[str, int] = {}

    def background() -> None:
        lower_this_threads_priority()
        seen["tid"] = threading.get_native_id()
        seen["nice"] = os.getpriority(os.PRIO_PROCESS, seen["tid"])
        lower_this_threads_priority()  # a second call keeps it where it is
        seen["again"] = os.getpriority(os.PRIO_PROCESS, seen["tid"])

    before = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    worker = threading.Thread(target=background)
    worker.start()
    worker.join()
    assert seen["nice"] == seen["again"] == max(BACKGROUND_NICE, before)
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == before
