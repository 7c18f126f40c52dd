"""A brute-force reference for `TuningDB.standings`, written from the rules, not from tuning_db's code.

Rules: any record with error code 4, 6 or 7 disqualifies its schedule; a schedule is verified with
at least 3 valid local records (origin ""); a verified schedule costs the upper median of its local
valid medians, any other that of all its valid medians (ties by record id); verified schedules come
first, then unverified, each by (cost, record id), then the disqualified ones.
"""

from __future__ import annotations

from collections.abc import Iterable

from tuning_db import Record, Standing

NAMES = {4: "RUNTIME_ERROR", 6: "WRONG_ANSWER", 7: "WORKER_CRASHED"}

#: (steps_hash, representative record id, cost, n_valid local, n_imported, n_disqualifying, reason)
Row = tuple[str, int | None, float | None, int, int, int, str]


def expected_standings(records: Iterable[Record], include_disqualified: bool = True) -> list[Row]:
    """The standings of one (workload, target) computed from all its records, in serving order."""
    by_hash: dict[str, list[Record]] = {}
    for r in records:
        by_hash.setdefault(r.steps_hash, []).append(r)
    rows: list[tuple[tuple, Row]] = []
    for h, rs in by_hash.items():
        valid = sorted((r.median, r.id) for r in rs if r.error_code == 0)
        local = sorted((r.median, r.id) for r in rs if r.error_code == 0 and r.origin == "")
        bad = sorted((r.id, r.error_code, r.error_msg) for r in rs if r.error_code in NAMES)
        pool = local if len(local) >= 3 else valid
        rep = pool[len(pool) // 2] if pool else None
        if rep is None and not bad:
            continue  # only failures that do not disqualify: not listed
        reason = f"{NAMES[bad[0][1]]}: {bad[0][2]}" if bad else ""
        group = 2 if bad else 0 if len(local) >= 3 else 1
        if group == 2 and not include_disqualified:
            continue
        cost = None if rep is None else rep[0]
        key = (group, cost is None, cost or 0.0, rep[1] if rep else 0, h)
        rows.append((key, (h, None if rep is None else rep[1], cost, len(local), len(valid) - len(local), len(bad),
                           reason)))
    return [row for _, row in sorted(rows)]


def as_rows(standings: Iterable[Standing]) -> list[Row]:
    return [(s.steps_hash, None if s.record is None else s.record.id, s.cost, s.n_valid, s.n_imported,
             s.n_disqualifying, s.reason) for s in standings]
