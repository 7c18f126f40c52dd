"""On a real two-node Ray cluster (loopback): the targets a job may name are what the live nodes
advertise (each node probed with a 0-CPU task pinned to it), and a node that leaves takes its
offer with it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from autosched.service.app import create_app
from autosched.service.executors import RayExecutor
from autosched.service.settings import ServiceSettings
from autosched.service.targets import host_offers
from autosched.target.key import Target
from tests.support.loopback_cluster import running_cluster
from tests.support.service_helpers import AUTH, TOKEN, job_body
from tuning_db import sqlite_url

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(300)]


def _two_nodes(c) -> None:
    c.start_head("node_a", num_cpus=1)
    c.start_worker("node_b", num_cpus=1)


def test_a_ray_cluster_offers_what_its_live_nodes_advertise(tmp_path: Path) -> None:
    with running_cluster(_two_nodes) as cluster:
        ex = RayExecutor(cluster.address)
        try:
            offers = ex.offered_targets()
            cpu_only = [k for k in sorted(set(host_offers())) if k.startswith("cpu|")]  # nodes without Ray GPUs
            assert offers == cpu_only, offers  # both nodes are this machine
            assert len(ex._node_offers) == 2  # every live node answered its probe
            cluster.kill_node("node_b")
            deadline = time.monotonic() + 30
            while len(ex.offered_targets()) and len(ex._node_offers) > 1 and time.monotonic() < deadline:
                time.sleep(0.2)
            assert len(ex._node_offers) == 1 and ex.offered_targets() == cpu_only  # the head still offers
        finally:
            ex.shutdown()


def test_a_service_on_ray_refuses_a_target_no_node_offers(tmp_path: Path) -> None:
    with running_cluster(_two_nodes) as cluster:
        s = ServiceSettings(db_url=sqlite_url(tmp_path / "r.db"), write_tokens={TOKEN: "admin"},
                            ray_address=cluster.address, max_running_jobs=1)
        with TestClient(create_app(s)) as c:
            r = c.post("/v1/jobs", json=job_body("matmul", [8, 8, 8], target="cpu|AMD EPYC 9654 (znver4)|64"),
                       headers=AUTH)
            assert r.status_code == 422 and Target.host("cpu").key in r.json()["detail"], r.text
            r = c.post("/v1/jobs", json=job_body("matmul", [8, 8, 8], target="cuda"), headers=AUTH)
            assert r.status_code == 422 and "no live GPU offers target cuda" in r.json()["detail"], r.text
            r = c.post("/v1/jobs", json=job_body("matmul", [8, 8, 8], trials=4), headers=AUTH)
            assert r.status_code == 201 and r.json()["target"] == Target.host("cpu").key, r.text
            c.delete(f"/v1/jobs/{r.json()['id']}", headers=AUTH)
