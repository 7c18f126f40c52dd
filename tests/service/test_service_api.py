"""The HTTP API in process (FastAPI's TestClient, SQLite, no job runs): validation, auth,
lookups, export/import, curves, metrics. The real-server, real-cluster paths are in
test_service_cluster.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from autosched import te
from autosched.service.app import create_app
from autosched.service.settings import ServiceSettings
from autosched.target.key import Target
from autosched.tuning.api import register
from autosched.workload import Workload
from tests.support.service_helpers import AUTH, READ_TOKEN, TOKEN
from tuning_db import TuningDB, sqlite_url
from tuning_db.types import RecordIn

MATMUL = {"workload": {"op": "matmul", "args": [16, 16, 16]}, "trials": 8, "searcher": "random", "cost_model": "none"}


def settings(tmp: Path, **kw) -> ServiceSettings:
    base = dict(db_url=sqlite_url(tmp / "api.db"), write_tokens={TOKEN: "admin"},
                read_tokens={READ_TOKEN: "viewer"}, max_running_jobs=0, max_trials=500,
                max_tensor_elements=1 << 20, max_body_bytes=64 * 1024)
    base.update(kw)
    return ServiceSettings(**base)


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(create_app(settings(tmp_path))) as c:
        yield c


def seed_record(db_url: str, op: str = "matmul", args: tuple = (16, 16, 16), median: float = 1e-4,
                job_id: str | None = None) -> tuple[str, str]:
    """A valid record with the default (empty) schedule: enough for lookups and source rendering."""
    db = TuningDB(db_url)
    w, t = Workload.create(op, *args), Target.parse("cpu")
    register(db, w, t)
    db.commit_records([RecordIn(w.key, t.key, [], (median * 1.1, median, median * 0.9), job_id=job_id),
                       RecordIn(w.key, t.key, [], (), error_code=3, error_msg="boom", job_id=job_id)])
    db.close()
    return w.key, t.key


def test_writes_need_a_write_token(client: TestClient) -> None:
    assert client.post("/v1/jobs", json=MATMUL).status_code == 401
    r = client.post("/v1/jobs", json=MATMUL, headers={"Authorization": "Bearer not-a-real-token"})
    assert r.status_code == 401 and "unknown bearer token" in r.json()["detail"]
    r = client.post("/v1/jobs", json=MATMUL, headers={"Authorization": f"Bearer {READ_TOKEN}"})
    assert r.status_code == 403 and "read but not write" in r.json()["detail"]
    assert client.post("/v1/records/import", content=b"x").status_code == 401
    assert client.delete("/v1/jobs/abc").status_code == 401
    r = client.post("/v1/jobs", json=MATMUL, headers=AUTH)
    assert r.status_code == 201, r.text
    job = r.json()
    assert job["state"] == "queued" and job["owner"] == "admin" and job["trials"] == 8
    assert client.get("/v1/jobs").json()["jobs"][0]["id"] == job["id"]  # reads are open by default


def test_no_tokens_configured_means_no_writes(tmp_path: Path) -> None:
    with TestClient(create_app(settings(tmp_path, write_tokens={}))) as c:
        r = c.post("/v1/jobs", json=MATMUL, headers=AUTH)
        assert r.status_code == 403 and "no write tokens" in r.json()["detail"]


def test_read_auth_mode(tmp_path: Path) -> None:
    with TestClient(create_app(settings(tmp_path, read_auth=True))) as c:
        assert c.get("/v1/jobs").status_code == 401
        assert c.get("/v1/workloads").status_code == 401
        assert c.get("/metrics").status_code == 401
        assert c.get("/v1/jobs", headers={"Authorization": f"Bearer {READ_TOKEN}"}).status_code == 200
        assert c.get("/v1/jobs", headers=AUTH).status_code == 200  # a write token reads too
        assert c.get("/healthz").status_code == 200  # liveness holds no data


def _deep(n: int) -> str:
    return '{"workload": {"op": "matmul", "args": [' + "[" * n + "1" + "]" * n + "]}}"


BAD = [
    ({"workload": {"op": "nope"}}, "unknown op 'nope'"),
    ({"workload": {"op": "matmul", "args": [16, 16]}}, "missing a required argument"),
    ({"workload": {"op": "matmul", "args": [4096, 4096, 4096]}}, "this server accepts at most"),
    ({"workload": {"op": "matmul", "args": ["a", 2, 3]}}, "matmul"),
    ({"workload": {"op": "matmul", "args": [-4, 2, 3]}}, "matmul"),
    ({"workload": {"op": "matmul", "args": [16, 16, 16]}, "target": "tpu"}, "target 'tpu' is not offered"),
    ({"workload": {"op": "matmul", "args": [16, 16, 16]}, "trials": 501}, "over this server's limit"),
    ({"workload": {"op": "matmul", "args": [16, 16, 16]}, "searcher": "magic"}, "searcher"),
    ({"workload": {"op": "matmul", "args": [16, 16, 16]}, "code": "import os"}, "Extra inputs"),
    ({"workload": {"op": "matmul", "args": [16, 16, 16]}, "transfer": "maybe"}, "transfer"),
    ({"workload": {"op": "os.system", "args": []}}, "op"),
    ({"workload": {"dag": {"format": "nope"}, "args_order": ["A"]}}, "dag.ops"),
    ({"workload": {"dag": {"format": "nope", "ops": [{"name": "A", "kind": "placeholder", "shape": [2],
                                                      "dtype": "float32"}], "outputs": ["A"]},
                   "args_order": ["A"]}}, "not an autosched DAG"),
    ({"workload": {"dag": {"format": "autosched-dag", "version": 1, "ops": [
        {"name": "A", "kind": "placeholder", "shape": [1 << 21], "dtype": "float32"}], "outputs": ["A"]},
        "args_order": ["A"]}}, "points"),
    ({"workload": {"op": "transpose", "args": [[1] * 17]}}, "at most 16"),
    ({"workload": {"dag": {"format": "autosched-dag", "version": 1, "ops": [
        {"name": "A", "kind": "placeholder", "shape": [1] * 17, "dtype": "float32"}], "outputs": ["A"]},
        "args_order": ["A"]}}, "dimensions"),
    ("not json at all", "JSON"),
]


@pytest.mark.parametrize("body,needle", BAD, ids=[str(i) for i in range(len(BAD))])
def test_malformed_job_requests_are_422_and_say_why(client: TestClient, body, needle: str) -> None:
    kw = {"content": body, "headers": {**AUTH, "content-type": "application/json"}} if isinstance(body, str) \
        else {"json": body, "headers": AUTH}
    r = client.post("/v1/jobs", **kw)
    assert r.status_code == 422, r.text
    assert needle.lower() in json.dumps(r.json()).lower(), r.text


def test_deeply_nested_and_oversized_bodies(client: TestClient) -> None:
    r = client.post("/v1/jobs", content=_deep(5000), headers={**AUTH, "content-type": "application/json"})
    assert 400 <= r.status_code < 500, r.text
    r = client.post("/v1/jobs", content=b"{" + b" " * (70 * 1024) + b"}",
                    headers={**AUTH, "content-type": "application/json"})
    assert r.status_code == 413 and "limit" in r.json()["detail"]

    def chunks():  # no Content-Length: the limit is enforced while the body streams in
        for _ in range(80):
            yield b" " * 1024

    r = client.post("/v1/jobs", content=chunks(), headers={**AUTH, "content-type": "application/json"})
    assert r.status_code == 413


def _dag_workload() -> tuple[dict, str]:
    a = te.placeholder((8, 16), "A")
    b = te.placeholder((8, 16), "B")
    c = te.compute((8, 16), lambda i, j: a[i, j] * 2.0 + b[i, j], "C")
    w = Workload.from_tensors([a, b, c], "axpy")
    return {"dag": w.dag.to_dict(), "args_order": ["A", "B", "C"], "name": "axpy"}, w.key


def test_dag_workload_is_accepted_and_keyed_like_the_library(client: TestClient) -> None:
    wl, key = _dag_workload()
    r = client.post("/v1/jobs", json={"workload": wl, "trials": 4}, headers=AUTH)
    assert r.status_code == 201, r.text
    assert r.json()["workload_key"] == key and r.json()["workload_name"] == "axpy"
    bad = dict(wl, args_order=["A", "Z", "C"])
    r = client.post("/v1/jobs", json={"workload": bad}, headers=AUTH)
    assert r.status_code == 422 and "'Z'" in r.json()["detail"]


def test_best_schedule_lookup_with_source_and_plain_404(tmp_path: Path) -> None:
    s = settings(tmp_path)
    key, tk = seed_record(s.db_url)
    with TestClient(create_app(s)) as c:
        r = c.get(f"/v1/schedules/{key}", params={"target": "cpu"})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["target"] == tk and body["workload_name"] == "matmul" and body["steps"] == []
        assert body["median_ms"] == pytest.approx(0.1) and body["gflops"] > 0
        assert body["source"]["language"] == "c" and body["source"]["entry"] in body["source"]["code"]
        assert c.get(f"/v1/schedules/{key}", params={"target": tk, "source": "false"}).json()["source"] is None
        missing = "ab" * 32
        r = c.get(f"/v1/schedules/{missing}")
        assert r.status_code == 404 and "no tuned schedule for workload " + missing in r.json()["detail"]
        assert c.get("/v1/schedules/not-a-key").status_code == 422
        assert c.get(f"/v1/schedules/{key}", params={"target": "cpu|x"}).status_code == 422
        wl = c.get("/v1/workloads").json()
        assert "matmul" in wl["ops"]
        [w] = wl["workloads"]
        assert w["key"] == key and w["args"] == [16, 16, 16, "float32"] and w["best"][0]["target"] == tk


def test_export_then_import_into_another_server(tmp_path: Path) -> None:
    s1 = settings(tmp_path / "a")
    (tmp_path / "a").mkdir()
    key, _ = seed_record(s1.db_url)
    with TestClient(create_app(s1)) as c:
        text = c.get("/v1/records/export").text
        assert c.get("/v1/records/export", params={"workload_key": key}).text == text
    assert len(text.splitlines()) == 3  # header + 2 records
    (tmp_path / "b").mkdir()
    s2 = settings(tmp_path / "b", max_import_bytes=1 << 20)
    with TestClient(create_app(s2)) as c:
        r = c.post("/v1/records/import", content=text, headers={**AUTH, "content-type": "application/x-ndjson"})
        assert r.status_code == 200 and r.json() == {"imported": 2, "duplicates": 0, "n_refused": 0, "refused": []}
        again = c.post("/v1/records/import", content=text, headers=AUTH).json()
        assert again["imported"] == 0 and again["duplicates"] == 2
        r = c.post("/v1/records/import", content=text.replace('"costs"', '"kosts"'), headers=AUTH)
        assert r.status_code == 200 and r.json()["n_refused"] == 2, r.text  # each bad line refused, by number
        assert [x["line"] for x in r.json()["refused"]] == [2, 3] and "costs" in r.json()["refused"][0]["reason"]
        assert c.post("/v1/records/import", content=b"\xff\xfe", headers=AUTH).status_code == 422
        assert c.post("/v1/records/import", content=b"", headers=AUTH).status_code == 422
        assert c.get(f"/v1/schedules/{key}").status_code == 200


def test_job_detail_cancel_and_curve(tmp_path: Path) -> None:
    s = settings(tmp_path)
    with TestClient(create_app(s)) as c:
        job = c.post("/v1/jobs", json=MATMUL, headers=AUTH).json()
        seed_record(s.db_url, job_id=job["id"])
        detail = c.get(f"/v1/jobs/{job['id']}").json()
        assert detail["records"] == 2 and detail["state"] == "queued"
        curve = c.get(f"/v1/jobs/{job['id']}/curve").json()
        assert [p[0] for p in curve["points"]] == [1, 2] and curve["points"][0][1] > 0
        assert curve["points"][1][1] == curve["points"][0][1]  # a failed record keeps the best so far
        png = c.get(f"/v1/jobs/{job['id']}/curve", params={"format": "png"})
        assert png.headers["content-type"] == "image/png" and png.content[:8] == b"\x89PNG\r\n\x1a\n"
        r = c.delete(f"/v1/jobs/{job['id']}", headers=AUTH)
        assert r.status_code == 200 and r.json()["state"] == "cancelled"
        assert c.delete(f"/v1/jobs/{job['id']}", headers=AUTH).status_code == 409
        assert c.delete("/v1/jobs/no-such-job", headers=AUTH).status_code == 404
        assert c.get("/v1/jobs/no-such-job").status_code == 404
        assert c.get("/v1/jobs/bad id!").status_code in (404, 422)
        assert c.get("/v1/jobs", params={"state": "cancelled"}).json()["jobs"][0]["id"] == job["id"]
        assert c.get("/v1/jobs", params={"state": "nope"}).status_code == 422


def test_metrics_are_prometheus_text(client: TestClient) -> None:
    client.post("/v1/jobs", json=MATMUL, headers=AUTH)
    client.get("/v1/jobs/some-id")
    text = client.get("/metrics").text
    assert 'autosched_jobs{state="queued"} 1' in text
    assert "autosched_records 0" in text
    assert 'autosched_http_requests_total{method="POST",route="/v1/jobs",status="201"} 1' in text
    assert 'route="/v1/jobs/{job_id}",status="404"' in text  # templates, not raw paths
    assert "autosched_http_request_duration_seconds_bucket" in text
    for line in text.splitlines():
        assert line.startswith("#") or len(line.rsplit(" ", 1)) == 2


def test_openapi_and_dashboard_are_served(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    paths = set(spec["paths"])
    assert {"/v1/jobs", "/v1/jobs/{job_id}", "/v1/jobs/{job_id}/curve", "/v1/schedules/{workload_key}",
            "/v1/workloads", "/v1/records/export", "/v1/records/import", "/healthz", "/metrics"} <= paths
    assert "HTTPBearer" in json.dumps(spec["components"])
    page = client.get("/dashboard")
    assert page.status_code == 200 and "autosched" in page.text and "/v1/jobs" in page.text
    assert client.get("/").text == page.text
    assert client.get("/docs").status_code == 200
