"""A throwaway PostgreSQL server for tests and benchmarks.

    with postgres_server() as pg:          # initdb + pg_ctl start on a free loopback port
        url = pg.create_database("t1")     # postgresql+psycopg://postgres@127.0.0.1:PORT/t1

Or, in pytest, the session-scoped fixture `postgres_server_session` (import it into a conftest).
The cluster lives in a temporary folder and is stopped with `pg_ctl stop -m fast` (then by the
postmaster's pid if that fails) and deleted. Processes are only ever stopped by the pid we started;
never by name. As root, initdb and postgres refuse to run, so they run as the `postgres` user.

When the server binaries are missing, `require_pg_bin()` skips the test, except when the
environment variable `CI` is set: CI must really test PostgreSQL, so there it fails.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

PG_VERSIONS = ("15", "16", "17", "14")
RUN_AS = "postgres"


def find_pg_bin() -> Path | None:
    """Folder holding initdb/pg_ctl: $PG_BIN, Debian's /usr/lib/postgresql/N/bin, then $PATH."""
    candidates = [os.environ.get("PG_BIN", "")]
    candidates += [f"/usr/lib/postgresql/{v}/bin" for v in PG_VERSIONS]
    found = shutil.which("initdb")
    if found:
        candidates.append(str(Path(found).parent))
    for c in candidates:
        if c and (Path(c) / "initdb").is_file() and (Path(c) / "pg_ctl").is_file():
            return Path(c)
    return None


def require_pg_bin() -> Path:
    """The binaries' folder, or skip the test (fail under CI) with a message that says why."""
    path = find_pg_bin()
    if path is None:
        msg = (
            "PostgreSQL server binaries (initdb, pg_ctl) not found in /usr/lib/postgresql/*/bin, "
            "$PG_BIN or $PATH: install postgresql (e.g. apt-get install postgresql-15)"
        )
        if os.environ.get("CI"):
            pytest.fail(msg + " -- CI is set, so PostgreSQL tests must run", pytrace=False)
        pytest.skip(msg)
    return path


def free_port() -> int:
    """A loopback TCP port nobody listens on right now (the server may still lose a race: we retry)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class PostgresServer:
    """A running throwaway server: `url(db)` for SQLAlchemy, `create_database` for a fresh database."""

    bin_dir: Path
    root: Path
    port: int
    host: str = "127.0.0.1"
    user: str = "postgres"

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    def url(self, dbname: str = "postgres") -> str:
        return f"postgresql+psycopg://{self.user}@{self.host}:{self.port}/{dbname}"

    def create_database(self, name: str) -> str:
        """CREATE DATABASE `name` (a plain identifier) and return its SQLAlchemy URL."""
        if not name.replace("_", "").isalnum() or not name[0].isalpha():
            raise ValueError(f"database name must be an identifier, got {name!r}")
        import psycopg

        with psycopg.connect(
            host=self.host, port=self.port, user=self.user, dbname="postgres", autocommit=True
        ) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def drop_database(self, name: str) -> None:
        import psycopg

        with psycopg.connect(
            host=self.host, port=self.port, user=self.user, dbname="postgres", autocommit=True
        ) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _as_pg_user(cmd: Sequence[str]) -> list[str]:
    """Run as the `postgres` system user when we are root (PostgreSQL refuses to run as root)."""
    if os.geteuid() != 0:
        return list(cmd)
    runuser = shutil.which("runuser")
    if runuser:
        return [runuser, "-u", RUN_AS, "--", *cmd]
    return ["su", RUN_AS, "-s", "/bin/sh", "-c", " ".join(_quote(c) for c in cmd)]


def _quote(s: str) -> str:
    import shlex

    return shlex.quote(s)


def _run(cmd: Sequence[str], timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_as_pg_user(cmd), capture_output=True, text=True, timeout=timeout, check=False)


def _chown_tree(path: Path) -> None:
    if os.geteuid() != 0:
        return
    pw = pwd.getpwnam(RUN_AS)
    for p in [path, *path.rglob("*")]:
        os.chown(p, pw.pw_uid, pw.pw_gid)


def _postmaster_pid(data_dir: Path) -> int | None:
    try:
        return int((data_dir / "postmaster.pid").read_text().splitlines()[0])
    except (OSError, ValueError, IndexError):
        return None


def _alive(pid: int, data_dir: Path) -> bool:
    """Is `pid` still *our* postmaster? (A zombie, or a reused pid running something else, is not.)"""
    proc = Path(f"/proc/{pid}")
    if not proc.exists():
        try:
            os.kill(pid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True
    try:
        state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except (OSError, IndexError):
        return False
    return state != "Z" and str(data_dir) in cmdline


def _stop(server: PostgresServer) -> None:
    """pg_ctl stop -m fast; if the postmaster is still there, SIGTERM then SIGKILL *its* pid."""
    pid = _postmaster_pid(server.data_dir)
    pg_ctl = str(server.bin_dir / "pg_ctl")
    with contextlib.suppress(subprocess.TimeoutExpired):
        _run([pg_ctl, "-D", str(server.data_dir), "-m", "fast", "-w", "-t", "30", "stop"], timeout=40)
    if pid is None:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not _alive(pid, server.data_dir):
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _alive(pid, server.data_dir):
            time.sleep(0.05)


def _temp_base() -> str | None:
    """Where to make the cluster's folder: $TMPDIR, unless the `postgres` user could not reach it."""
    if os.geteuid() != 0:
        return None
    base = Path(tempfile.gettempdir()).resolve()
    reachable = all(p.stat().st_mode & 0o001 for p in [base, *base.parents])
    return None if reachable else "/tmp"


