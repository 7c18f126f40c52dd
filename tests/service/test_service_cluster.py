"""End to end: a real uvicorn server (`autosched serve`), a real PostgreSQL, a real two-node Ray
cluster on loopback. Jobs go in over HTTP (and the CLI), run as Ray tasks measuring on both
nodes, and come out as best schedules by key; the API is killed mid-job and resumes; the worker
node is killed mid-job and no record is lost; a running job is cancelled.

Everything started here is stopped by pid (Ray nodes by their session, the API by its session,
PostgreSQL by pg_ctl / its postmaster pid).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import httpx
import pytest

from autosched import te
from autosched.compile.types import ErrorCode
from autosched.service.server import session_pids
from autosched.workload import Workload
from tests.support.loopback_cluster import LoopbackCluster
from tests.support.service_helpers import AUTH, TOKEN, ApiServer, finished, job_body, wait_job

pytestmark = [pytest.mark.ray, pytest.mark.postgres, pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def pg_url(postgres_server_session):
    name = f"svc_{uuid.uuid4().hex[:12]}"
    url = postgres_server_session.create_database(name)
    yield url
    postgres_server_session.drop_database(name)


@pytest.fixture(scope="module")
def cluster():
    c = LoopbackCluster()
    try:
        c.start_head("node_a", num_cpus=1)
        c.start_worker("node_b", num_cpus=1)
        yield c
    finally:
        c.stop()
        assert c.leftover_pids() == []


@pytest.fixture(scope="module")
def api(pg_url, cluster, tmp_path_factory):
    server = ApiServer(pg_url, tmp_path_factory.mktemp("api"), ray_address=cluster.address, max_running_jobs=2)
    pids: list[int] = []
    try:
        server.start()
        pids.append(server.proc.pid)
        yield server
    finally:
        if server.proc is not None:
            pids.append(server.proc.pid)
        server.stop()
        assert all(session_pids(p) == [] for p in pids)


def _records(c: httpx.Client, key: str) -> list[dict]:
    lines = c.get("/v1/records/export", params={"workload_key": key}).text.splitlines()
    return [json.loads(line) for line in lines[1:]]


def _cli(api: ApiServer, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "autosched.cli.main", *args, "--server", api.url,
                           "--token", TOKEN], capture_output=True, text=True, timeout=60, check=False)


def test_three_jobs_then_best_schedules_by_key(api: ApiServer, tmp_path: Path) -> None:
    a = te.placeholder((16, 32), "A")
    b = te.placeholder((16, 32), "B")
    out = te.compute((16, 32), lambda i, j: a[i, j] * 2.0 + b[i, j], "C")
    dag_key = Workload.from_tensors([a, b, out], "axpy").key
    dag_file = tmp_path / "axpy.json"
    dag_file.write_text(json.dumps({"dag": Workload.from_tensors([a, b, out], "axpy").dag.to_dict(),
                                    "args_order": ["A", "B", "C"], "name": "axpy"}))
    with api.client() as c:
        jobs = [c.post("/v1/jobs", json=job_body("matmul", [32, 32, 32])).json(),
                c.post("/v1/jobs", json=job_body("softmax", [16, 32])).json()]
        r = _cli(api, "submit", "--dag", str(dag_file), "--trials", "8", "--searcher", "random",
                 "--cost-model", "none", "--batch-size", "4")
        assert r.returncode == 0, r.stderr
        jobs.append(c.get(f"/v1/jobs/{r.stdout.split()[2]}").json())
        assert jobs[2]["workload_key"] == dag_key
        done = [wait_job(c, j["id"], finished, timeout=240, what="an end") for j in jobs]
        assert [j["state"] for j in done] == ["done"] * 3, [(j["state"], j["error"]) for j in done]
        nodes = set()
        for j in done:
            # a small space (the elementwise axpy) may be exhausted before 8 trials
            assert 1 <= j["trials_done"] <= 8 and j["records"] >= 1 and j["best_gflops"] > 0
            s = c.get(f"/v1/schedules/{j['workload_key']}", params={"target": "cpu"}).json()
            assert s["workload_key"] == j["workload_key"] and s["source"]["entry"] in s["source"]["code"]
            assert s["median_ms"] == pytest.approx(j["best_median_ms"])
            nodes |= {rec["worker_id"].split("node=")[1].split()[0] for rec in _records(c, j["workload_key"])
                      if "node=" in rec["worker_id"]}
        assert done[0]["trials_done"] == 8
        assert len(nodes) == 2, f"measurements should land on both Ray nodes, saw {nodes}"
        r = _cli(api, "best", jobs[0]["workload_key"], "--source")
        assert r.returncode == 0 and "matmul" in r.stdout and jobs[0]["workload_key"][:0] in r.stdout, r.stderr
        r = _cli(api, "status")
        assert r.returncode == 0 and all(j["id"] in r.stdout for j in jobs)
        r = _cli(api, "best", "ab" * 32)
        assert r.returncode == 2 and "no tuned schedule" in r.stderr
        metrics = c.get("/metrics").text
        assert 'autosched_jobs{state="done"} 3' in metrics


def test_api_restart_mid_job_resumes_from_records(api: ApiServer) -> None:
    with api.client() as c:
        # verify=0: every schedule is measured once, so a second measurement can only be a resume bug
        job = c.post("/v1/jobs", json=job_body("matmul", [40, 40, 40], trials=20, verify=0)).json()
        before = wait_job(c, job["id"], lambda j: j["records"] >= 4, timeout=120, what=">= 4 records")
    assert before["state"] == "running"
    api.kill()  # SIGKILL: no clean-up, the row stays "running", the Ray driver (and its job task) dies
    api.start()
    with api.client() as c:
        end = wait_job(c, job["id"], finished, timeout=240, what="an end")
        assert end["state"] == "done", (end, api.log_tail())
        assert end["trials_done"] == 20 and end["records"] > before["records"]
        recs = [r for r in _records(c, job["workload_key"]) if r["error_code"] == 0]
        dup = [h for h, n in Counter(r["steps_hash"] for r in recs).items() if n > 1]
        assert dup == [], "a resumed job re-measured schedules it had already measured"


def test_cancel_a_running_job(api: ApiServer) -> None:
    with api.client() as c:
        job = c.post("/v1/jobs", json=job_body("matmul", [64, 64, 64], trials=400)).json()
        wait_job(c, job["id"], lambda j: j["state"] == "running" and j["records"] >= 2, timeout=120)
        with api.client(token=None) as anon:
            assert anon.delete(f"/v1/jobs/{job['id']}").status_code == 401
        r = c.delete(f"/v1/jobs/{job['id']}")
        assert r.status_code == 200 and r.json()["state"] == "cancelled"
        time.sleep(6)  # the job's should_stop sees the row between batches
        n = c.get(f"/v1/jobs/{job['id']}").json()["records"]
        time.sleep(4)
        final = c.get(f"/v1/jobs/{job['id']}").json()
        assert final["state"] == "cancelled" and final["records"] == n < 400


def test_worker_node_killed_mid_job_loses_no_record(api: ApiServer, cluster: LoopbackCluster) -> None:
    with api.client() as c:
        job = c.post("/v1/jobs", json=job_body("matmul", [48, 48, 48], trials=20, verify=0)).json()
        wait_job(c, job["id"], lambda j: j["records"] >= 4, timeout=120, what=">= 4 records")
        assert cluster.kill_node("node_b")
        end = wait_job(c, job["id"], finished, timeout=240, what="an end")
        assert end["state"] == "done", (end, api.log_tail())
        recs = _records(c, job["workload_key"])
        assert end["trials_done"] == 20
        assert not [r for r in recs if r["error_code"] == ErrorCode.WORKER_CRASHED], "a run was lost with the node"
        ok = [r for r in recs if r["error_code"] == 0]
        assert len({r["steps_hash"] for r in ok}) == len(ok) and len(recs) == end["records"] >= 1
        assert c.get(f"/v1/schedules/{job['workload_key']}").status_code == 200
    with api.client(token=None) as anon:
        assert anon.post("/v1/jobs", json=job_body("matmul", [8, 8, 8])).status_code == 401


def test_auth_header_is_what_grants_writes(api: ApiServer) -> None:
    with api.client(token=None) as anon:
        r = anon.post("/v1/records/import", content=b'{"format": "autosched-records", "version": 1}\n')
        assert r.status_code == 401
    with httpx.Client(base_url=api.url, headers=AUTH) as c:
        r = c.post("/v1/records/import", content=b'{"format": "autosched-records", "version": 1}\n')
        assert r.status_code == 200 and r.json()["imported"] == 0
