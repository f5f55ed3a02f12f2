"""Alembic environment. The app passes its own engine's connection (sqlite-vec loaded) through
config.attributes["connection"]; the command line builds one from SUGO_DATABASE_URL when it is set
(PostgreSQL), else from SUGO_DATA_DIR."""

from alembic import context

from app.platform.migrate import include_name
from app.models import metadata

config = context.config


def run_migrations(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=True,
        include_name=include_name,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


connection = config.attributes.get("connection")
if connection is not None:
    run_migrations(connection)
else:
    from app.platform.db import make_engine
    from app.platform.settings import load_settings

    settings = load_settings()
    engine = make_engine(settings.database_url or settings.database_path)
    with engine.connect() as conn:
        run_migrations(conn)
