"""The efficiency protocol (`benchmarks/bench_efficiency.py`): every run from its own database,
the same seeds rule and unbuildable filter for every searcher, every measurement counted and none
past the budget; its summary (measurements to a level, median and spread, the targets' verdicts).
A fake measurer times each schedule by a hash of its steps, so nothing is built or run."""

from __future__ import annotations

import importlib.util
import json
import sys
import zlib
from pathlib import Path

import pytest

from autosched.compile.types import ErrorCode
from autosched.measure.types import MeasureResult
from autosched.space.registry import make_space
from autosched.target.key import Target
from autosched.tuning.options import TuneOptions
from autosched.tuning.tuner import TaskTuner
from autosched.workload import Workload
from tests.support.recording import RecordingMeasurer
from tuning_db import TuningDB

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
_spec = importlib.util.spec_from_file_location("bench_efficiency", BENCH / "bench_efficiency.py")
bench = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("bench_efficiency", bench)  # its dataclasses look their module up by name
_spec.loader.exec_module(bench)
report = importlib.import_module("efficiency_report")  # the summary half, beside the script

CPU = Target.parse("cpu")
MM = Workload.create("matmul", 64, 64, 64)


class HashMeasurer:
    """Times a schedule by a hash of its steps (distinct schedules, distinct speeds); every
    `fail_every`-th measurement fails to build. Counts what it was asked to measure."""

    def __init__(self, fail_every: int = 0) -> None:
        self.inputs: list = []
        self.fail_every = fail_every

    def measure(self, inputs):
        out = []
        for inp in inputs:
            self.inputs.append(inp)
            if self.fail_every and len(self.inputs) % self.fail_every == 0:
                out.append(MeasureResult((), ErrorCode.COMPILE_ERROR))
            else:
                cost = 1e-4 * (1 + zlib.crc32(inp.steps_json.encode()) % 1000)
                out.append(MeasureResult((cost,), ErrorCode.NO_ERROR))
        return out


def _run_to_end(run) -> None:
    while not run.finished:
        run.step()


# ---- the seeds switch (TuneOptions.seeds)

def test_seeds_off_starts_without_the_rule_derived_seeds_and_on_measures_them_first():
    seeds = make_space(MM, "cpu").seeds
    assert seeds, "the planted problem needs a space with rule-derived seeds"
    firsts = {}
    for on in (True, False):
        m = RecordingMeasurer()
        t = TaskTuner(MM, CPU, m, TuneOptions(len(seeds), len(seeds), "random", None, 0, verify=0, seeds=on))
        t.step()
        firsts[on] = set(m.order)
    seed_steps = {t.cands.get(t.config_space.index_of(v)).steps_json for v in seeds}
    assert seed_steps <= firsts[True]
    assert not seed_steps & firsts[False]


def test_seeds_must_be_a_bool():
    with pytest.raises(ValueError, match="seeds must be True or False, got 'no'"):
        TuneOptions(seeds="no")


# ---- runs: budget, counting, filter, database state

@pytest.mark.parametrize("spec", ["random", "genetic+xgb"])
def test_every_measurement_is_counted_failed_ones_too_and_none_past_the_budget(tmp_path, spec):
    inner = HashMeasurer(fail_every=5)
    s, m, _ = bench.parse_searcher(spec)
    run = bench.make_run(MM, CPU, inner, bench.Variant(s, m, False, 21), 0, tmp_path, None)
    _run_to_end(run)
    assert run.meter.n == len(inner.inputs) == 21  # 21: not a multiple of the batch
    assert sum(run.meter.errors.values()) == 4  # failed builds count as measurements
    assert run.meter.curve == sorted(run.meter.curve)  # best so far
    db = TuningDB(f"sqlite:///{run.db_path}")
    assert len(db.records(MM.key)) == 21  # each record is one measurement
    db.close()


def test_configs_that_do_not_instantiate_are_never_measured_nor_counted(tmp_path):
    """Softmax's space holds configs that fail to instantiate: random search proposes some, the
    tuner counts them as trials, the protocol counts measurements only."""
    w = Workload.create("softmax", 64, 128)
    inner = HashMeasurer()
    run = bench.make_run(w, CPU, inner, bench.Variant("random", None, False, 40), 0, tmp_path, None)
    _run_to_end(run)
    assert run.tuner.errors.get("INSTANTIATION_ERROR", 0) > 0
    assert run.tuner.trials > run.meter.n == len(inner.inputs) == 40


