"""The efficiency benchmark's re-measured curves (`benchmarks/remeasure.py`): a lucky single
measurement near a run's top is timed again and stops setting the run's final best, while the
schedules no run ranks near its top keep their one measurement."""

from __future__ import annotations

import importlib.util
import math
from dataclasses import dataclass
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "bench_remeasure", Path(__file__).resolve().parents[2] / "benchmarks" / "remeasure.py")
remeasure = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(remeasure)

FLOPS = 1e9


@dataclass(frozen=True)
class _Result:
    ok: bool
    median: float


class _Measurer:
    """Times a schedule at its true cost; records what it was asked to time."""

    def __init__(self, true_cost: dict[str, float]) -> None:
        self.true_cost, self.calls = true_cost, []

    def measure(self, inputs):
        self.calls += [i.steps_json for i in inputs]
        return [_Result(True, self.true_cost[i.steps_json]) for i in inputs]


class _Workload:
    key, flops = "w", FLOPS

    def to_json(self) -> str:
        return "{}"


class _Target:
    key = "cpu"


class _Task:
    def __init__(self, measurer, trials: list[tuple[str | None, float]]) -> None:
        self.workload, self.target, self.measurer = _Workload(), _Target(), measurer
        self.trace = remeasure.TrialTrace()
        for h, c in trials:
            self.trace.hashes.append(h)
            self.trace.costs.append(c)
            if h is not None:
                self.trace.steps[h] = h  # the steps JSON is the hash here: the fake measurer looks it up


def test_lucky_single_measurement_is_timed_again_and_stops_setting_the_final() -> None:
    true = {"a": 2.0, "b": 1.0, "lucky": 1.25, "slow": 4.0}
    m = _Measurer(true)
    # run 1 measured "lucky" at 0.5 s once (true 1.25 s); run 2 found "b" (1.0 s) later
    t1 = _Task(m, [("slow", 4.0), ("lucky", 0.5), ("a", 2.0), (None, math.inf)])
    t2 = _Task(m, [("a", 2.0), ("slow", 4.0), ("b", 1.0)])
    samples = remeasure.remeasure_tops([t1, t2], top=2, rounds=3)
    assert samples["lucky"] == [0.5, 1.25, 1.25, 1.25]
    assert samples["slow"] == [4.0]  # in no run's top 2: keeps its single measurement
    c1 = remeasure.remeasured_curve(t1.trace, samples, FLOPS, 6)
    assert c1 == [0.25, 0.8, 0.8, 0.8, 0.8, 0.8]  # GFLOP/s: 1/4, then 1/1.25 instead of the lucky 1/0.5
    c2 = remeasure.remeasured_curve(t2.trace, samples, FLOPS, 3)
    assert c2 == [0.5, 0.5, 1.0]


def test_a_schedule_that_rises_into_the_top_after_a_pass_is_timed_again_too() -> None:
    # the top 1 of the run is "x" (lucky 0.5, true 3.0); once it is re-measured, "y" (single 0.9, true 2.0)
    # leads the run on one measurement, so a second pass times "y" as well
    m = _Measurer({"x": 3.0, "y": 2.0, "z": 2.5})
    t = _Task(m, [("x", 0.5), ("y", 0.9), ("z", 2.5)])
    samples = remeasure.remeasure_tops([t], top=1, rounds=3)
    assert samples["x"] == [0.5, 3.0, 3.0, 3.0]
    assert samples["y"] == [0.9, 2.0, 2.0, 2.0]
    assert samples["z"] == [2.5]
    assert remeasure.remeasured_curve(t.trace, samples, FLOPS, 3) == [FLOPS / 3.0 / 1e9, 0.5, 0.5]
