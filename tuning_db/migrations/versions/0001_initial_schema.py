"""Initial schema: workloads, targets, jobs, records and the lookup indexes.

Revision ID: 0001_initial
Revises:
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0001_initial"
down_revision: str | None = None
branch_labels = None
depends_on = None

_OK_ONLY = sa.text("error_code = 0")


def upgrade() -> None:
    op.create_table(
        "workloads",
        sa.Column("key", sa.String(64), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("spec", sa.Text(), nullable=False),
        sa.Column("flops", sa.Float(), nullable=False),
        sa.Column("created", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("key", name="pk_workloads"),
    )
    op.create_table(
        "targets",
        sa.Column("key", sa.String(128), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("spec", sa.Text(), nullable=False),
        sa.Column("created", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("key", name="pk_targets"),
    )
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("workload_key", sa.String(64), nullable=False),
        sa.Column("target_key", sa.String(128), nullable=False),
        sa.Column("request", sa.Text(), nullable=False),
        sa.Column("trials_done", sa.Integer(), nullable=False),
        sa.Column("best_median", sa.Float(), nullable=True),
        sa.Column("error", sa.Text(), nullable=False),
        sa.Column("created", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated", sa.DateTime(timezone=True), nullable=False),
        sa.Column("owner", sa.String(255), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_jobs"),
        sa.ForeignKeyConstraint(["workload_key"], ["workloads.key"], name="fk_jobs_workload_key_workloads"),
        sa.ForeignKeyConstraint(["target_key"], ["targets.key"], name="fk_jobs_target_key_targets"),
        sa.CheckConstraint("state IN ('queued', 'running', 'done', 'failed', 'cancelled')", name="ck_jobs_state"),
    )
    op.create_index("ix_jobs_state", "jobs", ["state", "created"])
    op.create_table(
        "records",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("workload_key", sa.String(64), nullable=False),
        sa.Column("target_key", sa.String(128), nullable=False),
        sa.Column("steps", sa.Text(), nullable=False),
        sa.Column("steps_hash", sa.String(64), nullable=False),
        sa.Column("costs", sa.Text(), nullable=False),
        sa.Column("median", sa.Float(), nullable=True),
        sa.Column("error_code", sa.Integer(), nullable=False),
        sa.Column("error_msg", sa.Text(), nullable=False),
        sa.Column("build_seconds", sa.Float(), nullable=False),
        sa.Column("run_seconds", sa.Float(), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("device", sa.String(255), nullable=False),
        sa.Column("worker_id", sa.String(255), nullable=False),
        sa.Column("job_id", sa.String(36), nullable=True),
        sa.Column("created", sa.DateTime(timezone=True), nullable=False),
        sa.Column("format_version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_records"),
        sa.ForeignKeyConstraint(["workload_key"], ["workloads.key"], name="fk_records_workload_key_workloads"),
        sa.ForeignKeyConstraint(["target_key"], ["targets.key"], name="fk_records_target_key_targets"),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name="fk_records_job_id_jobs"),
    )
    op.create_index(
        "ix_records_best",
        "records",
        ["workload_key", "target_key", "median", "id"],
        sqlite_where=_OK_ONLY,
        postgresql_where=_OK_ONLY,
    )
    op.create_index("ix_records_steps", "records", ["workload_key", "target_key", "steps_hash"])
    op.create_index("ix_records_job", "records", ["job_id"])


def downgrade() -> None:
    op.drop_index("ix_records_job", table_name="records")
    op.drop_index("ix_records_steps", table_name="records")
    op.drop_index("ix_records_best", table_name="records")
    op.drop_table("records")
    op.drop_index("ix_jobs_state", table_name="jobs")
    op.drop_table("jobs")
    op.drop_table("targets")
    op.drop_table("workloads")
