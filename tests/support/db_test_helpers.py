"""Small builders shared by the tuning_db tests."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tuning_db import Record, RecordIn, TuningDB

W1 = "a" * 64
W2 = "b" * 64
CPU = "cpu-epyc"
GPU = "cuda-h200"


def matmul_spec(n: int) -> dict[str, Any]:
    return {"op": "matmul", "args": [n, n, n], "dtypes": ["float32"] * 3}


def register(db: TuningDB, workloads: tuple[str, ...] = (W1, W2), targets: tuple[str, ...] = (CPU, GPU)) -> None:
    for i, w in enumerate(workloads):
        db.ensure_workload(w, f"matmul{i}", matmul_spec(64 * (i + 1)), 2.0 * (64 * (i + 1)) ** 3)
    for t in targets:
        db.ensure_target(t, "cuda" if t.startswith("cuda") else "cpu", {"name": t, "cores": 2})


def steps(i: int) -> list[dict[str, Any]]:
    """A distinct, plausible schedule for each `i`."""
    return [
        {"kind": "split", "stage": "C", "loop": "i", "factors": [i + 1, 8], "version": 1},
        {"kind": "parallel", "stage": "C", "loop": "i.outer", "version": 1},
    ]


def rec(wk: str, tk: str, i: int, median: float | None, **kw: Any) -> RecordIn:
    """A RecordIn with three costs whose median is `median` (None: a failed candidate)."""
    if median is None:
        code = kw.pop("error_code", 2)
        return RecordIn(wk, tk, steps(i), costs=(), error_code=code, error_msg="boom", **kw)
    return RecordIn(wk, tk, steps(i), costs=(median * 1.1, median, median * 0.95), host="h1", **kw)


def strip_id(r: Record) -> Record:
    """A record without its database-local identity (id, job), to compare across databases."""
    return replace(r, id=0, job_id=None)
