"""Statements that run on a caller's open connection, so several can share one transaction.

`TuningDB` composes these into its public methods; `exchange` uses them to import a file batch by
batch, one transaction per batch.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Connection, literal_column, select

from tuning_db.models import jobs_table, records_table, targets_table, workloads_table
from tuning_db.rows import (
    SHORT_TEXT_MAX,
    TARGET_KEY_MAX,
    WORKLOAD_KEY_MAX,
    check_key,
    check_number,
    check_text,
    spec_json,
    to_target,
    to_workload,
    utcnow,
)
from tuning_db.types import TargetInfo, WorkloadInfo

R = records_table.c
#: `error_code = 0` as a literal, not a bound parameter, so both planners match the partial index.
OK_ONLY = R.error_code == literal_column("0")
BATCH = 1000
_IN_CHUNK = 500  # keys per IN (...) list, well under every driver's parameter limit


def insert_ignore(conn: Connection, table: Any, values: dict[str, Any]) -> None:
    """INSERT ... ON CONFLICT DO NOTHING: idempotent and race-free for concurrent writers."""
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    elif conn.dialect.name == "sqlite":
        from sqlalchemy.dialects.sqlite import insert
    else:  # pragma: no cover - only the two supported backends are tested
        raise NotImplementedError(f"unsupported database dialect {conn.dialect.name!r}")
    conn.execute(insert(table).values(**values).on_conflict_do_nothing())


def missing_keys(conn: Connection, column: Any, keys: Iterable[str]) -> list[str]:
    """The keys (sorted) that do not appear in `column`."""
    wanted = sorted(set(keys))
    found: set[str] = set()
    for i in range(0, len(wanted), _IN_CHUNK):
        found.update(conn.execute(select(column).where(column.in_(wanted[i : i + _IN_CHUNK]))).scalars())
    return [k for k in wanted if k not in found]


def ensure_workload(conn: Connection, key: str, name: str, spec: Any, flops: Any) -> WorkloadInfo:
    """Insert the workload unless present; a different spec under the same key raises ValueError.

    Flops may be 0 here (a transpose or copy computes nothing); imports require them > 0.
    """
    values = {
        "key": check_key("workload key", key, WORKLOAD_KEY_MAX),
        "name": check_text("workload name", name, SHORT_TEXT_MAX),
        "spec": spec_json("workload spec", spec),
        "flops": check_number("workload flops", flops, minimum=0.0),
        "created": utcnow(),
    }
    insert_ignore(conn, workloads_table, values)
    row = conn.execute(select(workloads_table).where(workloads_table.c.key == key)).one()
    if row.spec != values["spec"]:
        raise ValueError(f"workload {key!r} is already stored with a different spec")
    return to_workload(row)


def ensure_target(conn: Connection, key: str, kind: str, spec: Any) -> TargetInfo:
    """Insert the target unless present; a different kind or spec under the same key raises ValueError."""
    values = {
        "key": check_key("target key", key, TARGET_KEY_MAX),
        "kind": check_key("target kind", kind, 32),
        "spec": spec_json("target spec", spec),
        "created": utcnow(),
    }
    insert_ignore(conn, targets_table, values)
    row = conn.execute(select(targets_table).where(targets_table.c.key == key)).one()
    if row.spec != values["spec"] or row.kind != kind:
        raise ValueError(f"target {key!r} is already stored with a different kind or spec")
    return to_target(row)


def check_references(conn: Connection, rows: Sequence[dict[str, Any]]) -> None:
    """ValueError naming every unknown workload, target or job a batch of rows refers to.

    The foreign keys would reject them too, but with a message that names neither key nor cure.
    """
    checks = [
        ("workload", workloads_table.c.key, "workload_key", "ensure_workload"),
        ("target", targets_table.c.key, "target_key", "ensure_target"),
        ("job", jobs_table.c.id, "job_id", "create_job"),
    ]
    for what, column, field, how in checks:
        missing = missing_keys(conn, column, (r[field] for r in rows if r.get(field) is not None))
        if missing:
            raise ValueError(f"unknown {what} key(s) {missing}: register them first with {how}()")


def insert_records(conn: Connection, rows: Sequence[dict[str, Any]], want_ids: bool = True) -> list[int]:
    """Insert record rows in batches; their ids in input order (empty when `want_ids` is False).

    Ids need INSERT ... RETURNING with the order guaranteed, which SQLAlchemy does with multi-row
    statements that cost more client time; a bulk import that needs no ids uses plain executemany
    (psycopg pipelines it), several times faster on PostgreSQL.
    """
    ids: list[int] = []
    stmt = records_table.insert()
    for i in range(0, len(rows), BATCH):
        chunk = list(rows[i : i + BATCH])
        if want_ids:
            ids.extend(conn.execute(stmt.returning(R.id, sort_by_parameter_order=True), chunk).scalars())
        else:
            conn.execute(stmt, chunk)
    return ids


def stored_identities(
    conn: Connection, workload_key: str, target_key: str, hashes: Iterable[str]
) -> set[tuple[str, str, str, str]]:
    """(workload, target, steps_hash, costs) of stored records among `hashes`: for deduplication."""
    wanted = sorted(set(hashes))
    out: set[tuple[str, str, str, str]] = set()
    for i in range(0, len(wanted), _IN_CHUNK):
        stmt = select(R.steps_hash, R.costs).where(
            R.workload_key == workload_key,
            R.target_key == target_key,
            R.steps_hash.in_(wanted[i : i + _IN_CHUNK]),
        )
        out.update((workload_key, target_key, h, c) for h, c in conn.execute(stmt))
    return out
