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


def test_random_trials_lengthens_only_the_unguided_random_baseline(tmp_path):
    labels, tasks = _labels(tmp_path, random_trials=24)
    budgets = {lb: {t.options.trials for t in tasks[lb]} for lb in labels}
    assert budgets == {"random+xgb": {8}, "random": {24}, "genetic+xgb": {8}, "genetic": {8}}


class _Run:
    """What `summarize` reads of a finished run."""

    transfer_seeds = ()

    class trace:  # noqa: N801
        mean_proposal_gflops = 1.0


def test_summary_counts_random_trials_past_the_common_budget():
    """A guided run at 95% of its final at trial 6 (of 8); random search at that level only at trial 14
    of its longer run: met (6 <= 14 / 2), which an 8-trial random run could not have told."""
    guided = [1.0, 2.0, 5.0, 8.0, 9.0, 9.6, 9.8, 10.0]
    random_long = [1.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 7.0, 8.0, 8.0, 9.0, 9.0, 9.6, 9.6, 10.0]
    curves = {"random+xgb": guided, "random": random_long[:8]}
    tasks = {"random+xgb": [_Run()], "random": [_Run()]}
    rows = {r["label"]: r for r in bench.summarize(["random+xgb", "random"], tasks, curves, 8, random_long)}
    g = rows["random+xgb"]
    assert g["trials_to_95pct"] == 6 and g["random_trials_to_level"] == 14 and g["random_budget"] == 16
    assert g["met_half_of_random"]
    assert "| 14 | yes |" in "\n".join(bench.table_lines(list(rows.values())))
    # cut at the common budget, random never reaches the level: "> 8" and judged against 8 / 2
    rows8 = {r["label"]: r for r in bench.summarize(["random+xgb", "random"], tasks, curves, 8)}
    assert rows8["random+xgb"]["random_trials_to_level"] is None and not rows8["random+xgb"]["met_half_of_random"]
    assert "| > 8 | no |" in "\n".join(bench.table_lines(list(rows8.values())))
