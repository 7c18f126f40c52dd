"""Conversions between the boundary dataclasses and table rows, with the input checks.

Every check raises ValueError naming the field, so a caller learns what was wrong without reading
a database error. Text (keys, names, messages, and every string inside a JSON spec or schedule)
must hold no NUL character: PostgreSQL refuses one with an error instead of storing it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from tuning_db.canonical import canonical_json, is_finite_number, median, parse_steps, sha256_text
from tuning_db.types import OK, JobInfo, Record, RecordIn, TargetInfo, WorkloadInfo

WORKLOAD_KEY_MAX = 64
TARGET_KEY_MAX = 128
SHORT_TEXT_MAX = 255


def utcnow() -> datetime:
    return datetime.now(UTC)


def as_utc(value: datetime) -> datetime:
    """Aware UTC datetime. SQLite hands timestamps back naive; they were stored as UTC."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


NUL = "\x00"


def check_key(field: str, value: Any, max_len: int) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{field} must be a non-empty str, got {value!r}")
    if len(value) > max_len:
        raise ValueError(f"{field} is longer than {max_len} characters: {value[:80]!r}...")
    if NUL in value:
        raise ValueError(f"{field} contains a NUL character: {value[:80]!r}")
    return value


def check_text(field: str, value: Any, max_len: int | None = None) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{field} must be a str, got {type(value).__name__}")
    if max_len is not None and len(value) > max_len:
        raise ValueError(f"{field} is longer than {max_len} characters")
    if NUL in value:
        raise ValueError(f"{field} contains a NUL character")
    return value


def check_number(field: str, value: Any, minimum: float | None = None, strict: bool = False) -> float:
    """A finite number; with `minimum`, at least it (`strict`: greater than it)."""
    if not is_finite_number(value):
        raise ValueError(f"{field} must be a finite number, got {value!r}")
    if minimum is not None and (value <= minimum if strict else value < minimum):
        raise ValueError(f"{field} must be {'>' if strict else '>='} {minimum:g}, got {value!r}")
    return float(value)


def check_json_text(field: str, value: Any, text: str) -> str:
    """`text`, the canonical JSON of `value`, unless a string in `value` holds a NUL character.

    json escapes NUL as \\u0000, so only a text containing that sequence needs the walk that names
    the offending string.
    """
    if "\\u0000" not in text:
        return text
    stack: list[tuple[str, Any]] = [(field, value)]
    while stack:
        path, v = stack.pop()
        if isinstance(v, str) and NUL in v:
            raise ValueError(f"{path} contains a NUL character")
        if isinstance(v, Mapping):
            for k, x in v.items():
                if isinstance(k, str) and NUL in k:
                    raise ValueError(f"{path} has a key with a NUL character: {k[:80]!r}")
                stack.append((f"{path}.{k}", x))
        elif isinstance(v, list | tuple):
            stack.extend((f"{path}[{i}]", x) for i, x in enumerate(v))
    return text


def check_int(field: str, value: Any, minimum: int = 0) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{field} must be an int >= {minimum}, got {value!r}")
    return value


def spec_json(field: str, spec: Any) -> str:
    """Canonical text of a JSON object (workload/target spec, job request)."""
    if not isinstance(spec, Mapping):
        raise ValueError(f"{field} must be a dict (JSON object), got {type(spec).__name__}")
    try:
        text = canonical_json(spec)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{field} is not JSON-serializable: {e}") from e
    return check_json_text(field, spec, text)


def costs_json(costs: tuple[float, ...]) -> str:
    return json.dumps(list(costs), allow_nan=False)