def test_each_run_starts_from_its_own_empty_database(tmp_path):
    inner = HashMeasurer()
    a = bench.make_run(MM, CPU, inner, bench.Variant("random", None, False, 16), 0, tmp_path, None)
    _run_to_end(a)
    b = bench.make_run(MM, CPU, inner, bench.Variant("random", None, False, 16), 1, tmp_path, None)
    assert a.db_path != b.db_path and b.tuner.known == {}
    _run_to_end(b)
    assert b.meter.n == 16  # nothing of a's was looked up instead of measured


def test_warm_state_gives_the_transferred_seeds_to_every_searcher_with_seeds_and_none_without(tmp_path):
    inner = HashMeasurer()
    warm = bench.build_warm_db("matmul", [(48, 48, 48)], inner, CPU, 16, tmp_path / "warm.db")
    runs = {(s, on): bench.make_run(MM, CPU, inner, bench.Variant(s, m, on, 8), 0, tmp_path, warm)
            for s, m in [("random", None), ("genetic", "xgb")] for on in (True, False)}
    assert runs[("random", True)].transferred > 0
    assert runs[("random", True)].transferred == runs[("genetic", True)].transferred
    assert runs[("random", False)].transferred == runs[("genetic", False)].transferred == 0
    assert runs[("random", True)].tuner.known == {}  # the warm state holds other shapes only


def test_lockstep_runs_every_run_to_its_budget(tmp_path):
    inner = HashMeasurer()
    runs = [bench.make_run(MM, CPU, inner, bench.Variant("random", None, on, b), 0, tmp_path, None)
            for on, b in ((False, 20), (True, 6))]
    bench.run_lockstep(runs, log=lambda _m: None)
    assert [r.meter.n for r in runs] == [20, 6]
    bench.audit(runs, inner, MM, CPU)
    assert all(r.audit_gflops and r.audit_gflops > 0 for r in runs)
    assert len(inner.inputs) == 26 + 2  # the audit's re-measurements are outside the runs' counts


def test_unknown_searcher_or_model_is_named():
    with pytest.raises(ValueError, match="'beam'"):
        bench.parse_searcher("beam+xgb")
    with pytest.raises(ValueError, match="'mlp'"):
        bench.parse_searcher("genetic+mlp")


def test_a_searcher_may_carry_its_own_budget_and_a_bad_one_is_named():
    assert bench.parse_searcher("genetic+xgb@100") == ("genetic", "xgb", 100)
    assert bench.parse_searcher("random") == ("random", None, None)
    for bad in ("random@", "random@0", "random@ten"):
        with pytest.raises(ValueError, match="after '@'"):
            bench.parse_searcher(bad)


# ---- summary

def test_to_reach_and_spread_count_unreached_seeds_as_infinite():
    assert report.to_reach([1.0, 2.0, 5.0], 2.0) == 2 and report.to_reach([1.0], 2.0) is None
    s = report.spread([3, None, 5])
    assert s == {"median": 5.0, "min": 3, "max": None, "reached": 2, "seeds": 3}
    assert report.spread([None, None, 4])["median"] is None


def test_verdict_is_undecided_when_the_budget_stops_short_of_the_limit():
    reached = {"median": 40.0}
    missed = {"median": None}
    assert report.verdict(reached, 100, 48) == "met"
    assert report.verdict(reached, 32, 48) == "not met"
    assert report.verdict(missed, 100, 48) == "undecided (budget 48 < 100)"
    assert report.verdict(missed, 32, 32) == "not met"


class _R:
    def __init__(self, v, curve, audit=1.0):
        self.variant, self.audit_gflops, self.transferred = v, audit, 0
        self.meter = type("M", (), {"curve": curve, "n": len(curve)})()


def test_summary_measures_every_run_against_tvm_and_random_searchs_median_result():
    rnd = bench.Variant("random", None, False, 4)
    gd = bench.Variant("genetic", "xgb", False, 4)
    gs = bench.Variant("genetic", "xgb", True, 2)
    runs = [_R(rnd, [1, 2, 3, 4]), _R(rnd, [1, 1, 2, 2]), _R(rnd, [2, 2, 3, 3]),
            _R(gd, [1, 3, 5, 5]), _R(gd, [3, 3, 3, 3]), _R(gd, [1, 1, 1, 2]),
            _R(gs, [6, 6]), _R(gs, [6, 7]), _R(gs, [1, 1])]
    out = bench.summarize(runs, tvm_gflops=5.0)
    assert out["random_level"] == 3.0 and out["random_budget"] == 4
    rows = {r["label"]: r for r in out["rows"]}
    assert rows["genetic+xgb"]["to_random"]["median"] == 2.0  # 2, 1, never
    assert rows["genetic+xgb"]["target_half_of_random"] == "met"
    assert rows["genetic+xgb"]["to_tvm"]["reached"] == 1
    assert rows["genetic+xgb"]["target_tvm_within_100"] == "undecided (budget 4 < 100)"
    assert rows["genetic+xgb +seeds"]["to_tvm"]["median"] == 1.0
    assert rows["genetic+xgb +seeds"]["target_tvm_within_32"] == "met"
    assert "target_tvm_within_32" not in rows["genetic+xgb"]
    assert "| genetic+xgb +seeds | 2 |" in "\n".join(bench.table_lines("matmul", "empty", out))


