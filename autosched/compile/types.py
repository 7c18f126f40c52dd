"""Types that cross the build stage: the candidate to build and measure, the built artifact, and
the error codes every later stage reports with.

Errors are results: a candidate that fails to build or run comes back with an `ErrorCode` and a
message, never as an exception that stops the tuner.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import IntEnum

from autosched.codegen.source import ArgSpec


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
