"""The versioned JSON-lines exchange format for records (no database code here).

    line 1:  {"format": "autosched-records", "version": 1}
    line n:  {"workload": {"key", "name", "spec", "flops"}, "target": {"key", "kind", "spec"},
              "steps": [...], "steps_hash": "...", "costs": [...], "error_code": 0, "error_msg": "",
              "build_seconds": 0.1, "run_seconds": 0.2, "host": "", "device": "", "worker_id": "",
              "created": "2026-12-02T12:00:00+00:00", "format_version": 1, "origin": ""}

Each line carries the workload and target it needs, so a file imports into an empty database and
lines can be split, concatenated or filtered with ordinary tools. Job ids are local to one
database and are not exported. `origin` is "" for a record measured by the exporting database
(older files lack it); the importer stores such a record under its own import origin, so an
imported record never counts as measured here. Parsing checks every field and raises ValueError
naming the line number and the field; the importer refuses that line and keeps the rest, while a
missing or foreign header refuses the whole file. `record_texts` reads lazily, one line at a time.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from tuning_db.canonical import canonical_json, steps_hash
from tuning_db.rows import TARGET_KEY_MAX, WORKLOAD_KEY_MAX, as_utc
from tuning_db.types import ORIGIN_LOCAL, Record, RecordIn, TargetInfo, WorkloadInfo

FORMAT = "autosched-records"
VERSION = 1
HEADER = {"format": FORMAT, "version": VERSION}

PathOrFile = str | os.PathLike[str] | IO[str]


@dataclass(frozen=True)
class ImportLine:
    """One validated record line: what to ensure (workload, target) and what to insert."""

    line_no: int
    workload_name: str
    workload_spec: dict[str, Any]
    workload_flops: float
    target_kind: str
    target_spec: dict[str, Any]
    record: RecordIn


@contextlib.contextmanager
def open_text(fp_or_path: PathOrFile, mode: str) -> Iterator[IO[str]]:
    """A text stream for a path (opened and closed here) or an already open file (left open)."""
    if isinstance(fp_or_path, str | os.PathLike):
        path = Path(fp_or_path)
        if "w" in mode:
            path.parent.mkdir(parents=True, exist_ok=True)
        with path.open(mode, encoding="utf-8", newline="\n") as f:
            yield f
    else:
        yield fp_or_path


def header_line() -> str:
    return json.dumps(HEADER, sort_keys=True) + "\n"


def encode_record(rec: Record, workload: WorkloadInfo, target: TargetInfo) -> str:
    obj = {
        "workload": {
            "key": workload.key,
            "name": workload.name,
            "spec": workload.spec,
            "flops": workload.flops,
        },
        "target": {"key": target.key, "kind": target.kind, "spec": target.spec},
        "steps": rec.steps,
        "steps_hash": rec.steps_hash,
        "costs": list(rec.costs),
        "error_code": rec.error_code,
        "error_msg": rec.error_msg,
        "build_seconds": rec.build_seconds,
        "run_seconds": rec.run_seconds,
        "host": rec.host,
        "device": rec.device,
        "worker_id": rec.worker_id,
        "created": rec.created.isoformat(),
        "format_version": rec.format_version,
        "origin": rec.origin,
    }
    return canonical_json(obj) + "\n"


class _Line:
    """Field access for one decoded line that names the line and field in every error."""

    def __init__(self, line_no: int, obj: Any, prefix: str = "") -> None:
        self.line_no, self.obj, self.prefix = line_no, obj, prefix

    def fail(self, field: str, why: str) -> ValueError:
        return ValueError(f"line {self.line_no}: field '{self.prefix}{field}': {why}")

    def get(self, field: str, types: type | tuple[type, ...], default: Any = ..., optional: bool = False) -> Any:
        if field not in self.obj:
            if default is not ...:
                return default
            raise self.fail(field, "missing")
        value = self.obj[field]
        if value is None and optional:
            return None
        is_bool = isinstance(value, bool)
        if not isinstance(value, types) or (is_bool and bool not in _as_tuple(types)):
            raise self.fail(field, f"expected {_type_names(types)}, got {type(value).__name__}")
        return value

    def sub(self, field: str) -> _Line:
        return _Line(self.line_no, self.get(field, dict), f"{self.prefix}{field}.")

    def key(self, field: str, max_len: int) -> str:
        value = self.get(field, str)
        if not value or len(value) > max_len:
            raise self.fail(field, f"must be 1..{max_len} characters")
        return value


def _as_tuple(types: type | tuple[type, ...]) -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)


def _type_names(types: type | tuple[type, ...]) -> str:
    return " or ".join(t.__name__ for t in _as_tuple(types))


def parse_header(text: str) -> None:
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"line 1: not a JSON header ({e.msg}); expected {HEADER}") from None
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        raise ValueError(f"line 1: field 'format': expected {FORMAT!r} header, got {text.strip()[:120]!r}")
    version = obj.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= VERSION:
        raise ValueError(f"line 1: field 'version': unsupported version {version!r} (this reader: 1..{VERSION})")


def parse_line(text: str, line_no: int) -> ImportLine:
    """Decode and check one record line (see the module docstring for the fields)."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"line {line_no}: invalid JSON ({e.msg} at column {e.colno})") from None
    except RecursionError:
        raise ValueError(f"line {line_no}: JSON nested too deeply to read") from None
    if not isinstance(obj, dict):
        raise ValueError(f"line {line_no}: expected a JSON object, got {type(obj).__name__}")
    line = _Line(line_no, obj)
    number = (int, float)
    w, t = line.sub("workload"), line.sub("target")
    workload_key, target_key = w.key("key", WORKLOAD_KEY_MAX), t.key("key", TARGET_KEY_MAX)
    steps = line.get("steps", (list, dict))
    try:
        digest = steps_hash(steps)
    except (TypeError, ValueError) as e:
        raise line.fail("steps", f"not a JSON value: {e}") from None
    stated = line.get("steps_hash", str, default=None)
    if stated is not None and stated != digest:
        raise line.fail("steps_hash", "does not match the sha256 of the canonical steps")
    costs = line.get("costs", list)
    if any(isinstance(c, bool) or not isinstance(c, number) for c in costs):
        raise line.fail("costs", "must be a list of numbers (seconds)")
    created_text = line.get("created", str, default=None, optional=True)
    created = None
    if created_text is not None:
        try:
            created = as_utc(datetime.fromisoformat(created_text))
        except ValueError:
            raise line.fail("created", f"not an ISO 8601 timestamp: {created_text!r}") from None
    record = RecordIn(
        workload_key=workload_key,
        target_key=target_key,
        steps=steps,
        costs=tuple(float(c) for c in costs),
        error_code=line.get("error_code", int),
        error_msg=line.get("error_msg", str, default=""),
        build_seconds=float(line.get("build_seconds", number, default=0.0)),
        run_seconds=float(line.get("run_seconds", number, default=0.0)),
        host=line.get("host", str, default=""),
        device=line.get("device", str, default=""),
        worker_id=line.get("worker_id", str, default=""),
        created=created,
        format_version=line.get("format_version", int, default=1),
        origin=line.get("origin", str, default=ORIGIN_LOCAL),
    )
    return ImportLine(
        line_no=line_no,
        workload_name=w.get("name", str, default=""),
        workload_spec=w.get("spec", dict),
        workload_flops=float(w.get("flops", number, default=0.0)),
        target_kind=t.get("kind", str),
        target_spec=t.get("spec", dict),
        record=record,
    )


def record_texts(fp: IO[str]) -> Iterator[tuple[int, str]]:
    """(line number, text) of each record line, read lazily; a bad or missing header raises
    ValueError before the first one (the whole stream is refused), blank lines are skipped."""
    seen_header = False
    for line_no, text in enumerate(fp, start=1):
        if not text.strip():
            continue
        if not seen_header:
            if line_no != 1:
                raise ValueError(f"line {line_no}: the header must be the first line")
            parse_header(text)
            seen_header = True
            continue
        yield line_no, text
    if not seen_header:
        raise ValueError(f"line 1: empty input, expected the header {HEADER}")


def read_lines(fp: IO[str]) -> Iterator[ImportLine]:
    """Validated record lines of a whole stream; the first bad line raises ValueError."""
    for line_no, text in record_texts(fp):
        yield parse_line(text, line_no)
