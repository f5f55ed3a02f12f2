"""`python -m app`: upgrade the database and serve (127.0.0.1 unless told otherwise)."""

import argparse
import logging
import sys

import uvicorn

from app.platform.db import DataFolderError, check_data_folder
from app.platform.settings import Settings, load_settings
from app.web.auth import is_loopback, open_listening_refusal


def proxy_options(settings: Settings) -> dict:
    """uvicorn's proxy-header options: believed only from the proxies named in SUGO_TRUSTED_PROXIES.
    uvicorn's own default trusts 127.0.0.1, so anything reaching Sugo through a loopback hop could
    pick its client address with X-Forwarded-For and never meet the login backoff."""
    if not settings.trusted_proxies:
        return {"proxy_headers": False}
    return {"proxy_headers": True, "forwarded_allow_ips": list(settings.trusted_proxies)}


def main() -> None:
    try:
        settings = load_settings()
    except ValueError as err:  # a SUGO_* value that cannot be used: its sentence, not a traceback
        sys.exit(str(err))
    parser = argparse.ArgumentParser(prog="sugo")
    parser.add_argument("--host", default=settings.host)
    parser.add_argument("--port", type=int, default=settings.port)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    log = logging.getLogger("sugo")
    if refusal := open_listening_refusal(
        args.host, password=settings.password, allow_open=settings.allow_open
    ):
        sys.exit(refusal)
    try:  # here, not only in create_app: uvicorn would print a traceback around the sentence
        check_data_folder(settings.data_dir, settings.database_path.name)
    except DataFolderError as err:
        sys.exit(str(err))
    if not is_loopback(args.host) and not settings.password:
        log.warning(
            "Listening on %s without SUGO_PASSWORD (SUGO_ALLOW_OPEN=1): anyone who can reach it can use "
            "Sugo.",
            args.host,
        )
    if not is_loopback(args.host) and not settings.allowed_hosts:
        log.warning(
            "Only requests addressed to 127.0.0.1, localhost or ::1 are answered: set SUGO_ALLOWED_HOSTS "
            "to the names or addresses you will use to reach Sugo (for example 192.168.1.20,sugo.lan)."
        )
    uvicorn.run(
        "app.main:create_app",
        factory=True,
        host=args.host,
        port=args.port,
        log_level="info",
        **proxy_options(settings),
    )


if __name__ == "__main__":
    main()
