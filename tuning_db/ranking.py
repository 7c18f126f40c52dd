"""How the best schedules are chosen from the records: a schedule measured more than once (a tuner
re-measuring its top candidates, a resumed or repeated run) is judged by all of its measurements.

Why: on a shared machine one measurement can be lucky, and the fastest single record is then the
luckiest, not the fastest schedule (see docs/decisions/verify-by-median.md). Each
schedule's cost is the upper median of its records' medians: the one record for a schedule measured
once, the slower of two, the middle of three. It is always one of the stored records, so what
`best()` returns is a real measurement with its costs, host and time.

The fastest records are read in a window by the index on (workload, target, median); the window
grows until the k-th best schedule is no slower than the window's slowest record, so a schedule
outside it (whose every record is slower) cannot be better: the answer is exact.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

BEST_WINDOW = 8
"""Records read first (at least twice k); doubled while the answer is not yet certain."""


def first_window(k: int) -> int:
    """Records read by the first query for the `k` best schedules."""
    return max(BEST_WINDOW, 2 * k)


def upper_median(values: Sequence[Any]) -> Any:
    """The rule: the middle of an odd count, the higher middle of an even one."""
    return sorted(values)[len(values) // 2]


def representative(records: Sequence[Any]) -> Any:
    """The record that stands for one schedule: upper median by (median, id)."""
    _, _, i = upper_median([(r.median, r.id, i) for i, r in enumerate(records)])
    return records[i]


def _hashes(records: Iterable[Any]) -> Iterable[str]:
    return (r.steps_hash for r in records)


def best_schedules(fastest: Callable[[int], list[Any]], all_of: Callable[[Iterable[str]], list[Any]],
                   k: int) -> list[Any]:
    """The `k` best schedules' representative records, fastest first.

    `fastest(n)`: the n valid records with the lowest medians (ascending, ties by id);
    `all_of(hashes)`: every valid record of those schedules. Records need `id`, `steps_hash` and
    `median`; when those of `fastest` also carry `n_records` (valid records of their schedule) and
    the window already holds all of them, `all_of` is not asked.
    """
    if k <= 0:
        return []
    window = first_window(k)
    while True:
        head = fastest(window)
        if not head:
            return []
        groups: dict[str, list[Any]] = {}
        for rec in head:
            groups.setdefault(rec.steps_hash, []).append(rec)
        if not all(len(g) == getattr(g[0], "n_records", -1) for g in groups.values()):
            groups = {}
            for rec in all_of(set(_hashes(head))):
                groups.setdefault(rec.steps_hash, []).append(rec)
        reps = sorted((representative(g) for g in groups.values()), key=lambda r: (r.median, r.id))[:k]
        exhausted = len(head) < window
        if exhausted or (len(reps) == k and reps[-1].median <= head[-1].median):
            return reps
        window *= 2
