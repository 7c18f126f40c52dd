"""At the end of a run the best schedules are re-measured and the best by its median wins: a schedule
whose one fast measurement was luck loses to a steadily fast one."""

from __future__ import annotations

import pytest

from autosched.compile.types import ErrorCode
from autosched.measure.types import MeasureResult
from autosched.target.key import Target
from autosched.tuning.tuner import VERIFY_ROUNDS, TaskTuner, TuneOptions
from autosched.workload import Workload

W = Workload.create("matmul", 32, 32, 32)


class _Noisy:
    """Each schedule has a true cost by the order it was first seen; the first schedule's first
    measurement is lucky (10x faster); `fail` schedules fail when re-measured."""

    def __init__(self, fail: bool = False) -> None:
        self.rank: dict[str, int] = {}
        self.calls: dict[str, int] = {}
        self.fail = fail

    def measure(self, inputs):
        out = []
        for inp in inputs:
            r = self.rank.setdefault(inp.steps_json, len(self.rank))
            n = self.calls[inp.steps_json] = self.calls.get(inp.steps_json, 0) + 1
            cost = 1e-3 * (1 + 0.01 * r)
            if r == 5 and n == 1:
                cost = 1e-4  # the lucky one
            if self.fail and n > 1 and r == 1:
                out.append(MeasureResult((float("inf"),), ErrorCode.RUNTIME_ERROR, "crashed"))
                continue
            out.append(MeasureResult((cost,), ErrorCode.NO_ERROR))
        return out


def _run(verify: int, fail: bool = False):
    m = _Noisy(fail)
    tuner = TaskTuner(W, Target.parse("cpu"), m, TuneOptions(trials=16, batch_size=8, searcher="random",
                                                             cost_model=None, verify=verify))
    return tuner, tuner.run(), m


def test_the_lucky_schedule_loses_once_re_measured() -> None:
    tuner, r, m = _run(verify=4)
    lucky = next(s for s, k in m.rank.items() if k == 5)
    steady = next(s for s, k in m.rank.items() if k == 0)
    assert r.curve[-1][1] == pytest.approx(W.flops / 1e-4 / 1e9)  # the curve saw the lucky measurement
    assert r.best_steps_json == steady and r.best_cost == pytest.approx(1e-3)
    assert m.calls[lucky] == 1 + VERIFY_ROUNDS and len(r.verified) == 4
    assert r.measured == 16 + 4 * VERIFY_ROUNDS and r.trials == 16


def test_without_verification_the_lucky_measurement_wins() -> None:
    _, r, m = _run(verify=0)
    assert r.best_steps_json == next(s for s, k in m.rank.items() if k == 5) and not r.verified


def test_a_failed_re_measurement_is_an_error_and_the_others_decide() -> None:
    _, r, m = _run(verify=4, fail=True)
    assert r.errors.get("RUNTIME_ERROR") == VERIFY_ROUNDS
    assert r.best_steps_json == next(s for s, k in m.rank.items() if k == 0)


def test_bad_verify_option_is_refused() -> None:
    with pytest.raises(ValueError, match="verify must be an integer >= 0"):
        TuneOptions(verify=-1)