def test_tvm_results_are_read_and_a_missing_file_means_no_comparison(tmp_path, capsys):
    assert bench.read_tvm(tmp_path / "absent.json") == {}
    assert "no such file" in capsys.readouterr().err
    p = tmp_path / "bench_tune_cpu_x.json"
    p.write_text(json.dumps({"rows": [{"workload": "matmul1024", "tvm": {"gflops": 90.5, "trials": 200},
                                       "tvm_curve": [[1, 10.0], [200, 90.5]]},
                                      {"workload": "softmax", "tvm": {"missing": "not installed"}}]}))
    tvm = bench.read_tvm(p)
    assert tvm == {"matmul": {"gflops": 90.5, "trials": 200, "curve": [[1, 10.0], [200, 90.5]]}}


def test_a_result_file_is_summarized_again_without_measuring(tmp_path):
    inner = HashMeasurer()
    runs = [bench.make_run(MM, CPU, inner, bench.Variant("random", None, False, 8), s, tmp_path, None)
            for s in range(2)]
    bench.run_lockstep(runs, log=lambda _m: None)
    summ = bench.summarize(runs, None)
    summ["curves"] = {"random": [r.meter.curve for r in runs]}
    summ["runs"] = [{"label": r.variant.label, "variant": bench.vars_of(r.variant), "seed": r.seed,
                     "curve": r.meter.curve, "transferred": 0, "audit_gflops": None} for r in runs]
    src = tmp_path / "in.json"
    src.write_text(json.dumps({"command": "x", "workloads": {"matmul": {"tvm": None, "states": {"empty": summ}}}}))
    level = min(r.meter.curve[-1] for r in runs)
    tvm = tmp_path / "tvm.json"
    tvm.write_text(json.dumps({"rows": [{"workload": "matmul1024", "tvm": {"gflops": level}}]}))
    n = len(inner.inputs)
    out = bench.main(["--from-json", str(src), "--tvm-results", str(tvm), "--out-dir", str(tmp_path), "--tag", "t"])
    assert len(inner.inputs) == n
    row = out["workloads"]["matmul"]["states"]["empty"]["rows"][0]
    assert row["to_tvm"]["reached"] == 2
    assert (tmp_path / "efficiency_t.md").exists() and (tmp_path / "efficiency_t.png").exists()


def test_a_report_keeps_the_workloads_of_earlier_runs_of_the_same_protocol_only(tmp_path):
    path = tmp_path / "efficiency_x.json"
    head = {"seeds": 5, "budget": 200, "seeded_budget": 32, "searchers": ["random", "genetic+xgb@100"]}
    path.write_text(json.dumps({**head, "workloads": {"matmul": {"old": 1}, "softmax": {"old": 1}}}))
    merged = bench.merge_previous(path, {"softmax": {"new": 1}}, head)
    assert merged == {"matmul": {"old": 1}, "softmax": {"new": 1}}
    other = {**head, "budget": 48}
    assert bench.merge_previous(path, {"softmax": {"new": 1}}, other) == {"softmax": {"new": 1}}


def test_a_run_of_one_state_keeps_the_other_states_of_its_workload(tmp_path):
    path = tmp_path / "efficiency_x.json"
    head = {"seeds": 5, "budget": 200, "seeded_budget": 32, "searchers": ["random", "genetic+xgb@100"]}
    earlier = {"args": [64, 64, 64], "machine": {"cpu": "old"}, "command": "old run", "states": {"empty": {"rows": 1}}}
    path.write_text(json.dumps({**head, "workloads": {"matmul": earlier}}))
    new = {"args": [64, 64, 64], "machine": {"cpu": "new"}, "command": "warm run", "states": {"warm": {"rows": 2}}}
    merged = bench.merge_previous(path, {"matmul": new}, head)["matmul"]
    assert merged["states"]["warm"] == {"rows": 2}
    assert merged["states"]["empty"] == {"machine": {"cpu": "old"}, "command": "old run", "rows": 1}
    other_shape = {**new, "args": [32, 32, 32]}
    assert set(bench.merge_previous(path, {"matmul": other_shape}, head)["matmul"]["states"]) == {"warm"}
