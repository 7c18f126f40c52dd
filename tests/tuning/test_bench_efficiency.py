"""The efficiency benchmark's line-up of runs (`benchmarks/bench_search_efficiency.py`): which
(searcher, model) runs it builds, so a reduced run still holds random search's baseline."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from autosched.workload import Workload

_spec = importlib.util.spec_from_file_location(
    "bench_search_efficiency", Path(__file__).resolve().parents[2] / "benchmarks" / "bench_search_efficiency.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def _labels(tmp_path, **kw) -> tuple[list[str], dict]:
    w = Workload.create("matmul", 16, 16, 16)
    return bench.lockstep_tasks(w, f"sqlite:///{tmp_path}/eff.db", ["random", "genetic"], 2, 8, **kw)


def test_every_searcher_runs_with_and_without_the_model_by_default(tmp_path):
    labels, tasks = _labels(tmp_path)
    assert labels == ["random+xgb", "random", "genetic+xgb", "genetic"]
    assert all(len(tasks[lb]) == 2 for lb in labels)
    assert [t.options.cost_model for t in tasks["genetic"]] == [None, None]


def test_unguided_keeps_random_search_without_the_model_as_the_baseline(tmp_path):
    labels, _ = _labels(tmp_path, unguided=())
    assert labels == ["random+xgb", "random", "genetic+xgb"]
    labels, _ = _labels(tmp_path, unguided=("genetic",), ablate=("genetic",))
    assert labels == ["random+xgb", "random", "genetic+xgb", "genetic", "genetic+xgb-notransfer"]


def test_target_is_parsed_and_a_bad_one_is_named(tmp_path):
    import pytest

    labels, tasks = _labels(tmp_path, target="cpu")
    assert tasks["random"][0].target.kind == "cpu"
    with pytest.raises(ValueError, match="'tpu'"):
        _labels(tmp_path, target="tpu")
