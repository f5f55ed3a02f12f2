"""Browser tests: Playwright driving Debian's Chromium (never a downloaded browser), at desktop
and phone sizes, against a live Sugo and the test model server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.support.live import LiveSugo

CHROMIUM = "/usr/bin/chromium"
# Not under test-results/: pytest-playwright empties that folder at the start of every run.
SCREENS = Path(__file__).resolve().parents[2] / "screenshots"
# The suite runs on shared, noisy machines where a background model call plus a 1 s panel poll can take
# longer than Playwright's default 5 s; a wait that succeeds returns as soon as it does, so only a
# failing wait gets slower.
expect.set_options(timeout=15_000)
VIEWPORTS = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}


def pytest_collection_modifyitems(items):
    for item in items:
        if "/e2e/" in str(item.fspath):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    return {
        **browser_type_launch_args,
        "executable_path": CHROMIUM,
        "args": [
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--disable-quic",
        ],
    }


@pytest.fixture(params=list(VIEWPORTS), ids=list(VIEWPORTS))
def screen(request) -> str:
    return request.param


@pytest.fixture
def browser_context_args(browser_context_args, screen):
    phone = screen == "phone"
    return {
        **browser_context_args,
        "viewport": VIEWPORTS[screen],
        "has_touch": phone,
        "is_mobile": phone,
        "device_scale_factor": 1,
    }


@pytest.fixture
def live(tmp_path) -> Iterator[LiveSugo]:
    with LiveSugo(tmp_path / "data") as sugo:
        yield sugo


@pytest.fixture
def shot(page, screen, request):
    """Save a screenshot to screenshots/<test>-<device>-<name>.png for a human to look at."""
    SCREENS.mkdir(parents=True, exist_ok=True)
    base = request.node.originalname

    def take(name: str) -> Path:
        path = SCREENS / f"{base}-{screen}-{name}.png"
        page.screenshot(path=str(path))
        return path

    return take


@pytest.fixture
def no_script_runs(page):
    """Fails the test if any page script opens a dialog (what an injected alert() would do)."""
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    return dialogs
