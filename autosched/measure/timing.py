"""TimeEvaluator-style timing: warm-up, `number` calls per repeat, `repeat` repeats, a floor.

This follows TVM's time evaluator so numbers are comparable with the field: each repeat times
`number` back-to-back calls and reports seconds per call; when a repeat is shorter than
`min_repeat_ms`, `number` grows (at least by the golden ratio, or straight to the estimate
that meets the floor) and the repeat is redone, so timer resolution and call overhead never
dominate a sub-microsecond kernel. An optional flush writes a buffer larger than the
last-level cache before each repeat, to time the kernel with cold caches.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from autosched.target.host import llc_bytes


@dataclass(frozen=True)
class TimingResult:
    costs: tuple[float, ...]  # seconds per call, one per repeat
    number: int  # calls per repeat actually used (after the min_repeat_ms adjustment)


class CacheFlusher:
    """Evicts the CPU caches by writing a buffer of twice the last-level cache size."""

    def __init__(self, nbytes: int | None = None) -> None:
        size = nbytes if nbytes is not None else 2 * llc_bytes()
        self._buf = np.zeros(max(size // 8, 1), dtype=np.float64)

    def __call__(self) -> None:
        self._buf += 1.0  # reads and writes every line


# Aim this much above the floor: per-call cost jitters, and a repeat that falls short of the floor
# is redone, so aiming exactly at it (TVM uses no margin) wastes whole repeats
# (see docs/decisions/timing-floor-margin.md).
FLOOR_MARGIN = 1.25


def next_number(number: int, elapsed_s: float, min_repeat_ms: float, max_number: int) -> int:
    """TVM's rule: jump to the estimate that meets the floor, but grow by at least 1.618x."""
    if elapsed_s <= 0.0:
        grown = number * 10
    else:
        per_call = elapsed_s / number
        grown = max(int(min_repeat_ms / 1e3 / per_call * FLOOR_MARGIN) + 1, int(number * 1.618) + 1)
    return min(max_number, max(grown, number + 1))


def time_evaluator(
    fn: Callable[..., object],
    args: Sequence[object] = (),
    *,
    number: int = 3,
    repeat: int = 3,
    min_repeat_ms: float = 0.0,
    warmup: int = 1,
    flush: Callable[[], None] | None = None,
    max_number: int = 1_000_000,
    clock: Callable[[], float] = time.perf_counter,
) -> TimingResult:
    """Time `fn(*args)`; returns the per-call cost of each repeat.

    A kernel whose first warm-up call alone lasts the `min_repeat_ms` floor is timed one call per
    repeat after that single warm-up: batching calls only serves short kernels, and a slow candidate
    (a scalar matmul 1024^3 takes about a second a call) would otherwise spend its 10 s timeout on
    twelve calls and come back as a timeout instead of a cost."""
    for i in range(warmup):
        t0 = clock()
        fn(*args)
        if i == 0 and min_repeat_ms > 0 and (clock() - t0) * 1e3 >= min_repeat_ms:
            number = 1
            break
    costs: list[float] = []
    for _ in range(repeat):
        while True:
            if flush is not None:
                flush()
            t0 = clock()
            for _ in range(number):
                fn(*args)
            elapsed = clock() - t0
            if elapsed * 1e3 >= min_repeat_ms or number >= max_number:
                break
            number = next_number(number, elapsed, min_repeat_ms, max_number)
        costs.append(elapsed / number)
    return TimingResult(tuple(costs), number)
