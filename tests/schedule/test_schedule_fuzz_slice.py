"""The schedule fuzzer (`benchmarks/fuzz_schedules.py`): a fixed-seed slice of random search-space
configs of every op, built and run against the reference, must give no wrong answer, no crash and
only refusals that name the step, the stage and the loop; plus the refusal-message sites it found."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

import autosched as asc
from autosched.workload import registered_workloads
from tests.support.sched_helpers import op

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "fuzz_schedules.py"


def _fuzz_module():
    spec = importlib.util.spec_from_file_location("fuzz_schedules", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("fuzz_schedules", mod)  # its dataclasses look their module up by name
    spec.loader.exec_module(mod)
    return mod


def _refusal(fn) -> str:
    with pytest.raises(asc.ScheduleError) as ei:
        fn()
    return str(ei.value)


def test_refusal_gaps_flags_a_message_without_step_stage_or_loop() -> None:
    gaps = _fuzz_module().refusal_gaps
    assert gaps("stage 'x' is computed at 'y' loop 'i', but its reader 'z' is not inside") == ["step"]
    assert gaps("something is wrong") == ["step", "stage", "loop"]
    assert gaps("step 3 (split, stage 'C', loop 'i'): factor 0") == []


def test_reader_outside_the_attach_loop_names_compute_at() -> None:
    # found by the fuzzer (softmax, layernorm, pool2d: a producer computed at the output's loop while
    # another reader stays at root); the refusal named stage and loop but not the step
    X, out = op("softmax", 17, 31)
    s = asc.create_schedule(out)
    s["expsum"].compute_at(s[out], "i")  # 'rsum' reads expsum and stays at root
    msg = _refusal(lambda: asc.build(s, [X, out]))
    assert msg.startswith("compute_at: stage 'expsum' is computed at 'norm' loop 'i'"), msg
    assert _fuzz_module().refusal_gaps(msg) == []


def test_attach_loop_split_away_names_compute_at() -> None:
    X, out = op("softmax", 4, 8)
    s = asc.create_schedule(out)
    s["expv"].compute_at(s[out], "i")
    s[out].split("i", factor=2)
    msg = _refusal(lambda: asc.lower(s, [X, out]))
    assert "compute_at" in msg and _fuzz_module().refusal_gaps(msg) == [], msg


@pytest.mark.slow
def test_fixed_seed_slice_of_every_op(tmp_path: Path) -> None:
    out = tmp_path / "slice"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--configs", "300", "--seed", "20240", "--jobs", "2",
                           "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rep = json.loads(out.with_suffix(".json").read_text())
    total = rep["total"]
    bad = [(f["outcome"], f["label"], f["message"][:300]) for f in rep["failures"]]
    assert total["wrong_answer"] == 0 and total["crash"] == 0, bad
    assert total["compile_error"] == 0 and total["runtime_error"] == 0 and total["timeout"] == 0, bad
    assert rep["fuzzer_crashes"] == 0
    assert rep["refusals_not_naming_step_stage_loop"] == 0, rep["unnamed_refusals"][:5]
    assert total["ok"] > 0 and sum(total.values()) == 300
    ops = {n for n in registered_workloads() if not n.startswith(("docs_", "test_"))}
    assert ops <= set(rep["per_op"]), ops - set(rep["per_op"])
