"""Planted imports: every bad line is refused with its number and reason and the rest kept; imported
records never verify a schedule nor move a verified schedule's cost; the import streams."""

from __future__ import annotations

import io
import json
import re
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.db_test_helpers import CPU, W1, matmul_spec, rec, register, steps
from tuning_db import ORIGIN_IMPORT, TuningDB, exchange, sqlite_url, steps_hash
from tuning_db.jsonl import HEADER, ImportLine

HEADER_LINE = json.dumps(HEADER)
NUL = "\x00"


def line(i: int, cost: float | None = 1e-3, *, error_code: int = 0, origin: str | None = None, **changes) -> str:
    """One record line of schedule `steps(i)` on (W1, CPU); `changes` set dotted fields."""
    obj = {
        "workload": {"key": W1, "name": "matmul0", "spec": matmul_spec(64), "flops": 2.0 * 64**3},
        "target": {"key": CPU, "kind": "cpu", "spec": {"name": CPU, "cores": 2}},
        "steps": steps(i), "costs": [] if cost is None else [cost], "error_code": error_code, "error_msg": "",
        "host": "h", "created": "2026-12-02T12:00:00+00:00",
    }
    if origin is not None:
        obj["origin"] = origin
    for field, value in changes.items():
        *parents, last = field.split("__")
        cur = obj
        for p in parents:
            cur = cur[p]
        cur[last] = value
    return json.dumps(obj)


def _file(*lines: str) -> io.StringIO:
    return io.StringIO("\n".join([HEADER_LINE, *lines]) + "\n")


PLANTED = [
    ("cost 0", {"cost": 0.0}, "costs"),
    ("cost -5 s", {"cost": -5.0}, "costs"),
    ("cost NaN", {"cost": float("nan")}, "costs"),
    ("cost inf", {"cost": float("inf")}, "costs"),
    ("flops -1", {"workload__flops": -1.0}, "workload flops"),
    ("NUL host", {"host": f"h{NUL}"}, "host"),
    ("NUL error_msg", {"error_msg": f"e{NUL}"}, "error_msg"),
    ("NUL workload name", {"workload__name": f"m{NUL}"}, "workload name"),
    ("NUL target key", {"target__key": f"cpu{NUL}"}, "target_key"),
    ("NUL in a step", {"steps": [{"kind": f"split{NUL}"}]}, r"steps\[0\]\.kind"),
    ("NUL in a spec", {"target__spec": {"name": f"x{NUL}"}}, r"target spec\.name"),
    ("NUL origin", {"origin": f"o{NUL}"}, "origin"),
    ("huge int cost", {"cost": 10**400}, ""),
]


def test_planted_lines_are_refused_by_number_and_the_rest_kept(db: TuningDB) -> None:
    lines = [line(0, 2e-3)]
    for n, (_, change, _) in enumerate(PLANTED):
        kw = dict(change)
        lines.append(line(100 + n, kw.pop("cost", 1e-6), **kw))  # planted at 1 us: it would be best
    lines.append(line(1, 3e-3))
    report = db.import_jsonl(_file(*lines))
    assert report.imported == db.count_records() == 2 and report.duplicates == 0
    assert report.n_refused == len(PLANTED) == len(report.refused)
    for refused, (name, _, field), line_no in zip(report.refused, PLANTED, range(3, 3 + len(PLANTED))):
        assert refused.line_no == line_no, name
        if field:
            assert re.search(field, refused.reason), (name, refused.reason)
    assert db.best(W1, CPU).median == pytest.approx(2e-3)
    assert all(r.median > 0 for r in db.records())


def test_a_line_nested_too_deeply_is_refused_alone(db: TuningDB) -> None:
    deep = '{"workload": ' + "[" * 100_000 + "]" * 100_000 + "}"
    report = db.import_jsonl(_file(line(0, 2e-3), deep, line(1, 3e-3)))
    assert report.imported == 2 and [(r.line_no, r.reason) for r in report.refused] == [
        (3, "JSON nested too deeply to read")]


def test_imported_only_schedules_are_unverified(db: TuningDB) -> None:
    report = db.import_jsonl(_file(*[line(0, 1e-3 + k * 1e-6) for k in range(5)]))
    assert report.imported == 5
    st = db.standing(W1, CPU, steps_hash(steps(0)))
    assert (st.n_valid, st.n_imported, st.verified) == (0, 5, False)
    assert db.best(W1, CPU).origin == ORIGIN_IMPORT  # nothing verified: the unverified fallback
    register(db)
    local = db.commit_records([rec(W1, CPU, 1, 5e-3) for _ in range(3)])
    assert db.best(W1, CPU).id == local[1]  # verified, though 5x slower than the planted numbers


