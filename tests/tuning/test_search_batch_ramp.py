"""A model-guided run measures small batches first (the model refits sooner on the workload's own
measurements), growing to the batch size; a run on measurements alone uses full batches."""

from __future__ import annotations

import pytest

from autosched.compile.types import ErrorCode
from autosched.measure.types import MeasureResult
from autosched.target.key import Target
from autosched.tuning.tuner import RAMP_MIN_BATCH, TaskTuner, TuneOptions
from autosched.workload import Workload

W = Workload.create("matmul", 32, 32, 32)


class _Constant:
    def measure(self, inputs):
        return [MeasureResult((1e-3,), ErrorCode.NO_ERROR) for _ in inputs]


def _batches(cost_model: str | None, trials: int, batch_size: int) -> list[int]:
    tuner = TaskTuner(W, Target.parse("cpu"), _Constant(),
                      TuneOptions(trials=trials, batch_size=batch_size, searcher="random", cost_model=cost_model))
    sizes = []
    while not tuner.done:
        sizes.append(tuner.step())
    return sizes


@pytest.mark.slow
@pytest.mark.parametrize("cost_model", ["xgb", "random"])
def test_model_guided_batches_grow_from_the_ramp_minimum_to_the_batch_size(cost_model: str) -> None:
    assert RAMP_MIN_BATCH == 8
    assert _batches(cost_model, 80, 16) == [8, 8, 8, 12, 16, 16, 12]


def test_runs_without_a_model_and_small_batch_sizes_are_unchanged() -> None:
    assert _batches(None, 40, 16) == [16, 16, 8]
    assert _batches("xgb", 12, 4) == [4, 4, 4]
