"""`python -m app`: upgrade the database and serve (127.0.0.1 unless told otherwise).
`python -m app copy-to-postgres URL`: copy the data folder's SQLite database into an empty PostgreSQL one.
`python -m app worker`: run background jobs from the PostgreSQL job queue, serving nothing."""

import argparse
import asyncio
import logging
import signal
import sys

import uvicorn
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from app.connections.crypto import KeyBox, KeyFileMismatch, check_key_file
from app.main import build_services
from app.models import metadata
from app.platform.copy_to_postgres import NOT_COPIED, CopyRefused, copy_to_postgres
from app.platform.db import DataFolderError, check_data_folder, make_engine
from app.platform.migrate import upgrade_database
from app.platform.queue import make_queue
from app.platform.settings import POSTGRES_URL_PREFIX, Settings, load_settings
from app.web.auth import is_loopback, open_listening_refusal


def proxy_options(settings: Settings) -> dict:
    """uvicorn's proxy-header options: believed only from the proxies named in SUGO_TRUSTED_PROXIES.
    uvicorn's own default trusts 127.0.0.1, so anything reaching Sugo through a loopback hop could
    pick its client address with X-Forwarded-For and never meet the login backoff."""
    if not settings.trusted_proxies:
        return {"proxy_headers": False}
    return {"proxy_headers": True, "forwarded_allow_ips": list(settings.trusted_proxies)}


def postgres_refusal(settings: Settings) -> str | None:
    """Why Sugo cannot serve from its PostgreSQL database, as one sentence (the URL shown without its
    password), or None: checked here because uvicorn would wrap the same error from create_app in a
    traceback. The database is brought to this Sugo's schema on the way, as create_app would."""
    assert settings.database_url
    shown = make_url(settings.database_url).render_as_string(hide_password=True)
    engine = make_engine(settings.database_url)
    try:
        upgrade_database(engine)
        check_key_file(engine, KeyBox(settings.secret_key_path), settings.secret_key_path, shared=True)
    except KeyFileMismatch as err:
        return str(err)
    except SQLAlchemyError as err:  # unreachable, a login refused, no pgvector: its first line
        why = str(getattr(err, "orig", None) or err).strip().splitlines()[0]
        return f"Sugo cannot use its PostgreSQL database {shown}: {why}"
    finally:
        engine.dispose()
    return None


def copy_to_postgres_command(settings: Settings, url: str) -> int:
    """Print `table=rows` per table and a closing sentence; a refusal's sentence on stderr, exit 1.
    The URL is shown without its password."""
    if not url.startswith(POSTGRES_URL_PREFIX):
        print(f"The target is a URL that starts with {POSTGRES_URL_PREFIX}.", file=sys.stderr)
        return 2
    try:
        shown = make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        print(
            "The PostgreSQL URL cannot be read: postgresql+psycopg://user:password@host/database",
            file=sys.stderr,
        )
        return 2
    database_path = settings.database_path
    if not database_path.is_file():
        print(
            f"There is no Sugo database at {database_path}: set SUGO_DATA_DIR to the data folder.",
            file=sys.stderr,
        )
        return 1
    source = make_engine(database_path)
    try:
        result = copy_to_postgres(source, url, metadata)
    except CopyRefused as err:
        print(str(err), file=sys.stderr)
        return 1
    except SQLAlchemyError as err:  # PostgreSQL unreachable, a login refused: its first line, not a traceback
        why = str(getattr(err, "orig", None) or err).strip().splitlines()[0]
        print(f"The copy to {shown} failed and nothing was written there: {why}", file=sys.stderr)
        return 1
    finally:
        source.dispose()
    for table, rows in result.rows:  # printed once committed: a refused copy shows no rows as copied
        print(f"{table}={rows}")
    print(
        f"Copied {result.total} rows in {len(result.rows)} tables from {database_path} to {shown}. {NOT_COPIED}"
    )
    return 0


WORKER_NEEDS_POSTGRES = (
    "`python -m app worker` runs jobs from the PostgreSQL job queue: set SUGO_DATABASE_URL to the "
    "postgresql+psycopg://… URL the Sugo servers use. With SQLite each server runs its own jobs."
)


def worker_command(settings: Settings) -> int:
    """Run the queue's jobs (the periodic ones included) until SIGINT or SIGTERM: one more worker
    beside the servers' own, for a machine that only does background work."""
    if not settings.database_url:
        print(WORKER_NEEDS_POSTGRES, file=sys.stderr)
        return 2

    try:
        services = build_services(settings)
    except DataFolderError as err:
        print(str(err), file=sys.stderr)
        return 1

    async def work() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        # Runs claimed by a job (a summary, Prepare) stay this worker's while it lives.
        services.claims.table.start_heartbeat()
        services.queue = queue = make_queue(settings, services.sources.jobs())
        queue.start(services)  # on this loop: async jobs run here, as on a server's
        services.scheduler = queue.scheduler
        logging.getLogger("sugo").info("Worker %s is taking jobs from the queue.", settings.server)
        try:
            await stop.wait()
        finally:
            queue.stop()
            services.claims.table.stop_heartbeat()
            services.close()

    asyncio.run(work())
    return 0


def main() -> None:
    try:
        settings = load_settings()
    except ValueError as err:  # a SUGO_* value that cannot be used: its sentence, not a traceback
        sys.exit(str(err))
    parser = argparse.ArgumentParser(prog="sugo")
    parser.add_argument("--host", default=settings.host)
    parser.add_argument("--port", type=int, default=settings.port)
    commands = parser.add_subparsers(dest="command")
    copy = commands.add_parser(
        "copy-to-postgres", help="copy the data folder's database into an empty PostgreSQL database"
    )
    copy.add_argument("url", help="postgresql+psycopg://user:password@host/database")
    commands.add_parser("worker", help="run background jobs from the PostgreSQL job queue, serving nothing")
    args = parser.parse_args()
    if args.command == "copy-to-postgres":
        sys.exit(copy_to_postgres_command(settings, args.url))
    if args.command == "worker":
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        sys.exit(worker_command(settings))
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
    if settings.database_url and (refusal := postgres_refusal(settings)):
        sys.exit(refusal)
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
