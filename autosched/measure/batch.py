"""Glue: build a batch, run it, tell the callbacks. Side effects live in the callbacks.

Recording to the tuning database, updating the cost model and logging progress are callbacks
(MetaSchedule's `measure_callback`), so the tuner loop stays short and the measure layer never
imports the database or the model.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from autosched.compile.types import BuildResult, ErrorCode, MeasureInput
from autosched.measure.types import MeasureResult

MeasureCallback = Callable[[Sequence[MeasureInput], Sequence[MeasureResult]], None]


class Builder(Protocol):
    def build(self, inputs: Sequence[MeasureInput]) -> list[BuildResult]: ...


class Runner(Protocol):
    def run(self, inputs: Sequence[MeasureInput], builds: Sequence[BuildResult]) -> list[MeasureResult]: ...


def measure_batch(inputs: Sequence[MeasureInput], builder: Builder, runner: Runner) -> list[MeasureResult]:
    """Build every input (in parallel), then run them (one at a time per device)."""
    inputs = list(inputs)
    if not inputs:
        return []
    builds = builder.build(inputs)
    results = runner.run(inputs, builds)
    if len(results) != len(inputs):
        raise RuntimeError(f"runner returned {len(results)} results for {len(inputs)} inputs")
    return results


@dataclass(frozen=True)
class Best:
    cost: float
    input: MeasureInput
    result: MeasureResult


class ProgramMeasurer:
    """Measures batches, keeps the best per workload and counts errors; callbacks do the rest.

    Callbacks are called in order with (inputs, results) after each batch; an exception in a
    callback propagates (a database that cannot record should stop the tuner, not be ignored).
    """

    def __init__(self, builder: Builder, runner: Runner, callbacks: Sequence[MeasureCallback] = ()) -> None:
        self.builder = builder
        self.runner = runner
        self.callbacks: list[MeasureCallback] = list(callbacks)
        self.best: dict[str, Best] = {}
        self.error_counts: Counter[ErrorCode] = Counter()
        self.n_measured = 0

    def measure(self, inputs: Sequence[MeasureInput]) -> list[MeasureResult]:
        inputs = list(inputs)
        results = measure_batch(inputs, self.builder, self.runner)
        for inp, res in zip(inputs, results):
            self.n_measured += 1
            self.error_counts[res.error_code] += 1
            cost = res.median
            if res.ok and math.isfinite(cost):
                cur = self.best.get(inp.workload_key)
                if cur is None or cost < cur.cost:
                    self.best[inp.workload_key] = Best(cost, inp, res)
        for cb in self.callbacks:
            cb(inputs, results)
        return results
