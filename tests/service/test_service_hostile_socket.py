"""The service over a real socket (uvicorn in a thread of the test): a client that stalls mid-body
gets 408 after the body timeout, and a large upload without a token gets 401 before it is sent."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn

from autosched.service.app import create_app
from autosched.service.settings import ServiceSettings
from tests.support.service_helpers import AUTH, TOKEN, free_port
from tuning_db import sqlite_url

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    tmp: Path = tmp_path_factory.mktemp("sock")
    settings = ServiceSettings(db_url=sqlite_url(tmp / "s.db"), write_tokens={TOKEN: "admin"}, max_running_jobs=0,
                               body_timeout_s=1.0, max_import_bytes=64 << 20)
    port = free_port()
    srv = uvicorn.Server(uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, name="uvicorn-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not srv.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield port
    finally:
        srv.should_exit = True
        thread.join(timeout=30)


def _request(port: int, head: str, body: bytes = b"", wait_s: float = 10.0) -> tuple[int, str, float]:
    """Send `head` and `body` (maybe less than Content-Length says), then read the answer:
    (status, text, seconds until the first response byte)."""
    with socket.create_connection(("127.0.0.1", port), timeout=wait_s) as s:
        s.sendall(head.encode() + body)
        t0 = time.monotonic()
        data = b""
        while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) == 0:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        elapsed = time.monotonic() - t0
    status = int(data.split(b" ", 2)[1]) if data else 0
    return status, data.decode(errors="replace"), elapsed


def _head(method: str, path: str, length: int, auth: bool, ctype: str = "application/json") -> str:
    lines = [f"{method} {path} HTTP/1.1", "Host: test", f"Content-Type: {ctype}", f"Content-Length: {length}"]
    if auth:
        lines.append(f"Authorization: {AUTH['Authorization']}")
    return "\r\n".join(lines) + "\r\n\r\n"


@pytest.mark.parametrize("path,ctype", [("/v1/jobs", "application/json"),
                                        ("/v1/records/import", "application/x-ndjson")])
def test_a_stalled_upload_gets_408_after_the_body_timeout(server: int, path: str, ctype: str) -> None:
    status, text, elapsed = _request(server, _head("POST", path, 1000, True, ctype), b'{"workload": ')
    assert status == 408, text
    assert "body timeout" in text and "AUTOSCHED_BODY_TIMEOUT_S" in text
    assert 0.5 <= elapsed < 8


@pytest.mark.parametrize("path", ["/v1/records/import", "/v1/jobs"])
def test_a_large_upload_without_a_token_is_refused_before_it_is_sent(server: int, path: str) -> None:
    status, text, elapsed = _request(server, _head("POST", path, 50 << 20, False), b"")
    assert status == 401 and "bearer token" in text, text
    assert elapsed < 0.9  # answered at once: not after the body timeout, and no body was waited for


def test_a_complete_body_is_not_cut_by_the_timeout(server: int) -> None:
    body = b'{"workload": {"op": "matmul", "args": [8, 8, 8]}, "trials": 4}'
    status, text, _ = _request(server, _head("POST", "/v1/jobs", len(body), True), body)
    assert status == 201, text
