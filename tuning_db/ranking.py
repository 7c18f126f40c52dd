"""How a schedule is judged from its records: the rules `best`, `top_k` and `standings` serve.

1. Disqualified for good: a schedule with ANY record whose error code is in `DISQUALIFYING`
   (runtime error, wrong answer, worker crashed) is never served, however fast its valid records:
   a racy kernel is sometimes right and fast, and that record is luck.
2. Verified: at least `MIN_VERIFIED` valid measurements made here (origin local). Verified
   schedules rank before unverified ones; an unverified schedule is served only when no schedule
   of the (workload, target) is verified, and callers show it as unverified.
3. Cost: the upper median of the medians of a verified schedule's *local* valid records (imported
   records, planted or not, cannot move it), of all valid records of any other schedule. On a
   shared machine one measurement can be lucky by 20-50%, and the fastest single record is then the
   luckiest, not the fastest schedule (docs/decisions/verify-by-median.md). The cost is always one
   stored record's median, so what `best()` returns is a real measurement with its costs and host.

The rules are applied here, on one schedule's records, and the result is stored per schedule in
the `schedules` table in the transaction that inserts the records (`tuning_db.standings`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tuning_db.types import DISQUALIFYING, DISQUALIFYING_NAMES, MIN_VERIFIED, OK, ORIGIN_LOCAL

RANK_VERIFIED = 0
RANK_UNVERIFIED = 1
RANK_DISQUALIFIED = 2
RANK_UNMEASURED = 3  # no valid record (only failures that do not disqualify, e.g. timeouts)
#: Ranks a schedule may be served with.
SERVABLE_MAX_RANK = RANK_UNVERIFIED


@dataclass(frozen=True)
class Summary:
    """One schedule's row of the `schedules` table."""

    rank: int
    cost: float | None
    record_id: int | None
    n_valid_local: int
    n_valid_imported: int
    n_disqualifying: int
    reason: str


def upper_median(values: Sequence[Any]) -> Any:
    """The rule: the middle of an odd count, the higher middle of an even one."""
    return sorted(values)[len(values) // 2]


def representative(records: Sequence[Any]) -> Any:
    """The record that stands for one schedule: upper median by (median, id)."""
    _, _, i = upper_median([(r.median, r.id, i) for i, r in enumerate(records)])
    return records[i]


def disqualifying_reason(error_code: int, error_msg: str) -> str:
    return f"{DISQUALIFYING_NAMES.get(error_code, str(error_code))}: {error_msg}"


def summarize(records: Sequence[Any]) -> Summary:
    """The standing of one schedule from all its records (each with `id`, `median`, `error_code`,
    `error_msg`, `origin`); records with other error codes are ignored."""
    valid = [r for r in records if r.error_code == OK]
    local = [r for r in valid if r.origin == ORIGIN_LOCAL]
    bad = [r for r in records if r.error_code in DISQUALIFYING]
    first_bad = min(bad, key=lambda r: r.id) if bad else None
    pool = local if len(local) >= MIN_VERIFIED else valid
    rep = representative(pool) if pool else None
    if bad:
        rank = RANK_DISQUALIFIED
    elif rep is None:
        rank = RANK_UNMEASURED
    else:
        rank = RANK_VERIFIED if len(local) >= MIN_VERIFIED else RANK_UNVERIFIED
    return Summary(
        rank=rank,
        cost=None if rep is None else float(rep.median),
        record_id=None if rep is None else int(rep.id),
        n_valid_local=len(local),
        n_valid_imported=len(valid) - len(local),
        n_disqualifying=len(bad),
        reason="" if first_bad is None else disqualifying_reason(first_bad.error_code, first_bad.error_msg),
    )
