"""A measurer that records the order in which candidates were measured and times each at 1 ms:
for tests that check which schedules a tuning run measures first."""

from __future__ import annotations

from autosched.compile.types import ErrorCode
from autosched.measure.types import MeasureResult


class RecordingMeasurer:
    def __init__(self) -> None:
        self.order: list[str] = []  # steps JSON of every measured candidate, in order

    def measure(self, inputs):
        self.order.extend(i.steps_json for i in inputs)
        return [MeasureResult((1e-3,), ErrorCode.NO_ERROR) for _ in inputs]
