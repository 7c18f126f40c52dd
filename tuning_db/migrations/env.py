"""Alembic environment for `tuning_db`.

`tuning_db.migrate` hands us an open connection inside its own transaction (with the lock that
serializes concurrent upgrades) through `config.attributes["connection"]`. Without one (the
`alembic` command line with `-x`/ini), we connect to `sqlalchemy.url` ourselves.
"""

from __future__ import annotations

from alembic import context

from tuning_db.engine import make_engine
from tuning_db.models import Base

config = context.config
target_metadata = Base.metadata


def _run_with(connection) -> None:  # type: ignore[no-untyped-def]
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",  # SQLite can't ALTER most things
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run_with(connection)
        return
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no database: pass a connection in config.attributes or set sqlalchemy.url")
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            _run_with(conn)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
