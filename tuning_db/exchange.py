"""Export and import of records as versioned JSON lines (format in `tuning_db.jsonl`).

Import streams: lines are read lazily and stored `IMPORT_BATCH` at a time, one transaction per
batch, so memory stays bounded whatever the file size and tuners writing to the same database wait
for one batch at most. Every line is checked (and passed to the caller's `validate`) or refused
with its line number and reason; the rest of the file is kept. Valid records need costs finite and
> 0, workload flops finite and >= 0 (a transpose has none; autosched checks they are the spec's),
text no NUL character. An imported record keeps its origin
(a record local to the exporting database gets the import's origin), so it never counts towards
verifying a schedule here. Exact duplicates (same workload, target, steps and costs), stored or
repeated in the file, are skipped. Only a bad header refuses the whole file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import Connection, Engine, Select

from tuning_db import jsonl, standings, store
from tuning_db.rows import SHORT_TEXT_MAX, check_key, check_number, check_text, record_row, spec_json, to_record, utcnow
from tuning_db.types import (
    MAX_REFUSED_REPORTED,
    ORIGIN_IMPORT,
    ORIGIN_LOCAL,
    ImportReport,
    RefusedLine,
    TargetInfo,
    WorkloadInfo,
)

#: Lines parsed, then stored in one transaction.
IMPORT_BATCH = 1000

Validator = Callable[[jsonl.ImportLine], None]


def export_records(
    engine: Engine,
    stmt: Select[Any],
    workloads: dict[str, WorkloadInfo],
    targets: dict[str, TargetInfo],
    fp_or_path: jsonl.PathOrFile,
) -> int:
    """Write the header and the records `stmt` selects, streaming; return how many were written."""
    n = 0
    with jsonl.open_text(fp_or_path, "w") as out, engine.connect() as conn:
        out.write(jsonl.header_line())
        for row in conn.execution_options(yield_per=store.BATCH).execute(stmt):
            rec = to_record(row)
            out.write(jsonl.encode_record(rec, workloads[rec.workload_key], targets[rec.target_key]))
            n += 1
    return n


def import_records(
    write_engine: Engine, fp_or_path: jsonl.PathOrFile, validate: Validator | None = None, origin: str = ORIGIN_IMPORT
) -> ImportReport:
    """Store the acceptable lines of a records file batch by batch; report what was refused and why."""
    check_text("origin", origin, SHORT_TEXT_MAX)
    if origin == ORIGIN_LOCAL:
        raise ValueError("origin of an import must not be local (''): imported records are not measured here")
    importer = _Importer(write_engine, validate, origin)
    with jsonl.open_text(fp_or_path, "r") as f:
        batch: list[_Accepted] = []
        for line_no, text in jsonl.record_texts(f):
            item = importer.check(line_no, text)
            if item is not None:
                batch.append(item)
            if len(batch) >= IMPORT_BATCH:
                importer.store(batch)
                batch = []
        importer.store(batch)
    return importer.report()


@dataclass(frozen=True)
class _Accepted:
    line: jsonl.ImportLine
    row: dict[str, Any]
    workload_spec: str
    target: tuple[str, str]


class _Importer:
    """The state of one import: counts, the first refusals, and the keys already ensured."""

    def __init__(self, write_engine: Engine, validate: Validator | None, origin: str) -> None:
        self.engine, self.validate, self.origin = write_engine, validate, origin
        self.now = utcnow()
        self.imported = self.duplicates = self.n_refused = 0
        self.refused: list[RefusedLine] = []
        self.workloads: dict[str, str] = {}  # key -> spec text, stored or matched already
        self.targets: dict[str, tuple[str, str]] = {}

    def refuse(self, line_no: int, reason: str) -> None:
        self.n_refused += 1
        if len(self.refused) < MAX_REFUSED_REPORTED:
            prefix = f"line {line_no}: "
            self.refused.append(RefusedLine(line_no, reason[len(prefix):] if reason.startswith(prefix) else reason))

    def check(self, line_no: int, text: str) -> _Accepted | None:
        """The line ready to store, or None after refusing it."""
        try:
            line = jsonl.parse_line(text, line_no)
            if line.record.origin == ORIGIN_LOCAL:
                line = replace(line, record=replace(line.record, origin=self.origin))
            check_number("workload flops", line.workload_flops, minimum=0.0)
            check_text("workload name", line.workload_name, SHORT_TEXT_MAX)
            check_key("target kind", line.target_kind, 32)
            item = _Accepted(line, record_row(line.record, self.now), spec_json("workload spec", line.workload_spec),
                             (line.target_kind, spec_json("target spec", line.target_spec)))
        except (ValueError, OverflowError) as e:  # OverflowError: an integer too big for a float
            self.refuse(line_no, str(e))
            return None
        if self.validate is not None:
            try:
                self.validate(line)
            except ValueError as e:
                self.refuse(line_no, str(e))
                return None
            except Exception as e:  # a replay that trips over planted steps refuses the line, not the file
                self.refuse(line_no, f"validator failed: {type(e).__name__}: {e}")
                return None
        return item

    def store(self, batch: list[_Accepted]) -> None:
        if not batch:
            return
        with self.engine.begin() as conn:
            rows = []
            for item in batch:
                try:
                    self._ensure_keys(conn, item)
                except ValueError as e:
                    self.refuse(item.line.line_no, str(e))
                else:
                    rows.append(item.row)
            fresh = _drop_duplicates(conn, rows)
            store.insert_records(conn, fresh, want_ids=False)
            standings.refresh(conn, standings.schedule_keys(fresh))
        self.imported += len(fresh)
        self.duplicates += len(rows) - len(fresh)

    def _ensure_keys(self, conn: Connection, item: _Accepted) -> None:
        """Register the line's workload and target unless this import already did (or matched them)."""
        ln, rec = item.line, item.line.record
        if self.workloads.get(rec.workload_key) != item.workload_spec:
            store.ensure_workload(conn, rec.workload_key, ln.workload_name, ln.workload_spec, ln.workload_flops)
            self.workloads[rec.workload_key] = item.workload_spec
        if self.targets.get(rec.target_key) != item.target:
            store.ensure_target(conn, rec.target_key, ln.target_kind, ln.target_spec)
            self.targets[rec.target_key] = item.target

    def report(self) -> ImportReport:
        return ImportReport(self.imported, self.duplicates, tuple(self.refused), self.n_refused)


def _drop_duplicates(conn: Connection, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows that are neither stored already (earlier batches included) nor repeated in this batch."""
    by_pair: dict[tuple[str, str], set[str]] = {}
    for r in rows:
        by_pair.setdefault((r["workload_key"], r["target_key"]), set()).add(r["steps_hash"])
    seen: set[tuple[str, str, str, str]] = set()
    for (wk, tk), hashes in by_pair.items():
        seen |= store.stored_identities(conn, wk, tk, hashes)
    fresh = []
    for r in rows:
        ident = (r["workload_key"], r["target_key"], r["steps_hash"], r["costs"])
        if ident not in seen:
            seen.add(ident)
            fresh.append(r)
    return fresh
