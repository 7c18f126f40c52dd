"""The service CLI: settings from env and flags, the bodies it sends, the worker's ray command,
and the client commands against a real server that runs no jobs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from autosched.cli import service_commands as cli_service
from autosched.cli.main import build_parser
from autosched.service.server import parse_gpu_list, worker_command
from autosched.service.settings import ServiceSettings, parse_tokens, settings_from_env
from autosched.target.key import Target
from tests.support.service_helpers import TOKEN, ApiServer
from tuning_db import TuningDB, sqlite_url
from tuning_db.types import RecordIn


def test_tokens_and_settings_from_env() -> None:
    assert parse_tokens("alice:abcdefgh12, bob:zyxwvuts98") == {"abcdefgh12": "alice", "zyxwvuts98": "bob"}
    assert parse_tokens("justatoken1") == {"justatoken1": "default"}
    with pytest.raises(ValueError, match="shorter than 8"):
        parse_tokens("eve:short")
    with pytest.raises(ValueError, match="owner name"):
        parse_tokens("e v e:longenough1")
    s = settings_from_env({"AUTOSCHED_DB_URL": "sqlite:////tmp/x.db", "AUTOSCHED_TOKENS": "a:0123456789",
                           "AUTOSCHED_READ_AUTH": "1", "AUTOSCHED_MAX_TRIALS": "77",
                           "AUTOSCHED_RAY_ADDRESS": "10.0.0.1:6379"})
    assert s.db_url == "sqlite:////tmp/x.db" and s.write_tokens == {"0123456789": "a"} and s.read_auth
    assert s.max_trials == 77 and s.ray_address == "10.0.0.1:6379"
    assert s.owner_of("0123456789", write=True) == "a" and s.owner_of("nope", write=False) is None
    with pytest.raises(ValueError, match="MAX_TRIALS"):
        settings_from_env({"AUTOSCHED_MAX_TRIALS": "lots"})
    with pytest.raises(ValueError, match="port"):
        ServiceSettings(port=70000)


def test_serve_flags_override_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOSCHED_TOKENS", "env:envtoken123")
    monkeypatch.setenv("AUTOSCHED_MAX_RUNNING_JOBS", "3")
    args = build_parser().parse_args(["--db", str(tmp_path / "s.db"), "serve", "--port", "9999", "--token",
                                      "cli:clitoken123", "--max-running-jobs", "2", "--quantum", "5"])
    s = cli_service.settings_from_args(args)
    assert s.port == 9999 and s.max_running_jobs == 2 and s.quantum_s == 5.0
    assert s.write_tokens == {"envtoken123": "env", "clitoken123": "cli"}
    assert s.db_url.endswith("s.db")


def _submit_args(*argv: str):
    return build_parser().parse_args(["submit", *argv])


def test_submit_bodies_for_ops_and_dags(tmp_path: Path) -> None:
    body = cli_service.submit_body(_submit_args("matmul", "64", "64", "64", "--param", "dtype=float32",
                                                "--trials", "10", "--priority", "3"))
    assert body["workload"] == {"op": "matmul", "args": [64, 64, 64], "kwargs": {"dtype": "float32"}}
    assert body["trials"] == 10 and body["priority"] == 3 and "early_stopping" not in body
    dag = {"format": "autosched-dag", "version": 1, "ops": [], "outputs": []}
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(dag))
    body = cli_service.submit_body(_submit_args("--dag", str(bare), "--args-order", "A,B,C"))
    assert body["workload"] == {"dag": dag, "args_order": ["A", "B", "C"]}
    with pytest.raises(ValueError, match="op name"):
        cli_service.submit_body(_submit_args())


def test_worker_command_joins_with_detected_gpus() -> None:
    smi = ("GPU 0: NVIDIA H200 (UUID: GPU-0c1d2e3f-aaaa-bbbb-cccc-1234567890ab)\n"
           "GPU 1: NVIDIA H200 (UUID: GPU-1c1d2e3f-aaaa-bbbb-cccc-1234567890ab)\n")
    assert parse_gpu_list(smi) == ["NVIDIA H200", "NVIDIA H200"] and parse_gpu_list("") == []
    cmd = worker_command("10.1.2.3:6379", 4, None, ["NVIDIA H200", "NVIDIA H200"])
    assert cmd[1:4] == ["start", "--address=10.1.2.3:6379", "--block"]
    assert "--num-gpus=2" in cmd and "--num-cpus=4" in cmd
    res = json.loads(next(c for c in cmd if c.startswith("--resources=")).split("=", 1)[1])
    assert res == {"autosched_worker": 1, "gpu_model_NVIDIA_H200": 2}
    assert "--num-gpus=0" in worker_command("h:1", None, None, [])
    r = subprocess.run([sys.executable, "-m", "autosched.cli.main", "worker", "--address", "127.0.0.1:1",
                        "--dry-run"], capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0 and "ray start --address=127.0.0.1:1 --block" in r.stdout.replace(
        str(Path(sys.executable).with_name("ray")), "ray")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_client_commands_against_a_live_server(tmp_path: Path) -> None:
    bob = "bob-token-0123456"
    server = ApiServer(sqlite_url(tmp_path / "cli.db"), tmp_path, max_running_jobs=0, extra=["--token", f"bob:{bob}"])
    server.start()

    def cli(*argv: str, token: str | None = TOKEN) -> subprocess.CompletedProcess[str]:
        extra = ["--server", server.url] + (["--token", token] if token else [])
        return subprocess.run([sys.executable, "-m", "autosched.cli.main", *argv, *extra],
                              capture_output=True, text=True, timeout=60, check=False)

    try:
        r = cli("submit", "matmul", "16", "16", "16", "--trials", "4", token=None)
        assert r.returncode == 2 and "HTTP 401" in r.stderr
        r = cli("submit", "matmul", "16", "16", "--trials", "4")
        assert r.returncode == 2 and "missing a required argument" in r.stderr
        r = cli("submit", "matmul", "16", "16", "16", "--trials", "4", "--json")
        assert r.returncode == 0, r.stderr
        job_id = r.stdout.split()[2]
        key = json.loads(r.stdout[r.stdout.index("{"):])["workload_key"]
        r = cli("status", "--json")
        assert r.returncode == 0 and json.loads(r.stdout)[0]["id"] == job_id
        r = cli("status", job_id)
        assert r.returncode == 0 and "queued" in r.stdout
        r = cli("cancel", job_id, token=bob)  # another owner's job: refused, naming the rule
        assert r.returncode == 2 and "HTTP 403" in r.stderr and "owner (admin)" in r.stderr
        r = cli("cancel", job_id)
        assert r.returncode == 0 and "cancelled" in r.stdout and "cancelled by admin" in r.stdout
        r = cli("best", key)
        assert r.returncode == 2 and "no tuned schedule" in r.stderr
        r = cli("verify", key)
        assert r.returncode == 2 and "HTTP 404" in r.stderr and "to verify" in r.stderr
        db = TuningDB(server.db_url)  # one record measured once: served, but unverified
        db.commit_records([RecordIn(key, Target.parse("cpu").key, [], (1e-5,))])
        db.close()
        r = cli("best", key)
        assert r.returncode == 0 and json.loads(r.stdout)["verified"] is False and "unverified" in r.stderr
        r = cli("verify", key, "--top", "2")
        assert r.returncode == 0 and "submitted verify job" in r.stdout, r.stderr
        r = cli("status", "--json")
        [verify_job] = [j for j in json.loads(r.stdout) if j["mode"] == "verify"]
        assert verify_job["owner"] == "admin" and verify_job["trials"] == 2 and verify_job["state"] == "queued"
        r = cli("submit", "matmul", "16", "16", "16", "--target", "cpu|AMD EPYC 9654 (znver4)|64")
        assert r.returncode == 2 and "HTTP 422" in r.stderr and "not offered" in r.stderr
        r = subprocess.run([sys.executable, "-m", "autosched.cli.main", "status", "--server",
                            "http://127.0.0.1:1"], capture_output=True, text=True, timeout=60, check=False)
        assert r.returncode == 2 and "cannot reach the service" in r.stderr
    finally:
        server.stop()
