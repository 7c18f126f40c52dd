"""Export and import of records as versioned JSON lines (format in `tuning_db.jsonl`).

Import is all or nothing: the whole file is read and checked before the first write, then every
workload, target and record goes in within one transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, Engine, Select

from tuning_db import jsonl, store
from tuning_db.rows import record_row, spec_json, to_record, utcnow
from tuning_db.types import TargetInfo, WorkloadInfo


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


def import_records(write_engine: Engine, fp_or_path: jsonl.PathOrFile) -> int:
    """Check every line, then store the new records in one transaction; return how many were new."""
    with jsonl.open_text(fp_or_path, "r") as f:
        lines = list(jsonl.read_lines(f))
    now = utcnow()
    rows: list[dict[str, Any]] = []
    for ln in lines:
        try:
            rows.append(record_row(ln.record, now))
        except ValueError as e:
            raise ValueError(f"line {ln.line_no}: {e}") from None
    with write_engine.begin() as conn:
        _ensure_keys(conn, lines)
        fresh = _drop_duplicates(conn, rows)
        store.insert_records(conn, fresh, want_ids=False)
    return len(fresh)


def _ensure_keys(conn: Connection, lines: Sequence[jsonl.ImportLine]) -> None:
    """Register each workload and target once; a key whose spec changes within the file is an error."""
    workloads: dict[str, str] = {}
    targets: dict[str, tuple[str, str]] = {}
    for ln in lines:
        wkey, wspec = ln.record.workload_key, spec_json("workload spec", ln.workload_spec)
        tkey, tval = ln.record.target_key, (ln.target_kind, spec_json("target spec", ln.target_spec))
        try:
            if wkey not in workloads:
                store.ensure_workload(conn, wkey, ln.workload_name, ln.workload_spec, ln.workload_flops)
                workloads[wkey] = wspec
            elif workloads[wkey] != wspec:
                raise ValueError(f"workload {wkey!r} appears earlier in the file with a different spec")
            if tkey not in targets:
                store.ensure_target(conn, tkey, ln.target_kind, ln.target_spec)
                targets[tkey] = tval
            elif targets[tkey] != tval:
                raise ValueError(f"target {tkey!r} appears earlier in the file with a different kind/spec")
        except ValueError as e:
            raise ValueError(f"line {ln.line_no}: {e}") from None


def _drop_duplicates(conn: Connection, rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows that are neither stored already nor repeated earlier in the file."""
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
