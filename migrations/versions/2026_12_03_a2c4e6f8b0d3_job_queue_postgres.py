"""the job queue on PostgreSQL: procrastinate's schema

Revision ID: a2c4e6f8b0d3
Revises: f1a3c5e7b9d2
Create Date: 2026-12-03 07:40:00

On PostgreSQL, background work is procrastinate's (app/platform/queue.py): its tables, types,
functions and triggers, all named procrastinate_*, are made here from the schema the installed
procrastinate ships (pinned in requirements/; a later procrastinate with schema changes ships SQL
migrations, applied by a revision of their own). SQLite gets nothing: its jobs run in process.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "a2c4e6f8b0d3"
down_revision: str | None = "f1a3c5e7b9d2"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("procrastinate_events", "procrastinate_periodic_defers", "procrastinate_jobs", "procrastinate_workers")
TYPES = ("procrastinate_job_to_defer_v1", "procrastinate_job_event_type", "procrastinate_job_status")


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    from procrastinate.schema import SchemaManager

    # Through psycopg itself, without parameters: several statements in one, `%` and `:` left alone.
    with bind.connection.driver_connection.cursor() as cursor:
        cursor.execute(SchemaManager.get_schema())


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    for table in TABLES:
        bind.exec_driver_sql(f"DROP TABLE IF EXISTS {table} CASCADE")
    bind.exec_driver_sql(
        "DO $$ DECLARE f record; BEGIN "
        "FOR f IN SELECT p.oid::regprocedure AS sig FROM pg_proc p "
        "JOIN pg_namespace n ON n.oid = p.pronamespace "
        "WHERE starts_with(p.proname, 'procrastinate_') AND n.nspname = current_schema() "
        "LOOP EXECUTE 'DROP FUNCTION ' || f.sig || ' CASCADE'; END LOOP; END $$"
    )
    for type_ in TYPES:
        bind.exec_driver_sql(f"DROP TYPE IF EXISTS {type_} CASCADE")
