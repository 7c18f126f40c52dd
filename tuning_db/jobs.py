"""Job lifecycle rules, kept apart from storage so they read as one table.

    queued  -> running | cancelled | failed
    running -> done | failed | cancelled | queued   (queued again: its worker was lost)
    done, failed, cancelled: final

Staying in the same state is allowed (a running job reports progress many times).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from tuning_db.types import JobState

TRANSITIONS: Mapping[JobState, frozenset[JobState]] = {
    JobState.QUEUED: frozenset({JobState.RUNNING, JobState.CANCELLED, JobState.FAILED}),
    JobState.RUNNING: frozenset({JobState.DONE, JobState.FAILED, JobState.CANCELLED, JobState.QUEUED}),
    JobState.DONE: frozenset(),
    JobState.FAILED: frozenset(),
    JobState.CANCELLED: frozenset(),
}

#: Fields `update_job` may change; the rest of a job (keys, request, created) is fixed at creation.
UPDATABLE = frozenset({"state", "trials_done", "best_median", "error", "owner", "cancelled_by"})
#: Longest owner / cancelled_by (their columns are VARCHAR(255)).
NAME_MAX = 255


def parse_state(value: Any) -> JobState:
    try:
        return JobState(value)
    except ValueError:
        names = ", ".join(s.value for s in JobState)
        raise ValueError(f"unknown job state {value!r} (expected one of: {names})") from None


def check_transition(job_id: str, current: str, new: str) -> None:
    """Raise ValueError naming the transition when `current -> new` is not allowed."""
    cur, nxt = parse_state(current), parse_state(new)
    if cur != nxt and nxt not in TRANSITIONS[cur]:
        raise ValueError(f"job {job_id}: invalid state transition {cur.value!r} -> {nxt.value!r}")


def validate_update(fields: Mapping[str, Any]) -> dict[str, Any]:
    """Check names and types of `update_job` fields; return them ready to store."""
    unknown = sorted(set(fields) - UPDATABLE)
    if unknown:
        raise ValueError(f"update_job: unknown or read-only field(s) {unknown} (allowed: {sorted(UPDATABLE)})")
    out: dict[str, Any] = {}
    for name, value in fields.items():
        if name == "state":
            out[name] = parse_state(value).value
        elif name == "trials_done":
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"update_job: trials_done must be an int >= 0, got {value!r}")
            out[name] = value
        elif name == "best_median":
            ok = value is None or (
                isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
            )
            if not ok:
                raise ValueError(f"update_job: best_median must be a finite number or None, got {value!r}")
            out[name] = None if value is None else float(value)
        else:  # error, owner, cancelled_by
            if not isinstance(value, str):
                raise ValueError(f"update_job: {name} must be a str, got {type(value).__name__}")
            if "\x00" in value:
                raise ValueError(f"update_job: {name} contains a NUL character")
            if name != "error" and len(value) > NAME_MAX:
                raise ValueError(f"update_job: {name} is longer than {NAME_MAX} characters")
            out[name] = value
    return out
