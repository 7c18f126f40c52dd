"""Types that cross the measure layer: what goes in, what comes out, and how it failed.

Errors are results: a candidate that fails to build or run comes back as a `MeasureResult`
with an `ErrorCode` and a message, never as an exception that stops the tuner.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import IntEnum


class ErrorCode(IntEnum):
    """Why a candidate has no valid timing. Values are stored in the database: never renumber."""

    NO_ERROR = 0
    INSTANTIATION_ERROR = 1  # the steps do not apply to the workload (ScheduleError)
    COMPILE_ERROR = 2
    BUILD_TIMEOUT = 3
    RUNTIME_ERROR = 4
    RUN_TIMEOUT = 5
    WRONG_ANSWER = 6
    WORKER_CRASHED = 7  # the process running the kernel died (segfault, abort, node lost)


@dataclass(frozen=True)
class ArgSpec:
    """One kernel argument, in call order."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    is_output: bool

    def to_dict(self) -> dict:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype, "is_output": self.is_output}

    @staticmethod
    def from_dict(d: dict) -> ArgSpec:
        return ArgSpec(d["name"], tuple(int(x) for x in d["shape"]), d["dtype"], bool(d["is_output"]))


@dataclass(frozen=True)
class MeasureInput:
    """A candidate to measure: workload (canonical JSON of the DAG), target key, schedule steps (JSON).

    Everything is plain JSON text so it travels to remote workers without re-importing registries.
    """

    workload_key: str
    workload_json: str
    target: str
    steps_json: str

    def to_dict(self) -> dict:
        return {
            "workload_key": self.workload_key,
            "workload": json.loads(self.workload_json),
            "target": self.target,
            "steps": json.loads(self.steps_json),
        }


@dataclass(frozen=True)
class BuildResult:
    """A compiled artifact (shared library for the cpu target) or the reason there is none."""

    artifact_path: str | None
    entry: str
    args: tuple[ArgSpec, ...]
    source_hash: str
    error_code: ErrorCode = ErrorCode.NO_ERROR
    error_msg: str = ""
    build_seconds: float = 0.0
    language: str = "c"


@dataclass(frozen=True)
class MeasureResult:
    """Timing of one candidate (seconds per call), or its error."""

    costs: tuple[float, ...]
    error_code: ErrorCode
    error_msg: str = ""
    build_seconds: float = 0.0
    run_seconds: float = 0.0
    host: str = ""
    device: str = ""
    worker_id: str = ""
    timestamp: float = field(default=0.0)

    @property
    def median(self) -> float:
        """Median cost in seconds; +inf for a failed candidate."""
        if self.error_code != ErrorCode.NO_ERROR or not self.costs:
            return float("inf")
        xs = sorted(self.costs)
        n = len(xs)
        return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])

    @property
    def ok(self) -> bool:
        return self.error_code == ErrorCode.NO_ERROR
