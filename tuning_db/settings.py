"""One typed settings object for the tuning database.

The environment is read in exactly one place, `db_settings_from_env`, so that library code never
changes behaviour because of a variable set somewhere far away: a service or CLI calls it once at
start-up and passes the result down; everything else takes a `DBSettings` or a URL.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

ENV_DB_URL = "AUTOSCHED_DB_URL"


def default_db_path() -> Path:
    """Where the embedded SQLite database lives when nobody says otherwise (per user, survives reboots)."""
    return Path.home() / ".cache" / "autosched" / "tuning.db"


def sqlite_url(path: str | os.PathLike[str]) -> str:
    """SQLAlchemy URL of a SQLite file; the path is made absolute so the URL means one file everywhere."""
    return "sqlite+pysqlite:///" + str(Path(path).expanduser().resolve())


@dataclass(frozen=True)
class DBSettings:
    """How to reach the tuning database.

    `url` is any SQLAlchemy URL: `sqlite+pysqlite:////abs/path.db` (default, created on first use) or
    `postgresql+psycopg://user@host:port/dbname` in production.
    `sqlite_busy_timeout_ms` is how long a SQLite writer waits for the file lock before failing:
    long, because several tuner processes commit batches to one file at the same time.
    `sqlite_cache_mib` is the page cache per connection; SQLite's 2 MiB default makes index
    maintenance on a database of a million records go to the OS for most pages.
    `pool_pre_ping` (server databases) checks a pooled connection before use, so a restarted server
    costs no failed request; it adds one round trip per call (see docs/bench_db.md).
    """

    url: str = field(default_factory=lambda: sqlite_url(default_db_path()))
    echo: bool = False
    sqlite_busy_timeout_ms: int = 60_000
    sqlite_cache_mib: int = 64
    pool_size: int = 5
    pool_pre_ping: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.url, str) or not self.url.strip():
            raise ValueError("DBSettings.url must be a non-empty SQLAlchemy URL")
        if self.sqlite_busy_timeout_ms < 0:
            raise ValueError("DBSettings.sqlite_busy_timeout_ms must be >= 0")
        if self.sqlite_cache_mib < 1:
            raise ValueError("DBSettings.sqlite_cache_mib must be >= 1")


def db_settings_from_env(env: Mapping[str, str] | None = None) -> DBSettings:
    """Settings from the process environment (`AUTOSCHED_DB_URL`), else the default SQLite file.

    The only function in `tuning_db` that reads the environment; pass `env` to test it.
    """
    source = os.environ if env is None else env
    url = source.get(ENV_DB_URL, "").strip()
    return DBSettings(url=url) if url else DBSettings()
