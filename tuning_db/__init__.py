"""autosched's tuning database: measurements and the best schedule per (workload key, target).

Stands apart from the search stack on purpose (it never imports `autosched`): a deployment that only
looks schedules up needs this package and a renderer. SQLite file by default, PostgreSQL by URL.

    from tuning_db import TuningDB, RecordIn
    db = TuningDB()                      # ~/.cache/autosched/tuning.db
    db.ensure_workload(key, "matmul", spec, flops)
    db.ensure_target("cpu", "cpu", {})
    db.commit_records([RecordIn(key, "cpu", steps, costs=(1.2e-3, 1.1e-3, 1.3e-3))])
    db.best(key, "cpu")                  # fastest verified schedule (3 local valid records), else unverified
"""

from tuning_db.canonical import canonical_json, steps_hash
from tuning_db.migrate import downgrade, head_revision, upgrade
from tuning_db.repository import TuningDB
from tuning_db.settings import DBSettings, db_settings_from_env, default_db_path, sqlite_url
from tuning_db.types import (
    DISQUALIFYING,
    MIN_VERIFIED,
    OK,
    ORIGIN_IMPORT,
    ORIGIN_LOCAL,
    ImportReport,
    JobInfo,
    JobState,
    Record,
    RecordIn,
    RecordOutcome,
    RefusedLine,
    Standing,
    TargetInfo,
    WorkloadInfo,
)

__all__ = [
    "DISQUALIFYING",
    "MIN_VERIFIED",
    "OK",
    "ORIGIN_IMPORT",
    "ORIGIN_LOCAL",
    "DBSettings",
    "ImportReport",
    "JobInfo",
    "JobState",
    "Record",
    "RecordIn",
    "RecordOutcome",
    "RefusedLine",
    "Standing",
    "TargetInfo",
    "TuningDB",
    "WorkloadInfo",
    "canonical_json",
    "db_settings_from_env",
    "default_db_path",
    "downgrade",
    "head_revision",
    "sqlite_url",
    "steps_hash",
    "upgrade",
]
