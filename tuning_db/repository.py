"""`TuningDB`: the typed repository over the tuning database (records, workloads, targets, jobs).

Everything goes through SQLAlchemy Core on short-lived connections; callers get frozen dataclasses
(`tuning_db.types`), never rows or ORM objects. Writes are single transactions that are safe with
many concurrent writers (see `tuning_db.engine`); idempotent inserts use ON CONFLICT DO NOTHING so
two tuners registering the same workload at once both succeed.

What is served follows `tuning_db.ranking`: a schedule with any wrong-answer, runtime-error or
crashed record is never served; a schedule is verified with `MIN_VERIFIED` valid local
measurements, and verified schedules are served before unverified ones, each by the upper median
of its measurements. Every record insert keeps the per-schedule summary (`tuning_db.standings`)
exact in its own transaction, so `best` reads one index range of it and one record.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Select, func, select

from tuning_db import exchange, jsonl, standings, store
from tuning_db import jobs as job_rules
from tuning_db.engine import make_engine, read_engine, write_engine
from tuning_db.migrate import ensure_schema
from tuning_db.models import jobs_table, records_table, targets_table, workloads_table
from tuning_db.rows import (
    SHORT_TEXT_MAX,
    check_key,
    check_text,
    record_row,
    spec_json,
    to_job,
    to_record,
    to_target,
    to_workload,
    utcnow,
)
from tuning_db.settings import DBSettings
from tuning_db.types import (
    ORIGIN_IMPORT,
    ImportReport,
    JobInfo,
    JobState,
    Record,
    RecordIn,
    RecordOutcome,
    Standing,
    TargetInfo,
    WorkloadInfo,
)

R = records_table.c
_OK = store.OK_ONLY


class TuningDB:
    """Repository of measurements and the best schedule per (workload key, target key).

    `TuningDB()` opens the default SQLite file (`~/.cache/autosched/tuning.db`); pass a URL or a
    `DBSettings` (e.g. from `db_settings_from_env()`) for anything else. Opening brings the schema
    to the newest Alembic revision (`migrate=False` skips that, for tools that manage it).
    """

    def __init__(self, url: str | DBSettings | None = None, *, migrate: bool = True) -> None:
        self.settings = url if isinstance(url, DBSettings) else DBSettings() if url is None else DBSettings(url)
        self.engine = make_engine(self.settings)
        self._writer = write_engine(self.engine)
        self._reader = read_engine(self.engine)
        if migrate:
            ensure_schema(self.engine)
        # the hot query: the k best servable schedules' summary rows and representative records
        self._best = standings.served(limit=True)
        self._served_all = standings.served(limit=False)
        self._disqualified = standings.disqualified()
        self._one = standings.one()

    def __repr__(self) -> str:
        return f"TuningDB({self.engine.url.render_as_string(hide_password=True)!r})"

    def close(self) -> None:
        """Close pooled connections (the object must not be used afterwards)."""
        self.engine.dispose()

    def __enter__(self) -> TuningDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- workloads and targets -------------------------------------------------------------

    def ensure_workload(self, key: str, name: str, spec: dict[str, Any], flops: float) -> WorkloadInfo:
        """Store a workload unless its key is already there; return what is stored.

        A stored workload is never overwritten. The same key with a different spec is a collision
        (or corruption) and raises ValueError.
        """
        with self._writer.begin() as conn:
            return store.ensure_workload(conn, key, name, spec, flops)

    def ensure_target(self, key: str, kind: str, spec: dict[str, Any]) -> TargetInfo:
        """Store a target unless its key is already there; same rules as `ensure_workload`."""
        with self._writer.begin() as conn:
            return store.ensure_target(conn, key, kind, spec)

    def workload(self, key: str) -> WorkloadInfo | None:
        with self._reader.connect() as conn:
            row = conn.execute(select(workloads_table).where(workloads_table.c.key == key)).first()
        return None if row is None else to_workload(row)

    def target(self, key: str) -> TargetInfo | None:
        with self._reader.connect() as conn:
            row = conn.execute(select(targets_table).where(targets_table.c.key == key)).first()
        return None if row is None else to_target(row)

    def workloads(self) -> list[WorkloadInfo]:
        with self._reader.connect() as conn:
            return [to_workload(r) for r in conn.execute(select(workloads_table).order_by("key"))]

    def targets(self) -> list[TargetInfo]:
        with self._reader.connect() as conn:
            return [to_target(r) for r in conn.execute(select(targets_table).order_by("key"))]

    # ---- records -----------------------------------------------------------------------------

    def commit_records(self, records: Sequence[RecordIn]) -> list[int]:
        """Store measurements in one transaction (all or none); return their ids in input order.

        Raises ValueError (nothing stored) naming the record and field for a bad field (a valid
        record's costs must be finite and > 0; text must hold no NUL), or naming an unknown
        workload, target or job. The touched schedules' standings are updated in the same
        transaction.
        """
        now = utcnow()
        rows = []
        for i, rec in enumerate(records):
            try:
                rows.append(record_row(rec, now))
            except ValueError as e:
                raise ValueError(f"record {i}: {e}") from None
        if not rows:
            return []
        with self._writer.begin() as conn:
            store.check_references(conn, rows)
            ids = store.insert_records(conn, rows)
            standings.refresh(conn, standings.schedule_keys(rows))
            return ids

    def commit_record(self, record: RecordIn) -> int:
        """Store one measurement; return its id."""
        return self.commit_records([record])[0]

    def best(self, workload_key: str, target_key: str) -> Record | None:
        """The best schedule's representative record, or None (see `tuning_db.ranking`).

        Never a disqualified schedule; the fastest verified schedule when there is one, else the
        fastest unverified one (check `standing(...).verified` to tell callers). One index seek.
        """
        top = self.top_k(workload_key, target_key, 1)
        return top[0] if top else None

    def top_k(self, workload_key: str, target_key: str, k: int) -> list[Record]:
        """The `k` best schedules, one record each (see `best`): verified by cost, then unverified."""
        return [s.record for s in self.standings(workload_key, target_key, k) if s.record is not None]

    def standings(
        self, workload_key: str, target_key: str, k: int | None = None, *, include_disqualified: bool = False
    ) -> list[Standing]:
        """Where the schedules of (workload, target) stand, in `top_k` order (at most `k` of them);
        with `include_disqualified` the disqualified ones follow, by cost. Schedules with no valid
        record and no disqualifying one (only timeouts, say) are not listed; `standing` finds them."""
        if k is not None and (not isinstance(k, int) or isinstance(k, bool) or k < 0):
            raise ValueError(f"k must be an int >= 0 or None, got {k!r}")
        if k == 0:
            return []
        params: dict[str, Any] = {"wk": workload_key, "tk": target_key}
        with self._reader.connect() as conn:
            if k is None:
                rows = list(conn.execute(self._served_all, params))
            else:
                rows = list(conn.execute(self._best, {**params, "n": k}))
            if include_disqualified and (k is None or len(rows) < k):
                bad = conn.execute(self._disqualified, params)
                rows += list(bad) if k is None else bad.fetchmany(k - len(rows))
        return [standings.to_standing(r) for r in rows]

    def standing(self, workload_key: str, target_key: str, steps_hash: str) -> Standing | None:
        """The standing of one schedule (any schedule with a record), or None if it has none."""
        with self._reader.connect() as conn:
            row = conn.execute(self._one, {"wk": workload_key, "tk": target_key, "h": steps_hash}).first()
        return None if row is None else standings.to_standing(row)

    def rebuild_standings(self, workload_key: str | None = None, target_key: str | None = None) -> int:
        """Recompute the per-schedule standings from the records (all, or one workload/target's);
        return how many schedules. For tools that bulk-load `records` with raw SQL, bypassing
        `commit_records`; safe while tuners write (each batch of schedules is locked as they are)."""
        stmt = self._filter(select(R.workload_key, R.target_key, R.steps_hash).distinct(),
                            workload_key, target_key, False)
        with self._reader.connect() as conn:
            keys = sorted(tuple(k) for k in conn.execute(stmt))
        for i in range(0, len(keys), store.BATCH):
            with self._writer.begin() as conn:
                standings.refresh(conn, keys[i : i + store.BATCH])
        return len(keys)

    def measured_step_hashes(self, workload_key: str, target_key: str) -> set[str]:
        """Hashes of every schedule already measured (valid or failed): a resumed tuner skips them."""
        stmt = select(R.steps_hash).where(R.workload_key == workload_key, R.target_key == target_key)
        with self._reader.connect() as conn:
            return set(conn.execute(stmt).scalars())

    def _filter(
        self,
        stmt: Select[Any],
        workload_key: str | None,
        target_key: str | None,
        ok_only: bool,
        job_id: str | None = None,
    ) -> Select[Any]:
        if workload_key is not None:
            stmt = stmt.where(R.workload_key == workload_key)
        if target_key is not None:
            stmt = stmt.where(R.target_key == target_key)
        if job_id is not None:
            stmt = stmt.where(R.job_id == job_id)
        return stmt.where(_OK) if ok_only else stmt

    def count_records(
        self,
        workload_key: str | None = None,
        target_key: str | None = None,
        ok_only: bool = False,
        job_id: str | None = None,
    ) -> int:
        """How many records match: all of them, or those of a workload, target and/or job (`ok_only`:
        valid measurements only)."""
        stmt = self._filter(
            select(func.count()).select_from(records_table), workload_key, target_key, ok_only, job_id
        )
        with self._reader.connect() as conn:
            return int(conn.execute(stmt).scalar_one())

    def record_outcomes(self, job_id: str) -> list[RecordOutcome]:
        """The outcome (id, median, error code) of every record job `job_id` stored, in insertion
        order; [] for an unknown job. Reads no schedules or costs, so a long job's tuning curve
        stays cheap (one range of `ix_records_job`)."""
        stmt = select(R.id, R.median, R.error_code).where(R.job_id == job_id).order_by(R.id)
        with self._reader.connect() as conn:
            return [RecordOutcome(int(i), m, int(e)) for i, m, e in conn.execute(stmt)]

    def records(
        self,
        workload_key: str | None = None,
        target_key: str | None = None,
        ok_only: bool = False,
        limit: int | None = None,
    ) -> list[Record]:
        """Records in insertion order, optionally filtered and limited."""
        stmt = self._filter(select(records_table), workload_key, target_key, ok_only).order_by(R.id)
        if limit is not None:
            if not isinstance(limit, int) or limit < 0:
                raise ValueError(f"limit must be an int >= 0 or None, got {limit!r}")
            stmt = stmt.limit(limit)
        with self._reader.connect() as conn:
            return [to_record(r) for r in conn.execute(stmt)]

    def best_per_workload(self, target_key: str | None = None) -> list[Record]:
        """The best record (as `best` chooses it) of every (workload, target) pair that has a servable
        schedule, ordered by workload then target key."""
        with self._reader.connect() as conn:
            pairs = sorted(tuple(p) for p in conn.execute(standings.pairs(target_key)))
        return [rec for wk, tk in pairs if (rec := self.best(wk, tk)) is not None]

    # ---- jobs --------------------------------------------------------------------------------

    def create_job(
        self,
        workload_key: str,
        target_key: str,
        request: dict[str, Any] | None = None,
        owner: str = "",
        job_id: str | None = None,
    ) -> JobInfo:
        """A new job in state "queued" for a registered workload and target."""
        now = utcnow()
        values = {
            "id": check_key("job id", job_id, 36) if job_id is not None else str(uuid.uuid4()),
            "state": JobState.QUEUED.value,
            "workload_key": workload_key,
            "target_key": target_key,
            "request": spec_json("job request", {} if request is None else request),
            "trials_done": 0,
            "best_median": None,
            "error": "",
            "created": now,
            "updated": now,
            "owner": check_text("owner", owner, SHORT_TEXT_MAX),
        }
        with self._writer.begin() as conn:
            store.check_references(conn, [{"workload_key": workload_key, "target_key": target_key, "job_id": None}])
            if conn.execute(select(jobs_table.c.id).where(jobs_table.c.id == values["id"])).first():
                raise ValueError(f"job {values['id']!r} already exists")
            conn.execute(jobs_table.insert().values(**values))
            return to_job(conn.execute(select(jobs_table).where(jobs_table.c.id == values["id"])).one())

    def count_jobs_by_state(self) -> dict[JobState, int]:
        """How many jobs are in each state: every `JobState`, in declaration order, 0 when none."""
        stmt = select(jobs_table.c.state, func.count()).group_by(jobs_table.c.state)
        counts = dict.fromkeys(JobState, 0)
        with self._reader.connect() as conn:
            for state, n in conn.execute(stmt):
                counts[JobState(state)] = int(n)
        return counts

    def get_job(self, job_id: str) -> JobInfo | None:
        with self._reader.connect() as conn:
            row = conn.execute(select(jobs_table).where(jobs_table.c.id == job_id)).first()
        return None if row is None else to_job(row)

    def list_jobs(self, state: str | None = None) -> list[JobInfo]:
        """Jobs, oldest first; only those in `state` when given."""
        stmt = select(jobs_table).order_by(jobs_table.c.created, jobs_table.c.id)
        if state is not None:
            stmt = stmt.where(jobs_table.c.state == job_rules.parse_state(state).value)
        with self._reader.connect() as conn:
            return [to_job(r) for r in conn.execute(stmt)]

    def update_job(self, job_id: str, **fields: Any) -> JobInfo:
        """Change state/progress of a job; an illegal state transition raises ValueError naming it.

        The row is locked while checking (FOR UPDATE / SQLite's write lock), so two workers cannot
        both move one job out of the same state.
        """
        values = job_rules.validate_update(fields)
        with self._writer.begin() as conn:
            row = conn.execute(select(jobs_table).where(jobs_table.c.id == job_id).with_for_update()).first()
            if row is None:
                raise ValueError(f"unknown job id {job_id!r}")
            if "state" in values:
                job_rules.check_transition(job_id, row.state, values["state"])
            values["updated"] = utcnow()
            conn.execute(jobs_table.update().where(jobs_table.c.id == job_id).values(**values))
            return to_job(conn.execute(select(jobs_table).where(jobs_table.c.id == job_id)).one())

    # ---- exchange ----------------------------------------------------------------------------

    def export_jsonl(
        self, fp_or_path: jsonl.PathOrFile, workload_key: str | None = None, target_key: str | None = None
    ) -> int:
        """Write records as JSON lines (header first, see `tuning_db.jsonl`); return how many."""
        stmt = self._filter(select(records_table), workload_key, target_key, False).order_by(R.id)
        workloads = {w.key: w for w in self.workloads()}
        targets = {t.key: t for t in self.targets()}
        return exchange.export_records(self.engine, stmt, workloads, targets, fp_or_path)

    def import_jsonl(
        self,
        fp_or_path: jsonl.PathOrFile,
        *,
        validate: Callable[[jsonl.ImportLine], None] | None = None,
        origin: str = ORIGIN_IMPORT,
    ) -> ImportReport:
        """Read records written by `export_jsonl`, streaming; report what was stored and refused.

        Each line is checked, then passed to `validate` (which raises ValueError(reason) to refuse
        it); a refused line is reported with its number and reason and the rest of the file is kept.
        Only a bad header raises ValueError (nothing stored). Imported records keep their origin
        (`origin` for those local to the exporter) and so count as unverified until re-measured
        here. Exact duplicates (same workload, target, steps hash and costs) are skipped.
        """
        return exchange.import_records(self._writer, fp_or_path, validate, origin)
