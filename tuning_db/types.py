"""Frozen values that cross the `tuning_db` boundary: what the repository takes and returns.

Callers never see ORM objects or rows, so a session closing or a schema change inside the package
cannot leak out; a value read from the database is a snapshot.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

#: Version of the schedule-steps format a record carries (autosched's `Step` format version).
STEPS_FORMAT_VERSION = 1

#: `error_code` of a valid measurement (autosched.measure.types.ErrorCode.NO_ERROR).
OK = 0


class JobState(StrEnum):
    """Lifecycle of a tuning job; transitions are checked by `tuning_db.jobs.check_transition`."""

    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class RecordIn:
    """One measurement to store.

    `steps` is the schedule as a JSON value (usually a list of step dicts) or JSON text. `costs` are
    seconds per call; for `error_code == 0` they must be non-empty and finite, and the median is
    computed from them. For a failed candidate non-finite costs are dropped and the median is NULL.
    `error_code` uses autosched's `ErrorCode` numbering, stored as an int.
    """

    workload_key: str
    target_key: str
    steps: Any
    costs: tuple[float, ...] = ()
    error_code: int = OK
    error_msg: str = ""
    build_seconds: float = 0.0
    run_seconds: float = 0.0
    host: str = ""
    device: str = ""
    worker_id: str = ""
    job_id: str | None = None
    created: datetime | None = None
    format_version: int = STEPS_FORMAT_VERSION


@dataclass(frozen=True)
class Record:
    """A stored measurement. `median` is None for failed candidates (never inf)."""

    id: int
    workload_key: str
    target_key: str
    steps_json: str
    steps_hash: str
    costs: tuple[float, ...]
    median: float | None
    error_code: int
    error_msg: str
    build_seconds: float
    run_seconds: float
    host: str
    device: str
    worker_id: str
    job_id: str | None
    created: datetime
    format_version: int

    @property
    def ok(self) -> bool:
        return self.error_code == OK

    @property
    def steps(self) -> Any:
        """The steps as a JSON value (parsed on each access; `steps_json` is the stored text)."""
        return json.loads(self.steps_json)


@dataclass(frozen=True)
class RecordOutcome:
    """How one stored measurement came out, without its schedule: what a tuning curve needs.

    `median` is None for a failed candidate, as in `Record`.
    """

    id: int
    median: float | None
    error_code: int

    @property
    def ok(self) -> bool:
        return self.error_code == OK


@dataclass(frozen=True)
class WorkloadInfo:
    """A workload: `key` is autosched's workload key (sha256 of the canonical DAG JSON), `spec` that JSON."""

    key: str
    name: str
    spec: Mapping[str, Any]
    flops: float
    created: datetime


@dataclass(frozen=True)
class TargetInfo:
    """A measurement target, e.g. key "cpu-epyc-avx2", kind "cpu"; `spec` describes the hardware."""

    key: str
    kind: str
    spec: Mapping[str, Any]
    created: datetime


@dataclass(frozen=True)
class JobInfo:
    """A tuning job. `request` holds what was asked (trials, searcher, cost model, priority, ...)."""

    id: str
    state: str
    workload_key: str
    target_key: str
    request: Mapping[str, Any]
    trials_done: int
    best_median: float | None
    error: str
    created: datetime
    updated: datetime
    owner: str

    @property
    def finished(self) -> bool:
        return self.state in (JobState.DONE, JobState.FAILED, JobState.CANCELLED)
