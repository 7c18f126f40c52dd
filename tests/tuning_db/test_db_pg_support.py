"""The throwaway-PostgreSQL helper: skips without binaries (fails under CI), cleans up after itself."""

from __future__ import annotations

import psycopg
import pytest

from tests.support import postgres as pgsupport


def test_missing_binaries_skip_locally(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pgsupport, "find_pg_bin", lambda: None)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="initdb, pg_ctl"):
        pgsupport.require_pg_bin()


def test_missing_binaries_fail_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pgsupport, "find_pg_bin", lambda: None)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI is set"):
        pgsupport.require_pg_bin()


@pytest.mark.postgres
def test_server_starts_serves_and_is_gone_afterwards() -> None:
    bin_dir = pgsupport.require_pg_bin()
    with pgsupport.postgres_server(bin_dir) as pg:
        url = pg.create_database("probe")
        assert url == f"postgresql+psycopg://postgres@127.0.0.1:{pg.port}/probe"
        with psycopg.connect(host=pg.host, port=pg.port, user="postgres", dbname="probe") as conn:
            assert conn.execute("select 1 + 1").fetchone() == (2,)
        pid = pgsupport._postmaster_pid(pg.data_dir)
        assert pid is not None and pgsupport._alive(pid, pg.data_dir)
        root = pg.root
    assert not pgsupport._alive(pid, pg.data_dir)
    assert not root.exists()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(host="127.0.0.1", port=pg.port, user="postgres", dbname="probe", connect_timeout=2)
