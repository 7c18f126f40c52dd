"""Run the Alembic migrations from code: no alembic.ini, the scripts live inside the package.

`upgrade` is safe to call from many processes at once against one database: on PostgreSQL it holds
an advisory lock for the transaction, on SQLite the migration runs in a `BEGIN IMMEDIATE`
transaction (the file's write lock). The second caller then finds the schema at head and does
nothing. The whole upgrade is one transaction, so a failure leaves the previous schema intact.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, text

from tuning_db.engine import make_engine, write_engine
from tuning_db.settings import DBSettings

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
_PG_LOCK_KEY = 0x6175746F73636864  # "autoschd": serializes migrations between processes


def alembic_config(url: str | None = None) -> Config:
    """An Alembic Config built in code, pointing at `tuning_db/migrations`."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url is not None:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


@cache
def head_revision() -> str:
    """The newest revision of the migration scripts."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "tuning_db/migrations has no revisions"
    return head


def current_revision(conn: Connection) -> str | None:
    """The revision the database is at (None for an empty database)."""
    return MigrationContext.configure(conn).get_current_revision()


def _run(engine: Engine, revision: str, downgrade: bool = False) -> None:
    with write_engine(engine).begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_LOCK_KEY})
        cfg = alembic_config()
        cfg.attributes["connection"] = conn
        if downgrade:
            command.downgrade(cfg, revision)
        else:
            command.upgrade(cfg, revision)


def upgrade(target: str | DBSettings | Engine, revision: str = "head") -> None:
    """Bring the database at `target` (URL, settings or Engine) to `revision` (default: head)."""
    engine = target if isinstance(target, Engine) else make_engine(target)
    try:
        _run(engine, revision)
    finally:
        if engine is not target:
            engine.dispose()


def downgrade(target: str | DBSettings | Engine, revision: str = "base") -> None:
    """Undo migrations down to `revision` ("base" drops every table; for tests and rollbacks)."""
    engine = target if isinstance(target, Engine) else make_engine(target)
    try:
        _run(engine, revision, downgrade=True)
    finally:
        if engine is not target:
            engine.dispose()


def ensure_schema(engine: Engine) -> None:
    """Upgrade to head unless already there (a cheap read, so opening a database stays fast)."""
    with engine.connect() as conn:
        at = current_revision(conn)
    if at == head_revision():
        return
    if at is not None and at not in _known_revisions():
        raise RuntimeError(
            f"the database schema is at revision {at!r}, which this tuning_db does not know: it was "
            "migrated by a newer autosched; upgrade autosched rather than risk the data"
        )
    _run(engine, "head")


@cache
def _known_revisions() -> frozenset[str]:
    scripts = ScriptDirectory.from_config(alembic_config())
    return frozenset(r.revision for r in scripts.walk_revisions())
