"""Record origin, who cancelled a job, and the per-schedule `schedules` summary (back-filled).

Records stored before this revision carry no origin; they become local (""), since nothing tells
an imported one apart. The back-fill is one INSERT ... SELECT with window functions, the same rule
`tuning_db.ranking.summarize` applies (every record is local here, so one upper median serves both
the verified and the unverified cost).

Revision ID: 0002_standings
Revises: 0001_initial
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0002_standings"
down_revision: str | None = "0001_initial"
branch_labels = None
depends_on = None

_RECORD_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

# rank: 0 verified (>= 3 valid, none disqualifying), 1 unverified, 2 disqualified, 3 no valid record
_BACKFILL = """
INSERT INTO schedules (workload_key, target_key, steps_hash, rank, cost, record_id,
                       n_valid_local, n_valid_imported, n_disqualifying, reason)
WITH counts AS (
    SELECT workload_key, target_key, steps_hash,
           SUM(CASE WHEN error_code = 0 THEN 1 ELSE 0 END) AS n_valid,
           SUM(CASE WHEN error_code IN (4, 6, 7) THEN 1 ELSE 0 END) AS n_bad,
           MIN(CASE WHEN error_code IN (4, 6, 7) THEN id END) AS first_bad
    FROM records GROUP BY workload_key, target_key, steps_hash
), ranked AS (
    SELECT id, workload_key, target_key, steps_hash, median,
           ROW_NUMBER() OVER (PARTITION BY workload_key, target_key, steps_hash ORDER BY median, id) AS rn,
           COUNT(*) OVER (PARTITION BY workload_key, target_key, steps_hash) AS n
    FROM records WHERE error_code = 0
), rep AS (
    SELECT id, workload_key, target_key, steps_hash, median FROM ranked WHERE rn = n / 2 + 1
)
SELECT c.workload_key, c.target_key, c.steps_hash,
       CASE WHEN c.n_bad > 0 THEN 2 WHEN c.n_valid = 0 THEN 3 WHEN c.n_valid >= 3 THEN 0 ELSE 1 END,
       rep.median, rep.id, c.n_valid, 0, c.n_bad,
       COALESCE(CASE bad.error_code WHEN 4 THEN 'RUNTIME_ERROR' WHEN 6 THEN 'WRONG_ANSWER'
                                    WHEN 7 THEN 'WORKER_CRASHED' END || ': ' || bad.error_msg, '')
FROM counts c
LEFT JOIN rep ON rep.workload_key = c.workload_key AND rep.target_key = c.target_key
             AND rep.steps_hash = c.steps_hash
LEFT JOIN records bad ON bad.id = c.first_bad
"""


def upgrade() -> None:
    op.add_column("records", sa.Column("origin", sa.String(255), nullable=False, server_default=""))
    op.add_column("jobs", sa.Column("cancelled_by", sa.String(255), nullable=False, server_default=""))
    op.create_table(
        "schedules",
        sa.Column("workload_key", sa.String(64), nullable=False),
        sa.Column("target_key", sa.String(128), nullable=False),
        sa.Column("steps_hash", sa.String(64), nullable=False),
        sa.Column("rank", sa.Integer(), nullable=False),
        sa.Column("cost", sa.Float(), nullable=True),
        sa.Column("record_id", _RECORD_ID, nullable=True),
        sa.Column("n_valid_local", sa.Integer(), nullable=False),
        sa.Column("n_valid_imported", sa.Integer(), nullable=False),
        sa.Column("n_disqualifying", sa.Integer(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("workload_key", "target_key", "steps_hash", name="pk_schedules"),
        sa.ForeignKeyConstraint(["workload_key"], ["workloads.key"], name="fk_schedules_workload_key_workloads"),
        sa.ForeignKeyConstraint(["target_key"], ["targets.key"], name="fk_schedules_target_key_targets"),
        sa.ForeignKeyConstraint(["record_id"], ["records.id"], name="fk_schedules_record_id_records"),
    )
    op.create_index("ix_schedules_best", "schedules", ["workload_key", "target_key", "rank", "cost", "record_id"])
    op.execute(sa.text(_BACKFILL))


def downgrade() -> None:
    op.drop_index("ix_schedules_best", table_name="schedules")
    op.drop_table("schedules")
    op.drop_column("jobs", "cancelled_by")  # SQLite >= 3.35 drops a plain column in place
    op.drop_column("records", "origin")
