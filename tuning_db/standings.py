"""The `schedules` summary: one row per (workload, target, schedule), exact under many writers.

Every transaction that inserts records calls `refresh` for the schedules it touched before it
commits. `refresh` takes each summary row's lock in one global order (PostgreSQL: the placeholder
INSERT ... ON CONFLICT and SELECT ... FOR UPDATE, sorted, so two writers cannot deadlock; SQLite:
the write transaction already holds the file lock), then recomputes the row from all the records
of its schedule with `ranking.summarize`. Under READ COMMITTED each statement after the lock sees
every record committed by the writers that held it before, so the last writer of a schedule always
leaves the row exact. The ranking reads (`served`, `one`) then never touch more records than the
representatives they return.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection, Integer, Select, bindparam, literal_column, select

from tuning_db import ranking
from tuning_db.models import records_table, schedules_table
from tuning_db.rows import to_record
from tuning_db.types import DISQUALIFYING, OK, Standing

R = records_table.c
S = schedules_table.c
_CHUNK = 500  # schedules per statement, well under every driver's parameter limit
_RELEVANT = sorted({OK, *DISQUALIFYING})
_SUMMARY_COLS = (
    S.steps_hash.label("s_steps_hash"),
    S.rank.label("s_rank"),
    S.cost.label("s_cost"),
    S.n_valid_local.label("s_n_valid_local"),
    S.n_valid_imported.label("s_n_valid_imported"),
    S.n_disqualifying.label("s_n_disqualifying"),
    S.reason.label("s_reason"),
)
_PAIR = (S.workload_key == bindparam("wk"), S.target_key == bindparam("tk"))
_JOINED = schedules_table.outerjoin(records_table, R.id == S.record_id)
_HASHES = bindparam("hashes", expanding=True)
# built once: the write path runs them in every record transaction
_LOCK = select(S.steps_hash).where(*_PAIR, S.steps_hash.in_(_HASHES)).order_by(S.steps_hash).with_for_update()
_RECORDS_OF = select(R.id, R.steps_hash, R.median, R.error_code, R.error_msg, R.origin).where(
    R.workload_key == bindparam("wk"), R.target_key == bindparam("tk"), R.steps_hash.in_(_HASHES),
    R.error_code.in_(_RELEVANT))
_UPDATE = schedules_table.update().where(
    S.workload_key == bindparam("b_wk"), S.target_key == bindparam("b_tk"), S.steps_hash == bindparam("b_h"))


def _insert_ignore(conn: Connection) -> Any:
    """INSERT ... ON CONFLICT DO NOTHING of a summary row, for the connection's dialect."""
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    return insert(schedules_table).on_conflict_do_nothing()


def refresh(conn: Connection, keys: Iterable[tuple[str, str, str]]) -> None:
    """Recompute the summary rows of the (workload, target, steps_hash) schedules in `keys`."""
    ordered = sorted(set(keys))
    for i in range(0, len(ordered), _CHUNK):
        _refresh_chunk(conn, ordered[i : i + _CHUNK])


def _refresh_chunk(conn: Connection, keys: list[tuple[str, str, str]]) -> None:
    placeholders = [
        {"workload_key": wk, "target_key": tk, "steps_hash": h, "rank": ranking.RANK_UNMEASURED, "cost": None,
         "record_id": None, "n_valid_local": 0, "n_valid_imported": 0, "n_disqualifying": 0, "reason": ""}
        for wk, tk, h in keys
    ]
    conn.execute(_insert_ignore(conn), placeholders)  # executemany, in key order
    by_pair: dict[tuple[str, str], list[str]] = {}
    for wk, tk, h in keys:
        by_pair.setdefault((wk, tk), []).append(h)
    updates = []
    for (wk, tk), hashes in by_pair.items():  # sorted: `keys` is
        params = {"wk": wk, "tk": tk, "hashes": hashes}
        if conn.dialect.name == "postgresql":
            conn.execute(_LOCK, params).all()
        groups: dict[str, list[Any]] = {h: [] for h in hashes}
        for row in conn.execute(_RECORDS_OF, params):
            groups[row.steps_hash].append(row)
        for h, rows in groups.items():
            s = ranking.summarize(rows)
            updates.append({"b_wk": wk, "b_tk": tk, "b_h": h, "rank": s.rank, "cost": s.cost, "record_id": s.record_id,
                            "n_valid_local": s.n_valid_local, "n_valid_imported": s.n_valid_imported,
                            "n_disqualifying": s.n_disqualifying, "reason": s.reason})
    conn.execute(_UPDATE, updates)


def served(limit: bool) -> Select[Any]:
    """The servable schedules of (:wk, :tk) with their representative records, best first: verified
    by cost, then unverified by cost (ties to the oldest record). One range of `ix_schedules_best`."""
    stmt = (select(records_table, *_SUMMARY_COLS).select_from(_JOINED)
            .where(*_PAIR, S.rank <= literal_column(str(ranking.SERVABLE_MAX_RANK)))
            .order_by(S.rank, S.cost, S.record_id))
    return stmt.limit(bindparam("n", type_=Integer)) if limit else stmt


def disqualified() -> Select[Any]:
    """The disqualified schedules of (:wk, :tk), by cost (those without a valid record last)."""
    return (select(records_table, *_SUMMARY_COLS).select_from(_JOINED)
            .where(*_PAIR, S.rank == literal_column(str(ranking.RANK_DISQUALIFIED)))
            .order_by(S.cost.is_(None), S.cost, S.record_id, S.steps_hash))


def one() -> Select[Any]:
    """The summary of schedule :h on (:wk, :tk)."""
    return select(records_table, *_SUMMARY_COLS).select_from(_JOINED).where(*_PAIR, S.steps_hash == bindparam("h"))


def pairs(target_key: str | None) -> Select[Any]:
    """(workload, target) pairs that have a servable schedule."""
    stmt = select(S.workload_key, S.target_key).distinct().where(
        S.rank <= literal_column(str(ranking.SERVABLE_MAX_RANK)))
    return stmt if target_key is None else stmt.where(S.target_key == target_key)


def to_standing(row: Any) -> Standing:
    m = row._mapping
    return Standing(
        steps_hash=m["s_steps_hash"],
        record=None if m["id"] is None else to_record(row),
        cost=None if m["s_cost"] is None else float(m["s_cost"]),
        n_valid=int(m["s_n_valid_local"]),
        n_imported=int(m["s_n_valid_imported"]),
        n_disqualifying=int(m["s_n_disqualifying"]),
        reason=m["s_reason"],
    )


def schedule_keys(rows: Iterable[dict[str, Any]]) -> set[tuple[str, str, str]]:
    """The schedules a batch of record rows touches."""
    return {(r["workload_key"], r["target_key"], r["steps_hash"]) for r in rows}

