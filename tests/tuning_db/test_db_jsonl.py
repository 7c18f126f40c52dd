"""Export/import of records as versioned JSON lines, on both backends."""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.db_test_helpers import CPU, GPU, W1, W2, rec, register, strip_id
from tuning_db import TuningDB
from tuning_db.jsonl import HEADER


@pytest.fixture
def source(tmp_path: Path) -> Iterator[TuningDB]:
    """A populated SQLite database to export from (the target backend is `db`)."""
    src = TuningDB(f"sqlite+pysqlite:///{tmp_path / 'source.db'}")
    register(src)
    i = 0
    for wk in (W1, W2):
        for tk in (CPU, GPU):
            for m in (3, 1, 2):
                src.commit_record(rec(wk, tk, i, m * 1e-3 * (2 if tk == GPU else 1)))
                i += 1
            src.commit_record(rec(wk, tk, 1000 + i, None))
            i += 1
    yield src
    src.close()


def _export(db: TuningDB, **kw: str) -> str:
    buf = io.StringIO()
    n = db.export_jsonl(buf, **kw)
    text = buf.getvalue()
    assert n == len(text.splitlines()) - 1
    return text


def test_export_import_into_empty_database_keeps_best(source: TuningDB, db: TuningDB) -> None:
    text = _export(source)
    assert json.loads(text.splitlines()[0]) == HEADER
    assert db.import_jsonl(io.StringIO(text)) == 16
    assert db.count_records() == 16 and db.count_records(ok_only=True) == 12
    assert [strip_id(r) for r in db.best_per_workload()] == [strip_id(r) for r in source.best_per_workload()]
    for wk in (W1, W2):
        for tk in (CPU, GPU):
            got, want = db.best(wk, tk), source.best(wk, tk)
            assert got is not None and want is not None and strip_id(got) == strip_id(want)

    def described(d: TuningDB) -> list[tuple]:
        return [(w.key, w.name, w.spec, w.flops) for w in d.workloads()]

    assert described(db) == described(source)
    assert [(t.key, t.kind, t.spec) for t in db.targets()] == [(t.key, t.kind, t.spec) for t in source.targets()]
    assert db.measured_step_hashes(W1, CPU) == source.measured_step_hashes(W1, CPU)


def test_reimport_skips_exact_duplicates(source: TuningDB, db: TuningDB) -> None:
    text = _export(source)
    assert db.import_jsonl(io.StringIO(text)) == 16
    assert db.import_jsonl(io.StringIO(text)) == 0
    lines = text.splitlines()
    doubled = "\n".join([lines[0], lines[1], lines[1], lines[2]]) + "\n"
    assert db.import_jsonl(io.StringIO(doubled)) == 0
    # Same schedule, different costs: a new measurement, kept.
    changed = json.loads(lines[1])
    changed["costs"] = [9e-3, 9e-3, 9e-3]
    assert db.import_jsonl(io.StringIO(lines[0] + "\n" + json.dumps(changed) + "\n")) == 1
    assert db.count_records() == 17


def test_export_filtered_to_a_file_and_back(source: TuningDB, db: TuningDB, tmp_path: Path) -> None:
    path = tmp_path / "out" / "w1_cpu.jsonl"
    assert source.export_jsonl(path, workload_key=W1, target_key=CPU) == 4
    assert db.import_jsonl(path) == 4
    assert {(r.workload_key, r.target_key) for r in db.records()} == {(W1, CPU)}
    assert [w.key for w in db.workloads()] == [W1]


def _set(field: str, value: object) -> Callable[[dict], None]:
    def mutate(obj: dict) -> None:
        cur = obj
        *parents, last = field.split(".")
        for p in parents:
            cur = cur[p]
        cur[last] = value

    return mutate


def _drop(field: str) -> Callable[[dict], None]:
    return lambda obj: obj.pop(field)


CORRUPTIONS = [
    ("costs", _set("costs", "fast")),
    ("costs", _drop("costs")),
    ("error_code", _set("error_code", "0")),
    ("steps_hash", _set("steps_hash", "0" * 64)),
    ("steps", _set("steps", 17)),
    ("workload", _set("workload", "matmul")),
    ("workload.spec", _set("workload.spec", [1, 2])),
    ("target.key", _set("target.key", "")),
    ("created", _set("created", "yesterday")),
    ("costs", _set("costs", [])),  # a valid record (error_code 0) without timings
]


@pytest.mark.parametrize("field, corrupt", CORRUPTIONS, ids=[f"{f}-{i}" for i, (f, _) in enumerate(CORRUPTIONS)])
def test_malformed_line_is_rejected_and_nothing_committed(
    source: TuningDB, db: TuningDB, field: str, corrupt: Callable[[dict], None]
) -> None:
    lines = _export(source).splitlines()
    bad = json.loads(lines[5])  # line 6 of the file
    corrupt(bad)
    lines[5] = json.dumps(bad)
    with pytest.raises(ValueError, match=rf"line 6\b.*{field.split('.')[-1]}"):
        db.import_jsonl(io.StringIO("\n".join(lines) + "\n"))
    assert db.count_records() == 0 and db.workloads() == [] and db.targets() == []


@pytest.mark.parametrize(
    "text, match",
    [
        ("", "line 1: empty input"),
        ('{"format": "something-else", "version": 1}\n', "line 1: field 'format'"),
        ('{"format": "autosched-records", "version": 99}\n', "line 1: field 'version'"),
        ('{"format": "autosched-records", "version": 1}\n{not json\n', "line 2: invalid JSON"),
        ('{"format": "autosched-records", "version": 1}\n[1, 2]\n', "line 2: expected a JSON object"),
    ],
)
def test_bad_header_or_json_is_rejected(db: TuningDB, text: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        db.import_jsonl(io.StringIO(text))
    assert db.count_records() == 0


def test_conflicting_workload_spec_rejects_whole_file(source: TuningDB, db: TuningDB) -> None:
    lines = _export(source).splitlines()
    db.ensure_workload(W2, "mine", {"op": "conv2d"}, 1.0)  # same key, different operator
    first_w2 = next(i for i, ln in enumerate(lines[1:], start=2) if json.loads(ln)["workload"]["key"] == W2)
    with pytest.raises(ValueError, match=f"line {first_w2}: workload .* different spec"):
        db.import_jsonl(io.StringIO("\n".join(lines) + "\n"))
    assert db.count_records() == 0 and [w.key for w in db.workloads()] == [W2]


def test_export_of_empty_database_is_just_the_header(db: TuningDB) -> None:
    text = _export(db)
    assert text.splitlines() == [json.dumps(HEADER, sort_keys=True)]
    assert db.import_jsonl(io.StringIO(text)) == 0


def test_import_keeps_uuid_free_job_links_out(source: TuningDB, db: TuningDB) -> None:
    """Job ids are local to a database: exported records arrive without one."""
    job = source.create_job(W1, CPU, job_id=str(uuid.uuid4()))
    source.commit_record(rec(W1, CPU, 5000, 1e-4, job_id=job.id))
    db.import_jsonl(io.StringIO(_export(source)))
    best = db.best(W1, CPU)
    assert best is not None and best.median == pytest.approx(1e-4) and best.job_id is None
