"""Settings: the environment is read in one function; the default is a SQLite file under ~/.cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuning_db import DBSettings, TuningDB, db_settings_from_env, default_db_path, sqlite_url


def test_settings_from_env() -> None:
    url = "postgresql+psycopg://svc@db:5432/tuning"
    assert db_settings_from_env({"AUTOSCHED_DB_URL": url}).url == url
    assert db_settings_from_env({"AUTOSCHED_DB_URL": "  "}) == DBSettings()
    assert db_settings_from_env({}).url == sqlite_url(default_db_path())


def test_settings_reject_nonsense() -> None:
    with pytest.raises(ValueError, match="url"):
        DBSettings(url="")
    with pytest.raises(ValueError, match="busy_timeout"):
        DBSettings(sqlite_busy_timeout_ms=-1)
    with pytest.raises(ValueError, match="cache_mib"):
        DBSettings(sqlite_cache_mib=0)


def test_default_database_is_created_on_first_use(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("AUTOSCHED_DB_URL", "sqlite:////nonexistent/never/used.db")  # only read on request
    assert default_db_path() == tmp_path / ".cache" / "autosched" / "tuning.db"
    with TuningDB() as db:
        assert db.workloads() == []
    assert (tmp_path / ".cache" / "autosched" / "tuning.db").is_file()


def test_repr_hides_password() -> None:
    db = TuningDB(DBSettings(url="postgresql+psycopg://u:secret@127.0.0.1:1/x"), migrate=False)  # no connection
    assert "secret" not in repr(db) and "127.0.0.1:1/x" in repr(db)
    db.close()
