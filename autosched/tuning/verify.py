"""Re-measuring the best stored schedules of a workload here: `autosched verify KEY` and the service's
verify jobs.

Why: a schedule is served as verified only with MIN_VERIFIED valid measurements made by this
database's own tuners (`tuning_db.ranking`); imported records and interrupted runs leave contenders
with fewer. Verifying measures the top candidates again, back to back, and stores every result like
a tuner does, so a kernel that fails its check now is ruled out for good and the others become
verified with their medians.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from autosched.compile.types import ErrorCode, MeasureInput
from autosched.target.key import Target
from autosched.tuning.api import RecordToDB, close_measurer, default_measurer, open_db, register
from autosched.workload import Workload
from tuning_db import TuningDB
from tuning_db.types import DISQUALIFYING, MIN_VERIFIED, Record

DEFAULT_TOP = 5
"""Candidates re-measured by default: the served best and the few a re-measurement could promote."""


@dataclass(frozen=True)
class VerifiedSchedule:
    """How one candidate fared: `median` of this check's valid measurements (None if none was)."""

    steps_hash: str
    ok: bool
    median: float | None
    error: str
    n_valid: int
    verified: bool


@dataclass(frozen=True)
class VerifyReport:
    checked: tuple[VerifiedSchedule, ...]
    best: Record | None


def verify_schedules(db: TuningDB | str | None, workload: Workload, target: Target | str, *,
                     top: int = DEFAULT_TOP, repeats: int = MIN_VERIFIED, runner: Any = None,
                     job_id: str | None = None,
                     should_stop: Callable[[], bool] | None = None) -> VerifyReport:
    """Measure the `top` fastest schedules that are not ruled out `repeats` times each on this
    machine (or on `runner`, e.g. "ray"), store the results, and return how each fared and the
    best schedule the database now serves. Raises LookupError when there is nothing to verify."""
    if not isinstance(top, int) or top < 1:
        raise ValueError(f"top must be an integer >= 1, got {top!r}")
    if not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be an integer >= 1, got {repeats!r}")
    database = open_db(db)
    tgt = Target.parse(target)
    if runner is None and tgt.key != Target.host(tgt.kind).key:
        raise ValueError(f"target {tgt.key!r} is not this machine's ({Target.host(tgt.kind).key!r}); "
                         "verification measures here, so run it on a machine of that target")
    standings = database.standings(workload.key, tgt.key)
    candidates = sorted((s for s in standings if s.record is not None and s.cost is not None),
                        key=lambda s: (s.cost, s.steps_hash))[:top]
    if not candidates:
        raise LookupError(f"no schedule of workload {workload.name} (key {workload.key}) on target {tgt.key!r} "
                          "to verify")
    register(database, workload, tgt)
    steps = {s.steps_hash: s.record.steps_json for s in candidates}
    samples: dict[str, list[float]] = {h: [] for h in steps}
    errors: dict[str, str] = {}
    measurer = default_measurer(runner, None, [RecordToDB(database, job_id)], kind=tgt.kind)
    try:
        order = list(steps)
        for r in range(repeats):
            if should_stop is not None and should_stop():
                break
            live = [h for h in order if h not in errors or not errors[h].startswith("ruled out")]
            if not live:
                break
            live = live[r % len(live):] + live[: r % len(live)]  # rotate: none always goes first
            inputs = [MeasureInput(workload.key, workload.to_json(), tgt.key, steps[h]) for h in live]
            for h, res in zip(live, measurer.measure(inputs)):
                if res.ok:
                    samples[h].append(res.median)
                elif int(res.error_code) in DISQUALIFYING:
                    errors[h] = f"ruled out: {ErrorCode(res.error_code).name}: {res.error_msg[:300]}"
                else:
                    errors.setdefault(h, f"{ErrorCode(res.error_code).name}: {res.error_msg[:300]}")
    finally:
        close_measurer(measurer)
    checked = []
    for h in steps:
        st = database.standing(workload.key, tgt.key, h)
        checked.append(VerifiedSchedule(
            h, h not in errors, statistics.median(samples[h]) if samples[h] else None, errors.get(h, ""),
            st.n_valid if st else 0, bool(st and st.verified)))
    return VerifyReport(tuple(checked), database.best(workload.key, tgt.key))