def record_row(rec: RecordIn, now: datetime) -> dict[str, Any]:
    """Row for `records` from a RecordIn: canonical steps and their hash, median or NULL."""
    if not isinstance(rec, RecordIn):
        raise ValueError(f"expected a RecordIn, got {type(rec).__name__}")
    check_key("workload_key", rec.workload_key, WORKLOAD_KEY_MAX)
    check_key("target_key", rec.target_key, TARGET_KEY_MAX)
    error_code = check_int("error_code", rec.error_code)
    try:
        steps = parse_steps(rec.steps)
        steps_text = canonical_json(steps)
    except (TypeError, ValueError) as e:
        raise ValueError(f"steps is not a JSON value: {e}") from e
    if not isinstance(steps, list | dict):  # a schedule is a list of steps (or an object holding them)
        raise ValueError(f"steps must be a JSON list or object, got {type(steps).__name__}")
    check_json_text("steps", steps, steps_text)
    try:
        raw = list(rec.costs)
    except TypeError:
        raise ValueError(f"costs must be a sequence of numbers, got {rec.costs!r}") from None
    if any(isinstance(c, bool) or not isinstance(c, int | float) for c in raw):
        raise ValueError(f"costs must be numbers (seconds), got {raw!r}")
    if error_code == OK:  # a cost of 0 or below would be served as the best (and divides GFLOPS by 0)
        if not raw or not all(math.isfinite(c) and c > 0 for c in raw):
            raise ValueError(f"costs: a valid record (error_code 0) needs non-empty finite costs > 0 seconds, "
                             f"got {raw!r}")
        costs = tuple(float(c) for c in raw)
        med: float | None = median(costs)
    else:  # a failed candidate has no timing; inf/nan placeholders carry no information
        costs = tuple(float(c) for c in raw if math.isfinite(c))
        med = None
    if rec.job_id is not None:
        check_key("job_id", rec.job_id, 36)
    created = now if rec.created is None else as_utc(rec.created)
    return {
        "workload_key": rec.workload_key,
        "target_key": rec.target_key,
        "steps": steps_text,
        "steps_hash": sha256_text(steps_text),
        "costs": costs_json(costs),
        "median": med,
        "error_code": error_code,
        "error_msg": check_text("error_msg", rec.error_msg),
        "build_seconds": check_number("build_seconds", rec.build_seconds),
        "run_seconds": check_number("run_seconds", rec.run_seconds),
        "host": check_text("host", rec.host, SHORT_TEXT_MAX),
        "device": check_text("device", rec.device, SHORT_TEXT_MAX),
        "worker_id": check_text("worker_id", rec.worker_id, SHORT_TEXT_MAX),
        "job_id": rec.job_id,
        "created": created,
        "format_version": check_int("format_version", rec.format_version, minimum=1),
        "origin": check_text("origin", rec.origin, SHORT_TEXT_MAX),
    }


def to_record(row: Any) -> Record:
    m = row._mapping
    return Record(
        id=int(m["id"]),
        workload_key=m["workload_key"],
        target_key=m["target_key"],
        steps_json=m["steps"],
        steps_hash=m["steps_hash"],
        costs=tuple(float(c) for c in json.loads(m["costs"])),
        median=None if m["median"] is None else float(m["median"]),
        error_code=int(m["error_code"]),
        error_msg=m["error_msg"],
        build_seconds=float(m["build_seconds"]),
        run_seconds=float(m["run_seconds"]),
        host=m["host"],
        device=m["device"],
        worker_id=m["worker_id"],
        job_id=m["job_id"],
        created=as_utc(m["created"]),
        format_version=int(m["format_version"]),
        origin=m["origin"],
    )


def to_workload(row: Any) -> WorkloadInfo:
    m = row._mapping
    return WorkloadInfo(
        key=m["key"],
        name=m["name"],
        spec=json.loads(m["spec"]),
        flops=float(m["flops"]),
        created=as_utc(m["created"]),
    )


def to_target(row: Any) -> TargetInfo:
    m = row._mapping
    return TargetInfo(key=m["key"], kind=m["kind"], spec=json.loads(m["spec"]), created=as_utc(m["created"]))


def to_job(row: Any) -> JobInfo:
    m = row._mapping
    return JobInfo(
        id=m["id"],
        state=m["state"],
        workload_key=m["workload_key"],
        target_key=m["target_key"],
        request=json.loads(m["request"]),
        trials_done=int(m["trials_done"]),
        best_median=None if m["best_median"] is None else float(m["best_median"]),
        error=m["error"],
        created=as_utc(m["created"]),
        updated=as_utc(m["updated"]),
        owner=m["owner"],
        cancelled_by=m["cancelled_by"],
    )
