"""`python -m app`: upgrade the database and serve (127.0.0.1 unless told otherwise)."""

import argparse
import logging

import uvicorn

from app.settings import load_settings


def main() -> None:
    settings = load_settings()
    parser = argparse.ArgumentParser(prog="sugo")
    parser.add_argument("--host", default=settings.host)
    parser.add_argument("--port", type=int, default=settings.port)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.host not in {"127.0.0.1", "localhost", "::1"} and not settings.password:
        logging.getLogger("sugo").warning(
            "Listening on %s without SUGO_PASSWORD: anyone on your network can use Sugo.", args.host
        )
    uvicorn.run("app.main:create_app", factory=True, host=args.host, port=args.port, log_level="info")


if __name__ == "__main__":
    main()
