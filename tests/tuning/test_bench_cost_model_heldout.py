"""Held-out cost-model accuracy (`benchmarks/bench_cost_model_heldout.py`): one point per schedule
across databases, the model never sees the held-out workload, the random model beside it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from autosched.compile.types import ErrorCode
from autosched.measure.types import MeasureResult
from autosched.space.registry import make_space
from autosched.target.key import Target
from autosched.tuning.api import RecordToDB, open_db, register
from autosched.tuning.candidates import CandidateCache
from autosched.workload import Workload

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
_spec = importlib.util.spec_from_file_location("bench_cost_model_heldout", BENCH / "bench_cost_model_heldout.py")
heldout = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("bench_cost_model_heldout", heldout)  # its dataclasses look their module up by name
_spec.loader.exec_module(heldout)

CPU = Target.parse("cpu")


def _fill(path: Path, w: Workload, n: int, cost_of, seed: int = 0) -> list[str]:
    """Store n distinct valid schedules of w, each timed by cost_of(k); returns their steps JSON."""
    from autosched.compile.types import MeasureInput

    space = make_space(w, "cpu")
    cands = CandidateCache(w, space, "cpu")
    rng = np.random.default_rng(seed)
    steps: list[str] = []
    while len(steps) < n:
        c = cands.get(space.space.sample_valid(rng))
        if c.ok and c.steps_json not in steps:
            steps.append(c.steps_json)
    db = open_db(f"sqlite:///{path}")
    register(db, w, CPU)
    RecordToDB(db)([MeasureInput(w.key, w.to_json(), CPU.key, s) for s in steps],
                   [MeasureResult((cost_of(k),), ErrorCode.NO_ERROR) for k in range(n)])
    db.close()
    return steps


def test_a_schedule_in_several_databases_is_one_point_at_its_median(tmp_path):
    w = Workload.create("matmul", 32, 32, 32)
    _fill(tmp_path / "a.db", w, 12, lambda k: 1e-3)
    _fill(tmp_path / "b.db", w, 12, lambda k: 3e-3)  # the same 12 schedules (same seed), slower
    _fill(tmp_path / "c.db", w, 12, lambda k: 2e-3)
    (pts,) = heldout.load_points([tmp_path / "a.db", tmp_path / "b.db", tmp_path / "c.db"], min_points=5)
    assert len(pts.y) == 12
    assert np.allclose(pts.y, w.flops / 2e-3)


def test_the_held_out_workload_is_never_in_training_and_the_random_model_is_beside_it(tmp_path):
    a, b = Workload.create("matmul", 32, 32, 32), Workload.create("matmul", 48, 48, 48)
    _fill(tmp_path / "a.db", a, 20, lambda k: 1e-3 * (1 + k))
    _fill(tmp_path / "b.db", b, 20, lambda k: 1e-3 * (1 + k), seed=1)
    pts = heldout.load_points([tmp_path / "a.db", tmp_path / "b.db"])
    rows = heldout.held_out(pts, random_seeds=3)
    assert {r["held_out"] for r in rows} == {p.name for p in pts}
    for r in rows:
        assert r["held_out"] not in r["trained_on"] and r["same_operator_in_training"]
        assert r["train_points"] == 20 and r["test_points"] == 20
        assert set(r["xgb"]) == set(r["random"]) == {"pairwise", "top5", "top10"}
        assert 0.0 <= r["xgb"]["pairwise"] <= 1.0
    assert "| matmul(32, 32, 32, 'float32') |" in "\n".join(heldout.table(rows))


def test_one_workload_is_refused_by_name_and_a_missing_database_is_named(tmp_path):
    w = Workload.create("matmul", 32, 32, 32)
    _fill(tmp_path / "a.db", w, 12, lambda k: 1e-3 * (1 + k))
    with pytest.raises(ValueError, match=r"at least 2 workloads, got 1 \(matmul"):
        heldout.held_out(heldout.load_points([tmp_path / "a.db"]))
    with pytest.raises(FileNotFoundError, match="nope.db"):
        heldout.load_points([tmp_path / "nope.db"])
