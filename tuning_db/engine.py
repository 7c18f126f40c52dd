"""Engines configured for many concurrent writers on SQLite and PostgreSQL.

SQLite: WAL (readers never block the writer), a long busy timeout, foreign keys on, and real
transactions. Python's sqlite3 module does not emit BEGIN before DDL and only ever a *deferred*
BEGIN; two processes that both read and then write inside deferred transactions can deadlock and
one gets "database is locked" at once, whatever the busy timeout. So we take over BEGIN (the
recipe from the SQLAlchemy docs) and write transactions use `BEGIN IMMEDIATE`, which waits for the
write lock up front, under the busy timeout. Use `write_engine(engine)` for those, and
`read_engine(engine)` for single-statement reads.

Every engine hides bound parameters in its errors and logs (`hide_parameters=True`): a failed
statement must not print a record, a key or a credential into a service log.
"""

from __future__ import annotations

import random
import sqlite3
import time
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url

from tuning_db.settings import DBSettings

_IMMEDIATE = "autosched_sqlite_immediate"


def is_sqlite(url: str | URL) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def _sqlite_file(url: URL) -> Path | None:
    """The file behind a SQLite URL, or None for an in-memory database."""
    db = url.database
    if not db or db == ":memory:" or db.startswith("file:") or url.query.get("mode") == "memory":
        return None
    return Path(db)


def make_engine(settings: DBSettings | str) -> Engine:
    """An Engine for `settings` (or a URL); creates the parent folder of a SQLite file."""
    if isinstance(settings, str):
        settings = DBSettings(url=settings)
    url = make_url(settings.url)
    if url.get_backend_name() == "sqlite":
        return _make_sqlite_engine(url, settings)
    kwargs: dict[str, Any] = {"echo": settings.echo, "pool_pre_ping": settings.pool_pre_ping, "hide_parameters": True}
    if url.get_backend_name() == "postgresql":
        kwargs["pool_size"] = settings.pool_size
    return create_engine(url, **kwargs)


def _make_sqlite_engine(url: URL, settings: DBSettings) -> Engine:
    path = _sqlite_file(url)
    if path is not None:
        path.expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, echo=settings.echo, hide_parameters=True)
    timeout_ms, cache_mib = settings.sqlite_busy_timeout_ms, settings.sqlite_cache_mib
    wal = path is not None

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we emit BEGIN ourselves (see `_on_begin`)
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {int(timeout_ms)}")
        cur.execute(f"PRAGMA cache_size = {-1024 * int(cache_mib)}")  # negative: KiB, not pages
        if wal:
            _enable_wal(cur, timeout_ms)
            cur.execute("PRAGMA synchronous = NORMAL")
        cur.execute("PRAGMA foreign_keys = ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        immediate = conn.get_execution_options().get(_IMMEDIATE, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


def _enable_wal(cur: Any, timeout_ms: int) -> None:
    """Put the database file in WAL mode, retrying while another connection holds it.

    Why: switching the journal mode needs an exclusive lock, and SQLite answers "database is locked"
    at once instead of calling the busy handler when it cannot take it; eight processes opening a
    new database together lost one in about six runs (tests/tuning_db/test_db_concurrency.py). The
    mode is stored in the file, so once any connection has set it the others only read it.
    """
    deadline = time.monotonic() + timeout_ms / 1000.0
    delay = 0.005
    while True:
        try:
            mode = cur.execute("PRAGMA journal_mode").fetchone()[0]
            if str(mode).lower() != "wal":
                cur.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            msg = str(exc).lower()
            if ("locked" not in msg and "busy" not in msg) or time.monotonic() >= deadline:
                raise
        time.sleep(delay * (0.5 + random.random()))  # jitter: the waiting processes do not retry in step
        delay = min(delay * 2, 0.2)


def write_engine(engine: Engine) -> Engine:
    """A view of `engine` (same pool) whose transactions take the write lock at BEGIN on SQLite."""
    if engine.dialect.name != "sqlite":
        return engine
    return engine.execution_options(**{_IMMEDIATE: True})


def read_engine(engine: Engine) -> Engine:
    """A view of `engine` (same pool) for single-statement reads.

    On PostgreSQL it runs in autocommit: one statement is consistent on its own, and skipping
    BEGIN/ROLLBACK saves two network round trips per `best()` (about half its latency on loopback).
    SQLite is in-process, where a transaction costs nothing worth saving.
    """
    if engine.dialect.name != "postgresql":
        return engine
    return engine.execution_options(isolation_level="AUTOCOMMIT")
