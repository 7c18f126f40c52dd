"""Schema of the tuning database (SQLAlchemy 2.x typed declarative models).

JSON payloads are stored as canonical JSON *text*, not a JSON column type: the bytes are the same
on SQLite and PostgreSQL, can be compared for deduplication, and hash to the stored `steps_hash`.

The indexes exist for the two hot queries:
- `best`/`top_k`: `ix_records_best` on (workload_key, target_key, median, id) restricted to valid
  records (`error_code = 0`, a partial index on both dialects), so the best record is the first
  entry of an index range: a seek, not a scan or a sort.
- resume/dedupe: `ix_records_steps` on (workload_key, target_key, steps_hash).
- `best`/`top_k`/`standings`: `ix_schedules_best` on `schedules` (workload_key, target_key, rank,
  cost, record_id): one summary row per schedule, kept exact in the transaction of every record
  insert (`tuning_db.standings`), so the best schedule is the first entry of an index range and
  `best` never reads the records of a workload, only the one representative record it returns.

Any change here needs a new Alembic revision in `tuning_db/migrations/versions/`;
`tests/tuning_db/test_db_migrations.py` fails when models and migrations disagree.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from tuning_db.types import STEPS_FORMAT_VERSION

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

JOB_STATES = ("queued", "running", "done", "failed", "cancelled")
_OK_ONLY = text("error_code = 0")
#: 64-bit ids on PostgreSQL; on SQLite only INTEGER PRIMARY KEY is the (64-bit) rowid alias.
RECORD_ID = BigInteger().with_variant(Integer(), "sqlite")


class Base(DeclarativeBase):
    """Declarative base with a naming convention, so migrations can name (and later drop) constraints."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class WorkloadRow(Base):
    __tablename__ = "workloads"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(255))
    spec: Mapped[str] = mapped_column(Text)
    flops: Mapped[float] = mapped_column(Float)
    created: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class TargetRow(Base):
    __tablename__ = "targets"

    key: Mapped[str] = mapped_column(String(128), primary_key=True)
    kind: Mapped[str] = mapped_column(String(32))
    spec: Mapped[str] = mapped_column(Text)
    created: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class JobRow(Base):
    __tablename__ = "jobs"
    __table_args__ = (
        CheckConstraint("state IN ('queued', 'running', 'done', 'failed', 'cancelled')", name="state"),
        Index("ix_jobs_state", "state", "created"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    state: Mapped[str] = mapped_column(String(16))
    workload_key: Mapped[str] = mapped_column(String(64), ForeignKey("workloads.key"))
    target_key: Mapped[str] = mapped_column(String(128), ForeignKey("targets.key"))
    request: Mapped[str] = mapped_column(Text)
    trials_done: Mapped[int] = mapped_column(Integer, default=0)
    best_median: Mapped[float | None] = mapped_column(Float, nullable=True)
    error: Mapped[str] = mapped_column(Text, default="")
    created: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    owner: Mapped[str] = mapped_column(String(255), default="")
    cancelled_by: Mapped[str] = mapped_column(String(255), default="", server_default="")


class RecordRow(Base):
    __tablename__ = "records"
    __table_args__ = (
        Index(
            "ix_records_best",
            "workload_key",
            "target_key",
            "median",
            "id",
            sqlite_where=_OK_ONLY,
            postgresql_where=_OK_ONLY,
        ),
        Index("ix_records_steps", "workload_key", "target_key", "steps_hash"),
        Index("ix_records_job", "job_id"),
    )

    id: Mapped[int] = mapped_column(RECORD_ID, primary_key=True, autoincrement=True)
    workload_key: Mapped[str] = mapped_column(String(64), ForeignKey("workloads.key"))
    target_key: Mapped[str] = mapped_column(String(128), ForeignKey("targets.key"))
    steps: Mapped[str] = mapped_column(Text)
    steps_hash: Mapped[str] = mapped_column(String(64))
    costs: Mapped[str] = mapped_column(Text)
    median: Mapped[float | None] = mapped_column(Float, nullable=True)
    error_code: Mapped[int] = mapped_column(Integer)
    error_msg: Mapped[str] = mapped_column(Text, default="")
    build_seconds: Mapped[float] = mapped_column(Float, default=0.0)
    run_seconds: Mapped[float] = mapped_column(Float, default=0.0)
    host: Mapped[str] = mapped_column(String(255), default="")
    device: Mapped[str] = mapped_column(String(255), default="")
    worker_id: Mapped[str] = mapped_column(String(255), default="")
    job_id: Mapped[str | None] = mapped_column(String(36), ForeignKey("jobs.id"), nullable=True)
    created: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    format_version: Mapped[int] = mapped_column(Integer, default=STEPS_FORMAT_VERSION)
    #: "" (local): measured by this database's tuners; else where an imported record came from
    origin: Mapped[str] = mapped_column(String(255), default="", server_default="")


class ScheduleRow(Base):
    """Derived standing of one schedule on a (workload, target), see `tuning_db.standings`.

    `rank`: 0 verified, 1 unverified (has a valid record), 2 disqualified, 3 no valid record.
    `record_id` is the representative record whose median is `cost` (NULL without a valid record).
    """

    __tablename__ = "schedules"
    __table_args__ = (Index("ix_schedules_best", "workload_key", "target_key", "rank", "cost", "record_id"),)

    workload_key: Mapped[str] = mapped_column(String(64), ForeignKey("workloads.key"), primary_key=True)
    target_key: Mapped[str] = mapped_column(String(128), ForeignKey("targets.key"), primary_key=True)
    steps_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    rank: Mapped[int] = mapped_column(Integer)
    cost: Mapped[float | None] = mapped_column(Float, nullable=True)
    record_id: Mapped[int | None] = mapped_column(RECORD_ID, ForeignKey("records.id"), nullable=True)
    n_valid_local: Mapped[int] = mapped_column(Integer)
    n_valid_imported: Mapped[int] = mapped_column(Integer)
    n_disqualifying: Mapped[int] = mapped_column(Integer)
    reason: Mapped[str] = mapped_column(Text)


workloads_table = WorkloadRow.__table__
targets_table = TargetRow.__table__
jobs_table = JobRow.__table__
records_table = RecordRow.__table__
schedules_table = ScheduleRow.__table__
