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

#: Error codes that disqualify a schedule for good, whatever its other records say: it crashed or
#: computed a wrong answer at least once, so a fast valid record of it is luck (a racy kernel).
#: autosched's `ErrorCode` numbering: RUNTIME_ERROR, WRONG_ANSWER, WORKER_CRASHED.
DISQUALIFYING: frozenset[int] = frozenset({4, 6, 7})
#: Names of the disqualifying codes, for `Standing.reason`.
DISQUALIFYING_NAMES: Mapping[int, str] = {4: "RUNTIME_ERROR", 6: "WRONG_ANSWER", 7: "WORKER_CRASHED"}
#: Valid local measurements a schedule needs to be *verified*: one sample can be lucky by 20-50%.
MIN_VERIFIED = 3
#: `Record.origin` of measurements written by this database's tuners.
ORIGIN_LOCAL = ""
#: Default `Record.origin` of imported lines (`import_jsonl(origin=...)` may name the file).
ORIGIN_IMPORT = "import"


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
    origin: str = ORIGIN_LOCAL


@dataclass(frozen=True)
class Record:
    """A stored measurement. `median` is None for failed candidates (never inf).

    `origin` is `ORIGIN_LOCAL` for a measurement made here; an imported one keeps where it came
    from and never counts towards verification.
    """

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
    origin: str = ORIGIN_LOCAL

    @property
    def ok(self) -> bool:
        return self.error_code == OK

    @property
    def local(self) -> bool:
        return self.origin == ORIGIN_LOCAL

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
    cancelled_by: str = ""

    @property
    def finished(self) -> bool:
        return self.state in (JobState.DONE, JobState.FAILED, JobState.CANCELLED)


@dataclass(frozen=True)
class Standing:
    """Where one schedule stands on a (workload, target): its representative record and counts.

    `cost` (seconds) is the upper median of the local valid records' medians for a verified
    schedule, of all its valid records otherwise; `record` is the record with that median (None
    only for a schedule with no valid record). `reason` names the first disqualifying record,
    e.g. "WRONG_ANSWER: <its error_msg>", or is "".
    """

    steps_hash: str
    record: Record | None
    cost: float | None
    n_valid: int
    n_imported: int
    n_disqualifying: int
    reason: str

    @property
    def disqualified(self) -> bool:
        return self.n_disqualifying > 0

    @property
    def verified(self) -> bool:
        return not self.disqualified and self.n_valid >= MIN_VERIFIED


@dataclass(frozen=True)
class RefusedLine:
    """An imported line that was not stored, and why."""

    line_no: int
    reason: str


@dataclass(frozen=True)
class ImportReport:
    """What `import_jsonl` did. `refused` keeps the first `MAX_REFUSED_REPORTED` reasons;
    `n_refused` counts them all."""

    imported: int
    duplicates: int
    refused: tuple[RefusedLine, ...]
    n_refused: int


#: How many refused lines an `ImportReport` lists (a planted file may refuse millions).
MAX_REFUSED_REPORTED = 1000
