"""TimeEvaluator semantics with a fake clock (exact), and a planted spin kernel (plausible)."""

from __future__ import annotations

import pytest

from autosched.measure.config import RunnerConfig
from autosched.measure.timing import CacheFlusher, next_number, time_evaluator


class FakeKernel:
    """Each call advances a fake clock by `cost` seconds."""

    def __init__(self, cost: float) -> None:
        self.cost = cost
        self.now = 0.0
        self.calls = 0

    def __call__(self) -> None:
        self.calls += 1
        self.now += self.cost

    def clock(self) -> float:
        return self.now


def test_number_and_repeat_are_honoured_without_floor() -> None:
    k = FakeKernel(1e-3)
    res = time_evaluator(k, number=4, repeat=5, min_repeat_ms=0, warmup=2, clock=k.clock)
    assert res.number == 4 and len(res.costs) == 5
    assert all(c == pytest.approx(1e-3) for c in res.costs)
    assert k.calls == 2 + 4 * 5


def test_min_repeat_ms_raises_number_until_the_floor_is_met() -> None:
    k = FakeKernel(1e-5)  # 10 us per call, floor 5 ms -> at least 500 calls per repeat
    res = time_evaluator(k, number=1, repeat=3, min_repeat_ms=5.0, warmup=0, clock=k.clock)
    assert res.number >= 500
    assert res.number * 1e-5 * 1e3 >= 5.0
    assert all(c == pytest.approx(1e-5) for c in res.costs)
    assert res.number < 2000  # the jump goes near the estimate, not wildly past it


def test_a_kernel_slower_than_the_floor_runs_once_per_repeat_after_one_warmup() -> None:
    """A call of 0.8 s against a 30 ms floor: 1 warm-up + 3 repeats of 1 call (3.2 s), not 2 + 3 x 3
    (8.8 s, most of a 10 s timeout)."""
    k = FakeKernel(0.8)
    res = time_evaluator(k, number=3, repeat=3, min_repeat_ms=30.0, warmup=2, clock=k.clock)
    assert res.number == 1 and k.calls == 1 + 3
    assert all(c == pytest.approx(0.8) for c in res.costs)
    fast = FakeKernel(1e-3)  # under the floor: both warm-ups, then batched repeats as before
    res = time_evaluator(fast, number=3, repeat=3, min_repeat_ms=30.0, warmup=2, clock=fast.clock)
    assert res.number * 1e-3 * 1e3 >= 30.0 and fast.calls >= 2 + 3 * res.number


def test_max_number_caps_growth() -> None:
    k = FakeKernel(0.0)  # a zero-cost call can never meet the floor
    res = time_evaluator(k, number=1, repeat=1, min_repeat_ms=1.0, warmup=0, max_number=1000, clock=k.clock)
    assert res.number == 1000


def test_next_number_grows_at_least_golden_ratio() -> None:
    assert next_number(10, 1.0, 0.5, 10**6) >= 17
    assert next_number(10, 1e-6, 10.0, 10**6) >= 10 * 10.0 / 1e-3


def test_flush_runs_before_each_repeat() -> None:
    k = FakeKernel(1e-3)
    flushes = []
    time_evaluator(k, number=2, repeat=4, warmup=0, flush=lambda: flushes.append(k.calls), clock=k.clock)
    assert flushes == [0, 2, 4, 6]


def test_cache_flusher_touches_a_buffer_bigger_than_the_llc() -> None:
    f = CacheFlusher(1 << 20)
    f()
    f()
    assert f._buf.nbytes == 1 << 20 and float(f._buf[0]) == 2.0


def test_runner_config_validation() -> None:
    with pytest.raises(ValueError):
        RunnerConfig(number=0)
    with pytest.raises(ValueError):
        RunnerConfig(timeout=0)
    with pytest.raises(ValueError):
        RunnerConfig(number=10, max_number=5)
