"""Switching a SQLite file to WAL while other connections hold it: retried, not failed."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tuning_db.engine import _enable_wal


class _FlakyCursor:
    """A cursor whose journal-mode switch fails `locked_times` times with SQLite's own error."""

    def __init__(self, locked_times: int, error: str = "database is locked") -> None:
        self.locked_times, self.error, self.calls = locked_times, error, 0

    def execute(self, sql: str) -> _FlakyCursor:
        self.calls += 1
        if sql == "PRAGMA journal_mode = WAL" and self.locked_times > 0:
            self.locked_times -= 1
            raise sqlite3.OperationalError(self.error)
        self.sql = sql
        return self

    def fetchone(self) -> tuple[str]:
        return ("delete",)


def test_a_locked_switch_is_retried_until_it_succeeds() -> None:
    cur = _FlakyCursor(locked_times=3)
    _enable_wal(cur, timeout_ms=5_000)
    assert cur.locked_times == 0 and cur.sql == "PRAGMA journal_mode = WAL"


def test_a_lock_held_past_the_busy_timeout_is_reported() -> None:
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        _enable_wal(_FlakyCursor(locked_times=10**6), timeout_ms=50)


def test_other_errors_are_not_retried() -> None:
    cur = _FlakyCursor(locked_times=5, error="disk I/O error")
    with pytest.raises(sqlite3.OperationalError, match="disk I/O"):
        _enable_wal(cur, timeout_ms=5_000)
    assert cur.calls == 2  # read the mode once, tried the switch once


def test_a_real_file_ends_in_wal_and_a_second_connection_only_reads_it(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with sqlite3.connect(path) as a:
        _enable_wal(a.cursor(), timeout_ms=1_000)
        assert a.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with sqlite3.connect(path) as b:
        real, seen = b.cursor(), []

        class Recording:
            def execute(self, sql: str):
                seen.append(sql)
                return real.execute(sql)

        _enable_wal(Recording(), timeout_ms=1_000)
        assert seen == ["PRAGMA journal_mode"]  # the mode is in the file: no exclusive lock needed