def test_planted_imports_cannot_pull_a_verified_cost(db: TuningDB) -> None:
    register(db)
    local = db.commit_records([rec(W1, CPU, 0, m) for m in (2.0e-3, 2.1e-3, 2.2e-3)])
    rival = db.commit_records([rec(W1, CPU, 1, 1.5e-3) for _ in range(3)])
    assert db.best(W1, CPU).id == rival[1]
    report = db.import_jsonl(_file(*[line(0, 1e-6 * (k + 1)) for k in range(5)]))  # five at ~1 us
    assert report.imported == 5
    st = db.standing(W1, CPU, steps_hash(steps(0)))
    assert st.verified and (st.n_valid, st.n_imported) == (3, 5)
    assert st.cost == pytest.approx(2.1e-3) and st.record.id == local[1]
    assert db.best(W1, CPU).id == rival[1]


def test_disqualifying_imports_disqualify(db: TuningDB) -> None:
    register(db)
    db.commit_records([rec(W1, CPU, 0, 1e-3) for _ in range(3)])
    db.import_jsonl(_file(line(0, None, error_code=6, error_msg="wrong at [3]")))
    st = db.standing(W1, CPU, steps_hash(steps(0)))
    assert st.disqualified and st.reason == "WRONG_ANSWER: wrong at [3]" and db.best(W1, CPU) is None


def test_origin_is_kept_or_given(db: TuningDB) -> None:
    report = db.import_jsonl(_file(line(0), line(1, origin=""), line(2, origin="import:lab.jsonl")),
                             origin="import:mine.jsonl")
    assert report.imported == 3
    assert [r.origin for r in db.records()] == ["import:mine.jsonl", "import:mine.jsonl", "import:lab.jsonl"]
    buf = io.StringIO()
    db.export_jsonl(buf)
    assert [json.loads(t)["origin"] for t in buf.getvalue().splitlines()[1:]] == [r.origin for r in db.records()]
    with pytest.raises(ValueError, match="must not be local"):
        db.import_jsonl(_file(line(3)), origin="")
    assert db.count_records() == 3


def test_validate_refuses_lines_and_sees_the_origin(db: TuningDB) -> None:
    seen: list[tuple[int, str]] = []

    def validate(ln: ImportLine) -> None:
        seen.append((ln.line_no, ln.record.origin))
        if ln.line_no == 3:
            raise ValueError("steps do not replay: no loop 'i.outer'")
        if ln.line_no == 4:
            raise KeyError("stage")  # a replay tripping over planted steps refuses the line too

    report = db.import_jsonl(_file(line(0), line(1), line(2), line(3)), validate=validate)
    assert seen == [(2, ORIGIN_IMPORT), (3, ORIGIN_IMPORT), (4, ORIGIN_IMPORT), (5, ORIGIN_IMPORT)]
    assert report.imported == 2 and [(r.line_no, r.reason) for r in report.refused] == [
        (3, "steps do not replay: no loop 'i.outer'"), (4, "validator failed: KeyError: 'stage'")]
    assert {r.steps_hash for r in db.records()} == {steps_hash(steps(0)), steps_hash(steps(3))}


def test_refusals_are_all_counted_but_only_the_first_listed(db: TuningDB) -> None:
    report = db.import_jsonl(_file(*["{bad"] * 1100, line(0)))
    assert report.n_refused == 1100 and len(report.refused) == 1000 and report.imported == 1
    assert report.refused[-1].line_no == 1001


class _CountingLines:
    """A text stream that counts the lines handed out (a file is iterated the same way)."""

    def __init__(self, lines: list[str]) -> None:
        self.lines, self.read = lines, 0

    def __iter__(self) -> Iterator[str]:
        for text in self.lines:
            self.read += 1
            yield text


def test_import_reads_lazily_and_stores_in_batches(db: TuningDB, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(exchange, "IMPORT_BATCH", 50)
    stream = _CountingLines([HEADER_LINE + "\n"] + [line(i) + "\n" for i in range(400)])
    progress: list[tuple[int, int, int]] = []

    def validate(ln: ImportLine) -> None:
        if ln.line_no % 100 == 1:
            progress.append((ln.line_no, stream.read, db.count_records()))

    report = db.import_jsonl(stream, validate=validate)  # type: ignore[arg-type]
    assert report.imported == 400
    for line_no, read, stored in progress:
        assert read == line_no  # nothing read ahead of the line being checked
        assert stored >= line_no - 2 - 50  # earlier batches are already committed


def test_import_memory_does_not_grow_with_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(exchange, "IMPORT_BATCH", 100)
    path = tmp_path / "big.jsonl"
    pad = "x" * 1500  # about 2 KB a line
    with path.open("w") as f:
        f.write(HEADER_LINE + "\n")
        for i in range(3000):
            f.write(line(i, 1e-3, host=f"h{i}", error_msg=pad) + "\n")
    size = path.stat().st_size
    with TuningDB(sqlite_url(tmp_path / "big.db")) as db:
        db.best(W1, CPU)  # warm up: schema, statement caches
        tracemalloc.start()
        try:
            report = db.import_jsonl(path)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert report.imported == 3000 and db.count_records() == 3000
    assert size > 6_000_000 and peak < size / 4, (size, peak)
