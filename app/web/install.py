"""Installing Sugo as an app on a phone: the web app manifest and the service worker, both served
from the root (a worker's scope is the folder it is served from, and it must cover every page)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from functools import lru_cache

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response

from app.web.templates import STATIC_DIR, TEMPLATES_DIR, env

router = APIRouter(include_in_schema=False)

# The dark theme's page and top-bar colours (static/app.css --bg, --bg-2).
BACKGROUND = "#0f1015"
THEME = "#16171f"
OFFLINE_PAGE = "/static/offline.html"
WORKER_TEMPLATE = "install/sw.js"
# The app shell: what the offline page and every page's first paint need. Never a page, an API
# answer or an image of the user's: those are theirs and change.
SHELL = (
    "/static/app.css", "/static/app.js", "/static/htmx-2.0.11.min.js", "/static/favicon.svg",
    "/static/icons/icon-192.png", "/static/icons/icon-512.png", "/static/icons/icon-maskable-512.png",
    "/static/icons/apple-touch-icon.png", OFFLINE_PAGE,
)  # fmt: skip # a table: the app shell's files, in rows


def web_manifest() -> dict:
    """The manifest: "Add to Home Screen" opens Sugo full-screen at its chat list."""
    return {
        "name": "Sugo",
        "short_name": "Sugo",
        "id": "/",
        "start_url": "/",
        "scope": "/",
        "display": "standalone",
        "background_color": BACKGROUND,
        "theme_color": THEME,
        "description": "Self-hosted AI roleplay and chat with memory that works.",
        "icons": [
            {"src": "/static/icons/icon-192.png", "sizes": "192x192", "type": "image/png", "purpose": "any"},
            {"src": "/static/icons/icon-512.png", "sizes": "512x512", "type": "image/png", "purpose": "any"},
            {
                "src": "/static/icons/icon-maskable-512.png",
                "sizes": "512x512",
                "type": "image/png",
                "purpose": "maskable",
            },
        ],
    }


def shell_version(parts: Iterable[bytes]) -> str:
    """A short hash of the shell's files and the worker's own text: any change in a release makes a
    new worker, whose new cache replaces the old one."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(hashlib.sha256(part).digest())
    return digest.hexdigest()[:16]


@lru_cache(maxsize=1)
def worker_script() -> str:
    """The worker's text, with the shell and its version filled in (read once: a release restarts)."""
    files = [(STATIC_DIR / path.removeprefix("/static/")).read_bytes() for path in SHELL]
    version = shell_version([*files, (TEMPLATES_DIR / WORKER_TEMPLATE).read_bytes()])
    return env.get_template(WORKER_TEMPLATE).render(version=version, shell=list(SHELL), offline=OFFLINE_PAGE)


@router.get("/manifest.webmanifest")
def show_manifest() -> JSONResponse:
    """The web app manifest."""
    return JSONResponse(web_manifest(), media_type="application/manifest+json")


@router.get("/sw.js")
def show_service_worker() -> Response:
    """The service worker; never cached by the browser's HTTP cache, so a release is seen at once."""
    return Response(worker_script(), media_type="text/javascript", headers={"Cache-Control": "no-cache"})
