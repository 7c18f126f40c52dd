"""Export/import of records as versioned JSON lines, on both backends: a bad line is refused with
its number and reason and the rest of the file kept; only a bad header refuses the whole file."""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from tests.support.db_test_helpers import CPU, GPU, W1, W2, rec, register, strip_id
from tuning_db import ORIGIN_IMPORT, ImportReport, Record, TuningDB
from tuning_db.jsonl import HEADER


def _local(r: Record | None) -> Record | None:
    """`strip_id` and the origin an import gives: to compare an imported record with its source."""
    return None if r is None else replace(strip_id(r), origin="")


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
    report = db.import_jsonl(io.StringIO(text))
    assert (report.imported, report.duplicates, report.refused, report.n_refused) == (16, 0, (), 0)
    assert db.count_records() == 16 and db.count_records(ok_only=True) == 12
    assert {r.origin for r in db.records()} == {ORIGIN_IMPORT} and {r.origin for r in source.records()} == {""}
    assert [_local(r) for r in db.best_per_workload()] == [_local(r) for r in source.best_per_workload()]
    for wk in (W1, W2):
        for tk in (CPU, GPU):
            got, want = db.best(wk, tk), source.best(wk, tk)
            assert got is not None and want is not None and _local(got) == _local(want)
            assert not db.standing(wk, tk, got.steps_hash).verified  # imported: unverified until measured here

    def described(d: TuningDB) -> list[tuple]:
        return [(w.key, w.name, w.spec, w.flops) for w in d.workloads()]

    assert described(db) == described(source)
    assert [(t.key, t.kind, t.spec) for t in db.targets()] == [(t.key, t.kind, t.spec) for t in source.targets()]
    assert db.measured_step_hashes(W1, CPU) == source.measured_step_hashes(W1, CPU)


def test_reimport_skips_exact_duplicates(source: TuningDB, db: TuningDB) -> None:
    text = _export(source)
    assert db.import_jsonl(io.StringIO(text)).imported == 16
    again = db.import_jsonl(io.StringIO(text))
    assert (again.imported, again.duplicates) == (0, 16)
    lines = text.splitlines()
    doubled = "\n".join([lines[0], lines[1], lines[1], lines[2]]) + "\n"
    assert db.import_jsonl(io.StringIO(doubled)).imported == 0
    # Same schedule, different costs: a new measurement, kept.
    changed = json.loads(lines[1])
    changed["costs"] = [9e-3, 9e-3, 9e-3]
    assert db.import_jsonl(io.StringIO(lines[0] + "\n" + json.dumps(changed) + "\n")).imported == 1
    assert db.count_records() == 17


def test_duplicates_within_a_fresh_file_are_skipped(source: TuningDB, db: TuningDB) -> None:
    lines = _export(source).splitlines()
    report = db.import_jsonl(io.StringIO("\n".join([lines[0], lines[1], lines[2], lines[1]]) + "\n"))
    assert (report.imported, report.duplicates, report.n_refused) == (2, 1, 0)


def test_export_filtered_to_a_file_and_back(source: TuningDB, db: TuningDB, tmp_path: Path) -> None:
    path = tmp_path / "out" / "w1_cpu.jsonl"
    assert source.export_jsonl(path, workload_key=W1, target_key=CPU) == 4
    assert db.import_jsonl(path).imported == 4
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
def test_malformed_line_is_refused_and_the_rest_kept(
    source: TuningDB, db: TuningDB, field: str, corrupt: Callable[[dict], None]
) -> None:
    lines = _export(source).splitlines()
    bad = json.loads(lines[5])  # line 6 of the file
    corrupt(bad)
    lines[5] = json.dumps(bad)
    report = db.import_jsonl(io.StringIO("\n".join(lines) + "\n"))
    assert report.n_refused == 1 and [r.line_no for r in report.refused] == [6]
    assert field.split(".")[-1] in report.refused[0].reason
    assert report.imported == db.count_records() == 15


@pytest.mark.parametrize(
    "text, match",
    [
        ("", "line 1: empty input"),
        ('{"format": "something-else", "version": 1}\n', "line 1: field 'format'"),
        ('{"format": "autosched-records", "version": 99}\n', "line 1: field 'version'"),
        ('{"records": []}\n{"workload": {}}\n', "line 1: field 'format'"),
        ("\n" + json.dumps(HEADER) + "\n", "line 2: the header must be the first line"),
    ],
)
def test_bad_header_refuses_the_whole_file(db: TuningDB, text: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        db.import_jsonl(io.StringIO(text))
    assert db.count_records() == 0


def test_bad_json_lines_are_refused_by_number(source: TuningDB, db: TuningDB) -> None:
    lines = _export(source).splitlines()
    text = "\n".join([lines[0], "{not json", lines[1], "[1, 2]", lines[2]]) + "\n"
    report = db.import_jsonl(io.StringIO(text))
    assert report.imported == 2 and report.n_refused == 2
    assert [(r.line_no, r.reason.split(" (")[0]) for r in report.refused] == [
        (2, "invalid JSON"), (4, "expected a JSON object, got list")]


def test_conflicting_workload_spec_refuses_its_lines(source: TuningDB, db: TuningDB) -> None:
    lines = _export(source).splitlines()
    db.ensure_workload(W2, "mine", {"op": "conv2d"}, 1.0)  # same key, different operator
    w2_lines = [i for i, ln in enumerate(lines[1:], start=2) if json.loads(ln)["workload"]["key"] == W2]
    report = db.import_jsonl(io.StringIO("\n".join(lines) + "\n"))
    assert [r.line_no for r in report.refused] == w2_lines and report.n_refused == 8
    assert all(f"workload {W2!r} is already stored with a different spec" in r.reason for r in report.refused)
    assert report.imported == db.count_records() == 8 and {r.workload_key for r in db.records()} == {W1}
    assert db.workload(W2).spec == {"op": "conv2d"}


def test_export_of_empty_database_is_just_the_header(db: TuningDB) -> None:
    text = _export(db)
    assert text.splitlines() == [json.dumps(HEADER, sort_keys=True)]
    assert db.import_jsonl(io.StringIO(text)) == ImportReport(0, 0, (), 0)


def test_import_keeps_uuid_free_job_links_out(source: TuningDB, db: TuningDB) -> None:
    """Job ids are local to a database: exported records arrive without one."""
    job = source.create_job(W1, CPU, job_id=str(uuid.uuid4()))
    source.commit_record(rec(W1, CPU, 5000, 1e-4, job_id=job.id))
    db.import_jsonl(io.StringIO(_export(source)))
    best = db.best(W1, CPU)
    assert best is not None and best.median == pytest.approx(1e-4) and best.job_id is None
