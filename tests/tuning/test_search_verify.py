"""At the end of a run the best schedules are brought to MIN_VERIFIED measurements and the best by its
median wins: a schedule whose one fast measurement was luck loses to a steadily fast one, and one that
ever fails its check (a racy kernel) is ruled out for good."""

from __future__ import annotations

import pytest

from autosched.compile.types import ErrorCode
from autosched.measure.types import MeasureResult
from autosched.target.key import Target
from autosched.tuning.tuner import Prior, TaskTuner, TuneOptions
from autosched.workload import Workload
from tuning_db.canonical import steps_hash
from tuning_db.types import MIN_VERIFIED

W = Workload.create("matmul", 32, 32, 32)


class _Noisy:
    """Each schedule has a true cost by the order it was first seen; the first schedule's first
    measurement is lucky (10x faster); `fail` schedules fail when re-measured."""

    def __init__(self, fail: bool = False, wrong: int | None = None) -> None:
        self.rank: dict[str, int] = {}
        self.calls: dict[str, int] = {}
        self.fail = fail
        self.wrong = wrong  # this rank is right on its first run, wrong afterwards (a race)

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
            if self.wrong == r:
                cost = 1e-5  # by far the fastest
                if n > 1:
                    out.append(MeasureResult((float("inf"),), ErrorCode.WRONG_ANSWER, "max abs error 3.0"))
                    continue
            out.append(MeasureResult((cost,), ErrorCode.NO_ERROR))
        return out


def _run(verify: int, fail: bool = False, wrong: int | None = None, known=None):
    m = _Noisy(fail, wrong)
    tuner = TaskTuner(W, Target.parse("cpu"), m, TuneOptions(trials=16, batch_size=8, searcher="random",
                                                             cost_model=None, verify=verify), known=known)
    return tuner, tuner.run(), m


def test_the_lucky_schedule_loses_once_re_measured() -> None:
    tuner, r, m = _run(verify=4)
    lucky = next(s for s, k in m.rank.items() if k == 5)
    steady = next(s for s, k in m.rank.items() if k == 0)
    assert r.curve[-1][1] == pytest.approx(W.flops / 1e-4 / 1e9)  # the curve saw the lucky measurement
    assert r.best_steps_json == steady and r.best_cost == pytest.approx(1e-3)
    assert m.calls[lucky] == MIN_VERIFIED and len(r.verified) == 4 and r.best_verified
    assert r.measured == 16 + 4 * (MIN_VERIFIED - 1) and r.trials == 16


def test_without_verification_the_lucky_measurement_wins() -> None:
    _, r, m = _run(verify=0)
    assert r.best_steps_json == next(s for s, k in m.rank.items() if k == 5) and not r.verified
    assert not r.best_verified  # reported as unverified: one measurement


def test_a_crash_on_re_measurement_rules_the_schedule_out_and_the_others_decide() -> None:
    tuner, r, m = _run(verify=4, fail=True)
    crashed = next(s for s, k in m.rank.items() if k == 1)
    assert r.errors.get("RUNTIME_ERROR") == 1 and m.calls[crashed] == 2  # not measured again after its crash
    assert r.disqualified == 1 and crashed not in {v for _, v in tuner.evaluated.values()}
    assert r.best_steps_json == next(s for s, k in m.rank.items() if k == 0) and r.best_verified


def test_a_racy_kernel_right_once_then_wrong_is_never_the_result() -> None:
    tuner, r, m = _run(verify=4, wrong=2)
    racy = next(s for s, k in m.rank.items() if k == 2)
    assert r.curve[-1][1] > 0 and r.errors.get("WRONG_ANSWER") == 1
    assert r.best_steps_json != racy and r.best_verified and r.disqualified == 1
    assert r.best_steps_json == next(s for s, k in m.rank.items() if k == 0)


def test_stored_failures_are_never_measured_and_stored_triples_need_no_re_measurement() -> None:
    probe = _Noisy()
    t = TaskTuner(W, Target.parse("cpu"), probe, TuneOptions(trials=16, batch_size=8, searcher="random",
                                                             cost_model=None, verify=4))
    t.run()
    ranked = sorted(probe.rank, key=probe.rank.get)
    bad, good = steps_hash(ranked[5]), steps_hash(ranked[0])
    known = {bad: Prior(disqualified=True), good: Prior((5e-4, 5e-4, 5e-4))}
    tuner, r, m = _run(verify=4, known=known)
    assert ranked[5] not in m.calls  # ruled out: never measured again, never served
    assert ranked[0] not in m.calls  # three stored local measurements: verified already
    assert r.best_steps_json == ranked[0] and r.best_cost == pytest.approx(5e-4) and r.best_verified


def test_bad_verify_option_is_refused() -> None:
    with pytest.raises(ValueError, match="verify must be an integer >= 0"):
        TuneOptions(verify=-1)
