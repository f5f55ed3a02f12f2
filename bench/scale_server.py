"""One Sugo server for bench/scale.py's two-server load, serving from PostgreSQL.

Written when `python -m app` did not serve from PostgreSQL yet; kept because it serves the same app
(create_app over the SUGO_* settings, SUGO_DATABASE_URL included) with uvicorn's access logs off (a
load run would spend its time writing them), which `python -m app` keeps on.

Run: python bench/scale_server.py --port 8001   (with SUGO_DATA_DIR and SUGO_DATABASE_URL set)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import uvicorn  # noqa: E402

from app.__main__ import proxy_options  # noqa: E402
from app.main import create_app  # noqa: E402
from app.platform.settings import load_settings  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    settings = load_settings()
    if not settings.database_url:
        sys.exit("Set SUGO_DATABASE_URL to the PostgreSQL database both servers share.")
    uvicorn.run(
        create_app(settings),
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=5,
        **proxy_options(settings),
    )


if __name__ == "__main__":
    main()