@contextlib.contextmanager
def postgres_server(
    bin_dir: Path | None = None, *, fast_unsafe: bool = True, settings: Sequence[str] = ()
) -> Iterator[PostgresServer]:
    """Start a fresh PostgreSQL cluster on a free loopback port; stop and delete it on exit.

    `fast_unsafe` turns fsync off (fine for a cluster thrown away after the tests; a crash of the
    machine would corrupt it). `settings` are extra `-c name=value` server options.
    """
    bin_dir = bin_dir or find_pg_bin()
    if bin_dir is None:
        raise RuntimeError("PostgreSQL server binaries (initdb, pg_ctl) not found")
    root = Path(tempfile.mkdtemp(prefix="autosched-pg-", dir=_temp_base()))
    os.chmod(root, 0o700)
    sock_dir = root / "sock"
    sock_dir.mkdir()
    _chown_tree(root)
    server: PostgresServer | None = None
    try:
        r = _run(
            [
                str(bin_dir / "initdb"),
                "-D",
                str(root / "data"),
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--no-instructions",
            ]
        )
        if r.returncode != 0:
            raise RuntimeError(f"initdb failed ({r.returncode}): {r.stderr.strip() or r.stdout.strip()}")
        opts = ["-c fsync=off -c synchronous_commit=off -c full_page_writes=off"] if fast_unsafe else []
        opts += [f"-c {s}" for s in settings]
        last_err = ""
        for _attempt in range(5):
            port = free_port()
            candidate = PostgresServer(bin_dir=bin_dir, root=root, port=port)
            o = " ".join([f"-p {port} -k {sock_dir} -h 127.0.0.1", *opts])
            r = _run(
                [
                    str(bin_dir / "pg_ctl"),
                    "-D",
                    str(root / "data"),
                    "-l",
                    str(root / "server.log"),
                    "-o",
                    o,
                    "-w",
                    "-t",
                    "60",
                    "start",
                ],
                timeout=90,
            )
            if r.returncode == 0:
                server = candidate
                break
            last_err = r.stderr.strip() + "\n" + _tail(root / "server.log")
            _stop(candidate)  # a half-started postmaster must not linger
        if server is None:
            raise RuntimeError(f"pg_ctl start failed 5 times:\n{last_err}")
        atexit.register(_stop, server)  # an interrupted session still stops the server
        yield server
    finally:
        if server is not None:
            _stop(server)
            atexit.unregister(_stop)
        shutil.rmtree(root, ignore_errors=True)


def _tail(path: Path, n: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


@contextlib.contextmanager
def throwaway_postgres(dbname: str = "autosched", **kwargs: object) -> Iterator[str]:
    """Start a server, create `dbname`, yield its SQLAlchemy URL; everything is gone afterwards."""
    with postgres_server(**kwargs) as pg:  # type: ignore[arg-type]
        yield pg.create_database(dbname)


@pytest.fixture(scope="session")
def postgres_server_session() -> Iterator[PostgresServer]:
    """One throwaway server for the whole test session (skipped without binaries, unless CI)."""
    bin_dir = require_pg_bin()
    with postgres_server(bin_dir) as pg:
        yield pg
