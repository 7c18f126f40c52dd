"""The HTTP service under hostile input (issue 27), in process: a disqualified schedule, a verify
job, another owner's cancel, a target no worker offers. Each test plants the problem and shows it
refused or handled with a 4xx that names it. Hostile bodies and parameters are in
test_service_hostile_bodies.py, real sockets in test_service_hostile_socket.py, a Ray cluster's
offers in test_service_hostile_cluster.py."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from autosched.service.app import create_app
from autosched.service.settings import ServiceSettings, settings_from_env
from autosched.service.targets import TargetRefused, resolve_target
from autosched.target.key import Target
from autosched.tuning.api import register
from autosched.workload import Workload
from tests.support.service_helpers import (
    ALICE_TOKEN,
    AUTH,
    BOB_TOKEN,
    EXPORT_HEADER,
    READ_TOKEN,
    ROOT_TOKEN,
    export_line,
    hostile_settings,
    sample_steps,
    seed_records,
    set_gpu,
)
from tuning_db import TuningDB, sqlite_url
from tuning_db.canonical import steps_hash

ALICE, BOB, ROOT = ALICE_TOKEN, BOB_TOKEN, ROOT_TOKEN
W = Workload.create("matmul", 16, 16, 16)
JOB = {"workload": {"op": "matmul", "args": [16, 16, 16]}, "trials": 8, "searcher": "random", "cost_model": "none"}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(autouse=True)
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """The offered targets must not depend on whether the test machine has a GPU."""
    set_gpu(monkeypatch, "")


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(create_app(hostile_settings(sqlite_url(tmp_path / "h.db")))) as c:
        yield c


def host() -> Target:
    return Target.parse("cpu")


# ---------------------------------------------------------------- 1: never serve a disqualified schedule
def test_a_disqualified_schedule_is_never_served_and_the_standings_say_why(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    s = hostile_settings(sqlite_url(tmp_path / "d.db"))
    fast, slow = sample_steps(W, 1), sample_steps(W, 2)
    assert steps_hash(fast) != steps_hash(slow)
    seed_records(s.db_url, [(fast, (1e-7,), 0, ""), (fast, (), 6, "max abs error 3.5 (WRONG_ANSWER planted)")] +
         [(slow, (2e-5,), 0, "")] * 3)
    with TestClient(create_app(s)) as c:
        body = c.get(f"/v1/schedules/{W.key}").json()
        assert body["median_ms"] == pytest.approx(0.02), body  # the slow, honest schedule
        assert body["verified"] is True and body["n_valid"] == 3 and body["n_imported"] == 0 and body["origin"] == ""
        st = c.get(f"/v1/schedules/{W.key}/standings").json()
        by = {x["steps_hash"]: x for x in st["standings"]}
        assert st["served_steps_hash"] == steps_hash(slow) and st["target"] == host().key
        bad = by[steps_hash(fast)]
        assert bad["disqualified"] and bad["n_disqualifying"] == 1 and "WRONG_ANSWER" in bad["reason"]
        assert by[steps_hash(slow)]["reason"] == "served"
        assert st["standings"][-1]["steps_hash"] == steps_hash(fast)  # disqualified ones listed last

        # plant it one level lower: a ranking that forgets the rule must still not get it served
        db = TuningDB(s.db_url)
        planted = db.standing(W.key, host().key, steps_hash(fast)).record
        db.close()
        assert planted is not None and planted.median == pytest.approx(1e-7)
        monkeypatch.setattr(TuningDB, "best", lambda self, wk, tk: planted)
        again = c.get(f"/v1/schedules/{W.key}").json()
        assert again["record_id"] != planted.id and again["median_ms"] == pytest.approx(0.02)


def test_only_disqualified_candidates_answer_404_pointing_at_the_standings(tmp_path: Path) -> None:
    s = hostile_settings(sqlite_url(tmp_path / "o.db"))
    steps = sample_steps(W, 3)
    seed_records(s.db_url, [(steps, (1e-6,), 0, ""), (steps, (), 7, "worker crashed (planted)")])
    with TestClient(create_app(s)) as c:
        r = c.get(f"/v1/schedules/{W.key}")
        assert r.status_code == 404 and "/standings" in r.json()["detail"]
        [only] = c.get(f"/v1/schedules/{W.key}/standings").json()["standings"]
        assert only["disqualified"] and "WORKER_CRASHED" in only["reason"]
        assert c.get(f"/v1/schedules/{'ab' * 32}/standings").status_code == 404
        assert c.get(f"/v1/schedules/{W.key}/standings", params={"k": 0}).status_code == 422


def test_an_imported_schedule_is_served_as_unverified_with_its_origin(client: TestClient) -> None:
    w = Workload.create("matmul", 8, 8, 8)
    line = export_line(w, host(), sample_steps(w, 4), [3e-6])
    r = client.post("/v1/records/import", content=EXPORT_HEADER + "\n" + json.dumps(line) + "\n", headers=AUTH)
    assert r.status_code == 200 and r.json()["imported"] == 1, r.text
    body = client.get(f"/v1/schedules/{w.key}").json()
    assert body["verified"] is False and body["n_valid"] == 0 and body["n_imported"] == 1
    assert body["origin"].startswith("import") and "admin" in body["origin"]


# ---------------------------------------------------------------- 2: verify jobs
def test_verify_queues_a_job_that_is_listed_owned_and_cancellable(tmp_path: Path) -> None:
    s = hostile_settings(sqlite_url(tmp_path / "v.db"))
    seed_records(s.db_url, [(sample_steps(W, 5), (1e-5,), 0, "")])
    empty = Workload.create("matmul", 4, 4, 4)
    db = TuningDB(s.db_url)
    register(db, empty, host())
    db.close()
    url = f"/v1/schedules/{W.key}/verify"
    with TestClient(create_app(s)) as c:
        assert c.post(url).status_code == 401
        assert c.post(url, headers=bearer(READ_TOKEN)).status_code == 403
        r = c.post(url, params={"top": 3}, headers=bearer(ALICE))
        assert r.status_code == 201, r.text
        job = r.json()
        assert job["mode"] == "verify" and job["owner"] == "alice" and job["target"] == host().key
        assert job["trials"] == 3 and job["state"] == "queued"
        assert job["id"] in [j["id"] for j in c.get("/v1/jobs").json()["jobs"]]
        assert c.post(f"/v1/schedules/{'ab' * 32}/verify", headers=AUTH).status_code == 404
        r = c.post(f"/v1/schedules/{empty.key}/verify", headers=AUTH)
        assert r.status_code == 404 and "to verify" in r.json()["detail"]
        r = c.post(url, params={"target": "cpu|Some Other CPU|4"}, headers=AUTH)
        assert r.status_code == 422 and "not offered" in r.json()["detail"]
        r = c.post(url, params={"target": "cuda"}, headers=AUTH)
        assert r.status_code == 422 and "no live GPU offers target cuda" in r.json()["detail"]
        assert c.post(url, params={"top": 0}, headers=AUTH).status_code == 422
        assert c.delete(f"/v1/jobs/{job['id']}", headers=bearer(BOB)).status_code == 403
        done = c.delete(f"/v1/jobs/{job['id']}", headers=bearer(ALICE)).json()
        assert done["state"] == "cancelled" and done["cancelled_by"] == "alice" and done["mode"] == "verify"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_verify_job_re_measures_the_candidates_here(tmp_path: Path) -> None:
    """Real measurements in a local worker thread: one honest schedule recorded once (unverified)
    comes out verified, and the job ends done."""
    s = hostile_settings(sqlite_url(tmp_path / "real.db"), max_running_jobs=1, poll_interval_s=0.2)
    steps = sample_steps(W, 6)
    seed_records(s.db_url, [(steps, (1e-5,), 0, "")])
    with TestClient(create_app(s)) as c:
        assert c.get(f"/v1/schedules/{W.key}").json()["verified"] is False
        job = c.post(f"/v1/schedules/{W.key}/verify", params={"top": 1}, headers=AUTH).json()
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            j = c.get(f"/v1/jobs/{job['id']}").json()
            if j["state"] in ("done", "failed", "cancelled"):
                break
            time.sleep(0.5)
        assert j["state"] == "done", j
        assert j["trials_done"] == 1 and j["records"] >= 3
        body = c.get(f"/v1/schedules/{W.key}").json()
        assert body["verified"] is True and body["n_valid"] >= 3


# ---------------------------------------------------------------- 5: who may cancel
def test_only_the_owner_or_an_admin_may_cancel_and_the_canceller_is_recorded(client: TestClient) -> None:
    ids = [client.post("/v1/jobs", json=JOB, headers=bearer(ALICE)).json()["id"] for _ in range(3)]
    r = client.delete(f"/v1/jobs/{ids[0]}", headers=bearer(BOB))
    assert r.status_code == 403 and "only the job's owner (alice) or an admin" in r.json()["detail"]
    assert client.get(f"/v1/jobs/{ids[0]}").json()["state"] == "queued"  # nothing changed
    assert client.delete(f"/v1/jobs/{ids[0]}", headers=bearer(READ_TOKEN)).status_code == 403
    mine = client.delete(f"/v1/jobs/{ids[0]}", headers=bearer(ALICE)).json()
    assert mine["state"] == "cancelled" and mine["cancelled_by"] == "alice"
    admin = client.delete(f"/v1/jobs/{ids[1]}", headers=bearer(ROOT)).json()
    assert admin["state"] == "cancelled" and admin["cancelled_by"] == "root" and admin["owner"] == "alice"
    assert "root" in admin["error"]
    assert client.get(f"/v1/jobs/{ids[2]}").json()["cancelled_by"] == ""
    r = client.post("/v1/jobs", json=JOB, headers=bearer(ROOT))  # an admin token is a write token too
    assert r.status_code == 201 and r.json()["owner"] == "root"


def test_admin_tokens_and_the_body_timeout_come_from_the_environment() -> None:
    s = settings_from_env({"AUTOSCHED_ADMIN_TOKENS": "root:rootrootroot", "AUTOSCHED_BODY_TIMEOUT_S": "2.5"})
    assert s.admin_tokens == {"rootrootroot": "root"} and s.body_timeout_s == 2.5
    assert s.is_admin("rootrootroot") and s.owner_of("rootrootroot", write=True) == "root" and s.can_write
    assert not s.is_admin("someone-else")
    with pytest.raises(ValueError, match="BODY_TIMEOUT_S"):
        settings_from_env({"AUTOSCHED_BODY_TIMEOUT_S": "soon"})
    with pytest.raises(ValueError, match="body_timeout_s"):
        ServiceSettings(body_timeout_s=0)


# ---------------------------------------------------------------- 6: targets a live worker offers
FOREIGN = ["cpu|AMD EPYC 9654 (znver4)|64", "cpu; rm -rf /", "cpu|$(reboot)|1", "cuda|NVIDIA H200|0", "tpu"]


@pytest.mark.parametrize("target", FOREIGN)
def test_a_job_may_not_name_a_target_no_live_worker_offers(client: TestClient, target: str) -> None:
    r = client.post("/v1/jobs", json={**JOB, "target": target}, headers=AUTH)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert repr(target) in detail and host().key in detail  # names the target and lists the offered ones
    assert client.get("/v1/jobs").json()["jobs"] == []  # nothing stored under the foreign key


def test_the_exact_offered_key_and_the_bare_kind_are_accepted(client: TestClient) -> None:
    for target in ("cpu", host().key):
        r = client.post("/v1/jobs", json={**JOB, "target": target}, headers=AUTH)
        assert r.status_code == 201 and r.json()["target"] == host().key, r.text


def test_a_gpu_job_fails_fast_when_no_live_worker_has_a_gpu(client: TestClient) -> None:
    for kind in ("cuda", "triton"):
        r = client.post("/v1/jobs", json={**JOB, "target": kind}, headers=AUTH)
        assert r.status_code == 422 and f"no live GPU offers target {kind}" in r.json()["detail"], r.text


def test_a_gpu_job_is_accepted_where_a_gpu_is_offered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    set_gpu(monkeypatch, "NVIDIA H100 80GB HBM3")
    with TestClient(create_app(hostile_settings(sqlite_url(tmp_path / "g.db")))) as c:
        r = c.post("/v1/jobs", json={**JOB, "target": "cuda"}, headers=AUTH)
        assert r.status_code == 201 and r.json()["target"] == "cuda|NVIDIA H100 80GB HBM3|0", r.text


def test_resolve_target_rules() -> None:
    offers = ["cpu|Box (x86-64)|8", "cuda|NVIDIA H100|0", "triton|NVIDIA H100|0"]
    assert resolve_target("cuda", offers).key == "cuda|NVIDIA H100|0"
    assert resolve_target("cpu|Box (x86-64)|8", offers).key == "cpu|Box (x86-64)|8"
    assert resolve_target("cpu", offers).key == "cpu|Box (x86-64)|8"  # not this host's: the offered one
    with pytest.raises(TargetRefused, match="no live worker offers target cpu"):
        resolve_target("cpu", [])
    with pytest.raises(TargetRefused, match=r"'cpu\|Box \(x86-64\)\|16' is not offered"):
        resolve_target("cpu|Box (x86-64)|16", offers)
