"""The HTTP service under hostile bodies and parameters (issue 27), in process: NUL characters
(SQLite and PostgreSQL), JSON bodies over the parser's limits, streamed imports with planted lines,
tokens checked before bodies, and the API text naming only real routes. Each test plants the
problem and shows a 4xx that names it."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from autosched.service.app import create_app
from autosched.service.guards import MAX_JSON_DEPTH
from autosched.service.job_runner import safe_error
from autosched.workload import Workload
from tests.support.service_helpers import (
    AUTH,
    EXPORT_HEADER,
    READ_TOKEN,
    export_line,
    hostile_settings,
    sample_steps,
    seed_records,
    set_gpu,
)
from tuning_db import sqlite_url

W = Workload.create("matmul", 16, 16, 16)
JOB = {"workload": {"op": "matmul", "args": [16, 16, 16]}, "trials": 8, "searcher": "random", "cost_model": "none"}
ROOT_DIR = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """The offered targets must not depend on whether the test machine has a GPU."""
    set_gpu(monkeypatch, "")


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(create_app(hostile_settings(sqlite_url(tmp_path / "b.db")))) as c:
        yield c


def host():
    from autosched.target.key import Target

    return Target.parse("cpu")


# ---------------------------------------------------------------- 9: NUL characters
@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def any_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield sqlite_url(tmp_path / "nul.db")
        return
    pg = request.getfixturevalue("postgres_server_session")
    name = f"svc_nul_{uuid.uuid4().hex[:10]}"
    url = pg.create_database(name)
    try:
        yield url
    finally:
        pg.drop_database(name)


NUL_JOBS = [
    ({**JOB, "target": "cpu\x00"}, "target"),
    ({**JOB, "workload": {"op": "matmul", "args": [16, 16, "float32\x00"]}}, "workload.args[2]"),
    ({**JOB, "workload": {"op": "matmul", "args": [16, 16, 16], "kwargs": {"dtype": "float\x0032"}}},
     "workload.kwargs.dtype"),
    ({**JOB, "workload": {"dag": {"format": "autosched-dag", "version": 1, "ops": [
        {"name": "A\x00", "kind": "placeholder", "shape": [4], "dtype": "float32"}], "outputs": ["A\x00"]},
        "args_order": ["A"]}}, "workload.dag.ops[0].name"),
]


def test_a_nul_character_in_any_text_field_is_a_422_naming_the_field(any_db: str,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    s = hostile_settings(any_db)
    seed_records(s.db_url, [(sample_steps(W, 7), (1e-5,), 0, "")])
    caplog.set_level("DEBUG")
    with TestClient(create_app(s), raise_server_exceptions=False) as c:
        for body, field in NUL_JOBS:
            r = c.post("/v1/jobs", json=body, headers=AUTH)
            assert r.status_code == 422 and field in r.json()["detail"] and "NUL" in r.json()["detail"], (field, r.text)
        for path, params in [(f"/v1/schedules/{W.key}", {"target": "cpu|AMD\x00|4"}),
                             (f"/v1/schedules/{W.key}/standings", {"target": "cpu\x00"}),
                             ("/v1/workloads", {"target": "cpu|x\x00|1"}),
                             ("/v1/records/export", {"target": "cpu|x\x00|1"})]:
            r = c.get(path, params=params)
            assert r.status_code == 422 and "'target'" in r.json()["detail"], (path, r.text)
        r = c.post(f"/v1/schedules/{W.key}/verify", params={"target": "cpu\x00"}, headers=AUTH)
        assert r.status_code == 422 and "'target'" in r.json()["detail"], r.text
        w = Workload.create("matmul", 8, 8, 8)
        good = export_line(w, host(), sample_steps(w, 8), [2e-6])
        lines = [good, dict(good, host="else\x00where", costs=[3e-6]),
                 dict(good, error_msg="bad\x00", costs=[4e-6])]
        text = EXPORT_HEADER + "\n" + "\n".join(json.dumps(x) for x in lines) + "\n"
        r = c.post("/v1/records/import", content=text, headers=AUTH)
        assert r.status_code == 200, r.text
        rep = r.json()
        assert rep["imported"] == 1 and rep["n_refused"] == 2, rep
        assert [x["line"] for x in rep["refused"]] == [3, 4]
        assert "host" in rep["refused"][0]["reason"] and "error_msg" in rep["refused"][1]["reason"], rep
        r = c.post("/v1/records/import", content='{"format": "autosched-records\\u0000", "version": 1}\n',
                   headers=AUTH)
        assert r.status_code == 422, r.text
    assert "[parameters:" not in caplog.text and "else\x00where" not in caplog.text


def test_database_errors_lose_their_sql_and_parameters_before_they_are_stored() -> None:
    class StatementError(Exception):
        pass

    exc = StatementError("(psycopg.DataError) PostgreSQL text fields cannot contain NUL (0x00) bytes\n"
                         "[SQL: INSERT INTO jobs (owner) VALUES (%(owner)s)]\n[parameters: {'owner': 'secret'}]\n"
                         "(Background on this error at: https://sqlalche.me/e/20/9h9h)")
    text = safe_error(exc)
    assert text.startswith("StatementError: (psycopg.DataError) PostgreSQL text fields cannot contain NUL")
    assert "secret" not in text and "INSERT" not in text and "Background" not in text


# ---------------------------------------------------------------- 10: bodies that break a parser limit
def _post_raw(c: TestClient, content: bytes | str, ctype: str | None = "application/json"):
    headers = {**AUTH, **({"content-type": ctype} if ctype else {})}
    return c.post("/v1/jobs", content=content, headers=headers)


@pytest.mark.parametrize("ctype", ["application/json", None])
def test_bodies_that_break_a_parser_limit_get_an_error_naming_the_limit(client: TestClient, ctype) -> None:
    cases = [
        ('{"workload": {"op": "matmul", "args": [' + "[" * 10_000 + "1" + "]" * 10_000 + "]}}",
         "JSON nesting depth limit"),
        ('{"workload": {"op": "matmul", "args": [' + "[" * 150 + "1" + "]" * 150 + "]}}",
         f"the JSON nesting depth limit is {MAX_JSON_DEPTH}"),
        (b'{"workload": {"op": "matmul\xff\xfe", "args": [16, 16, 16]}}', "UTF-8"),
        ('{"workload": {"op": "matmul", "args": [' + "9" * 5000 + ", 16, 16]}}", "integer digit limit"),
        ('{"workload": {"op": "matmul", "args": [NaN, 16, 16]}}', "NaN"),
        ('{"workload": {"op": "matmul", "args": [16, 16, 16]}, "seed": -Infinity}', "-Infinity"),
    ]
    for body, needle in cases:
        r = _post_raw(client, body, ctype)
        assert r.status_code == 422, (needle, r.status_code, r.text[:300])
        detail = r.json()["detail"]
        assert needle in detail and "error parsing the body" not in detail, (needle, detail)
    r = _post_raw(client, '{"workload": ', ctype)  # a plain syntax error keeps pydantic's located 422
    assert r.status_code == 422 and r.json()["detail"][0]["type"] == "json_invalid"


def test_a_deep_query_or_a_huge_float_is_no_server_error(client: TestClient) -> None:
    r = _post_raw(client, '{"workload": {"op": "matmul", "args": [1' + "0" * 5000 + '.5, 16, 16]}}')
    assert r.status_code == 422, r.text  # a float has no digit limit: the op's own check refuses it
    r = client.get("/v1/jobs", params={"limit": "9" * 5000})
    assert r.status_code == 422


# ---------------------------------------------------------------- 3: streamed imports
def _import_text(n: int) -> tuple[str, Workload]:
    w = Workload.create("matmul", 8, 8, 8)
    lines = [export_line(w, host(), sample_steps(w, 10 + i), [1e-6 * (i + 1)]) for i in range(n)]
    return EXPORT_HEADER + "\n" + "\n".join(json.dumps(x) for x in lines) + "\n", w


def test_an_import_streams_in_chunks_and_reports_each_refused_line(client: TestClient,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from starlette.requests import Request

    async def no_whole_body(self) -> bytes:
        raise AssertionError("the import read the whole body into memory")

    monkeypatch.setattr(Request, "body", no_whole_body)
    text, w = _import_text(3)
    planted = export_line(w, host(), [{"kind": "rm -rf /", "v": 1}], [1e-9])
    negative = export_line(w, host(), sample_steps(w, 99), [-1.0])
    text += json.dumps(planted) + "\n" + json.dumps(negative) + "\n"
    data = text.encode()

    def chunks() -> Iterator[bytes]:  # no Content-Length: chunked transfer
        for i in range(0, len(data), 100):
            yield data[i:i + 100]

    r = client.post("/v1/records/import", content=chunks(), headers=AUTH)
    assert r.status_code == 200, r.text
    rep = r.json()
    assert rep["imported"] == 3 and rep["duplicates"] == 0 and rep["n_refused"] == 2
    assert [x["line"] for x in rep["refused"]] == [5, 6], rep
    assert "steps" in rep["refused"][0]["reason"] and "cost" in rep["refused"][1]["reason"], rep


def test_an_import_refuses_bad_bodies_with_422_or_413(tmp_path: Path) -> None:
    s = hostile_settings(sqlite_url(tmp_path / "i.db"), max_import_bytes=4096)
    text, _ = _import_text(1)
    with TestClient(create_app(s)) as c:
        post = lambda body: c.post("/v1/records/import", content=body, headers=AUTH)  # noqa: E731
        r = post(b"")
        assert r.status_code == 422 and "empty" in r.json()["detail"]
        r = post(b"  \n\n ")
        assert r.status_code == 422 and "empty" in r.json()["detail"]
        r = post(text.encode()[:200] + b"\xff" + text.encode()[200:])
        assert r.status_code == 422 and "UTF-8" in r.json()["detail"] and "offset 200" in r.json()["detail"]
        r = post(text.encode() + b"\xe2\x82")  # ends inside a character
        assert r.status_code == 422 and "UTF-8" in r.json()["detail"]
        r = post(text.replace("autosched-records", "someone-elses-records").encode())
        assert r.status_code == 422, r.text

        def big() -> Iterator[bytes]:
            for _ in range(10):
                yield b" " * 1024

        r = c.post("/v1/records/import", content=big(), headers=AUTH)
        assert r.status_code == 413 and "4096" in r.json()["detail"]
        with TestClient(create_app(hostile_settings(sqlite_url(tmp_path / "i2.db")))) as c2:
            r = c2.post("/v1/records/import", content=text, headers=AUTH)
            assert r.status_code == 200 and r.json()["imported"] == 1


# ---------------------------------------------------------------- 10: the token before the body
def _asgi_call(app, method: str, path: str, headers: list[tuple[bytes, bytes]]) -> tuple[int, dict, bool]:
    """Call the ASGI app directly; (status, body, whether it asked for the request body)."""
    asked = {"receive": False}
    sent: list[dict] = []

    async def receive() -> dict:
        asked["receive"] = True
        await asyncio.sleep(3600)  # the 50 MiB never come
        return {"type": "http.disconnect"}

    async def send(msg: dict) -> None:
        sent.append(msg)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": [(b"host", b"test"), (b"content-length", str(50 << 20).encode()), *headers],
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}
    asyncio.run(asyncio.wait_for(app(scope, receive, send), 10))
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], json.loads(body), asked["receive"]


@pytest.mark.parametrize("method,path", [("POST", "/v1/records/import"), ("POST", "/v1/jobs"),
                                         ("POST", f"/v1/schedules/{W.key}/verify"), ("DELETE", "/v1/jobs/abc")])
def test_writes_check_the_token_before_reading_the_body(tmp_path: Path, method: str, path: str) -> None:
    app = create_app(hostile_settings(sqlite_url(tmp_path / "t.db"), max_import_bytes=64 << 20))
    status, body, read = _asgi_call(app, method, path, [])
    assert status == 401 and "bearer token" in body["detail"] and not read
    status, body, read = _asgi_call(app, method, path, [(b"authorization", b"Bearer not-a-token-at-all")])
    assert status == 401 and "unknown bearer token" in body["detail"] and not read
    status, body, read = _asgi_call(app, method, path, [(b"authorization", f"Bearer {READ_TOKEN}".encode())])
    assert status == 403 and "read but not write" in body["detail"] and not read


# ---------------------------------------------------------------- 10: the API text names real routes
def _templates(app) -> list[re.Pattern]:
    return [re.compile("^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(r.path)) + "$")
            for r in app.routes if getattr(r, "path", None)]


def _mentioned(text: str) -> set[str]:
    return {m.rstrip(".,)`'\"") for m in re.findall(r"(/v1/[A-Za-z0-9_{}/.-]*|/healthz|/metrics)", text)}


def test_every_path_the_openapi_text_and_the_service_docs_mention_exists(client: TestClient) -> None:
    routes = _templates(client.app)
    spec = json.dumps(client.get("/openapi.json").json())
    mentioned = _mentioned(spec.replace("\\n", " "))
    docs = (ROOT_DIR / "docs" / "service.md").read_text()
    mentioned |= {p for p in _mentioned(docs) if "..." not in p}
    missing = sorted(p for p in mentioned if not any(r.match(p.split("?")[0]) for r in routes))
    assert missing == [], f"the API text names paths the app does not have: {missing}"
    assert "/v1/workloads/ops" not in spec
