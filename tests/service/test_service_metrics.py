"""/metrics through prometheus_client: valid exposition, one registry per app, and multi-process mode
(several uvicorn workers sharing PROMETHEUS_MULTIPROC_DIR)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from autosched.service.app import create_app
from tests.support.service_helpers import AUTH
from tuning_db import sqlite_url

ROOT = Path(__file__).resolve().parents[2]
MATMUL = {"workload": {"op": "matmul", "args": [16, 16, 16]}, "trials": 8, "searcher": "random", "cost_model": "none"}


def _settings(tmp: Path):
    from autosched.service.settings import ServiceSettings
    from tests.support.service_helpers import TOKEN

    return ServiceSettings(db_url=sqlite_url(tmp / "m.db"), write_tokens={TOKEN: "admin"}, max_running_jobs=0,
                           max_tensor_elements=1 << 20)


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_exposition_parses_with_the_same_series(tmp_path: Path) -> None:
    with TestClient(create_app(_settings(tmp_path))) as c:
        assert c.post("/v1/jobs", json=MATMUL, headers=AUTH).status_code == 201
        r = c.get("/metrics", headers=AUTH)
    assert r.status_code == 200 and r.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    s = _samples(r.text)
    assert s[("autosched_jobs", (("state", "queued"),))] == 1
    assert {s[("autosched_jobs", (("state", st),))] for st in ("running", "done", "failed", "cancelled")} == {0}
    assert s[("autosched_records", ())] == 0 and s[("autosched_workloads", ())] == 1
    assert s[("autosched_jobs_running_here", ())] == 0
    assert s[("autosched_http_requests_total", (("method", "POST"), ("route", "/v1/jobs"), ("status", "201")))] == 1
    le = {"le": "+Inf", "method": "POST", "route": "/v1/jobs"}
    assert s[("autosched_http_request_duration_seconds_bucket", tuple(sorted(le.items())))] == 1
    assert "# TYPE autosched_job_events_total counter" in r.text
    assert "_created" not in r.text  # no series the hand-written exposition did not have


def test_openmetrics_when_asked(tmp_path: Path) -> None:
    with TestClient(create_app(_settings(tmp_path))) as c:
        r = c.get("/metrics", headers={**AUTH, "Accept": "application/openmetrics-text; version=1.0.0"})
    assert r.headers["content-type"].startswith("application/openmetrics-text; version=1.0.0")
    assert r.text.endswith("# EOF\n")


def test_two_apps_in_one_process_count_apart(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with TestClient(create_app(_settings(tmp_path / "a"))) as a, TestClient(create_app(_settings(tmp_path / "b"))) as b:
        for _ in range(3):
            a.get("/healthz")
        b.get("/healthz")
        key = ("autosched_http_requests_total", (("method", "GET"), ("route", "/healthz"), ("status", "200")))
        assert _samples(a.get("/metrics", headers=AUTH).text)[key] == 3
        assert _samples(b.get("/metrics", headers=AUTH).text)[key] == 1


_WORKER = textwrap.dedent("""
    import sys
    from pathlib import Path
    sys.path.insert(0, {root!r})
    from fastapi.testclient import TestClient
    from autosched.service.app import create_app
    from autosched.service.settings import ServiceSettings
    from tests.support.service_helpers import AUTH, TOKEN
    from tuning_db import sqlite_url
    s = ServiceSettings(db_url=sqlite_url(Path({tmp!r}) / "m.db"), write_tokens={{TOKEN: "admin"}},
                        max_running_jobs=0)
    with TestClient(create_app(s)) as c:
        for _ in range(int(sys.argv[1])):
            c.get("/healthz")
        if sys.argv[2] == "scrape":
            print(c.get("/metrics", headers=AUTH).text)
""")


def test_multiprocess_mode_sums_the_workers(tmp_path: Path) -> None:
    mp = tmp_path / "prom"
    mp.mkdir()
    script = tmp_path / "worker.py"
    script.write_text(_WORKER.format(root=str(ROOT), tmp=str(tmp_path)))
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(mp)}

    def worker(n: int, scrape: bool) -> str:
        out = subprocess.run([sys.executable, str(script), str(n), "scrape" if scrape else "-"], env=env,
                             capture_output=True, text=True, timeout=300, cwd=ROOT)
        assert out.returncode == 0, out.stderr[-3000:]
        return out.stdout

    worker(2, False)  # two "uvicorn workers" (one after the other: the files are what they share)
    text = worker(3, True)
    s = _samples(text)
    key = ("autosched_http_requests_total", (("method", "GET"), ("route", "/healthz"), ("status", "200")))
    assert s[key] == 5, text
    assert s[("autosched_jobs_running_here", ())] == 0  # the first worker left the live sum when it stopped
    assert s[("autosched_workloads", ())] == 0 and ("autosched_jobs", (("state", "queued"),)) in s
    assert list(mp.glob("counter_*.db")) and list(mp.glob("gauge_livesum_*.db")) == []  # every worker left


def test_job_manager_events_and_running_jobs_reach_the_metrics() -> None:
    from autosched.service.manager import JobManager, Slot
    from autosched.service.metrics import ServiceMetrics

    m = ServiceMetrics()
    mgr = JobManager(None, None, None, on_event=m.job_event, on_running=m.set_running)  # type: ignore[arg-type]
    for kind in ("started", "done", "started"):
        mgr._event(kind)
    mgr.running["j"] = Slot("j", 0, 0.0)
    mgr._report_running()
    s = _samples(m.exposition()[0].decode())
    assert mgr.events == {"started": 2, "done": 1}
    assert s[("autosched_job_events_total", (("event", "started"),))] == 2
    assert s[("autosched_job_events_total", (("event", "done"),))] == 1
    assert s[("autosched_jobs_running_here", ())] == 1
    assert ("autosched_jobs", (("state", "queued"),)) not in s  # no database yet: no database gauges
