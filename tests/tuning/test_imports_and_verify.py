"""Imports can add measurements but never plant a schedule, and `autosched verify` turns imported or
once-measured schedules into verified ones by measuring them here (issue: never serve a wrong or
planted schedule)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from autosched.cli.main import main
from autosched.space.registry import make_space
from autosched.target.key import Target
from autosched.tuning.api import UnverifiedScheduleWarning, apply_best, tune
from autosched.tuning.imports import import_records
from autosched.tuning.verify import verify_schedules
from autosched.workload import Workload
from tuning_db import TuningDB
from tuning_db.canonical import steps_hash
from tuning_db.types import MIN_VERIFIED

W = Workload.create("matmul", 17, 19, 23)  # sizes that divide nothing
HOST = Target.host("cpu")


def _steps(seed: int) -> list:
    space = make_space(W, "cpu")
    return space.apply(space.space.sample(np.random.default_rng(seed))).steps_json()


def _line(steps: list, cost: float = 1e-6, **patch) -> dict:
    obj = {
        "workload": {"key": W.key, "name": W.name, "spec": W.to_dict(), "flops": W.flops},
        "target": {"key": HOST.key, "kind": "cpu", "spec": {"kind": "cpu", "device": HOST.device, "cores": HOST.cores}},
        "steps": steps, "steps_hash": steps_hash(steps), "costs": [cost], "error_code": 0, "error_msg": "",
        "build_seconds": 0.1, "run_seconds": 0.1, "host": "elsewhere", "device": "", "worker_id": "",
        "created": "2026-01-01T00:00:00+00:00", "format_version": 1,
    }
    for path, value in patch.items():
        *head, last = path.split("__")
        d = obj
        for k in head:
            d = d[k]
        d[last] = value
    return obj


def _write(path: Path, lines: list[dict]) -> Path:
    with path.open("w") as f:
        f.write(json.dumps({"format": "autosched-records", "version": 1}) + "\n")
        for obj in lines:
            f.write(json.dumps(obj) + "\n")
    return path


@pytest.fixture()
def db(tmp_path: Path) -> TuningDB:
    with TuningDB(f"sqlite:///{tmp_path / 'db.sqlite'}") as d:
        yield d


def _zero_split(steps: list) -> list:
    bad = copy.deepcopy(steps)
    next(s for s in bad if s["kind"] == "split")["factor"] = 0
    return bad


def test_each_planted_line_is_refused_with_its_number_and_the_rest_kept(db, tmp_path) -> None:
    good = _steps(0)
    other_w = Workload.create("matmul", 16, 16, 16)
    lines = [
        _line(good, 2e-5),                                                          # 2: kept
        _line(s := _zero_split(good), steps_hash=steps_hash(s)),                    # 3: split factor 0
        _line(s := [*good, {"kind": "rm -rf /", "v": 1, "text": "<script>"}], steps_hash=steps_hash(s)),  # 4
        _line(good, workload__key=other_w.key),                                     # 5: key is not the spec's hash
        _line(good, workload__flops=W.flops * 1000),                                # 6: flops not the spec's
        _line(good, 0.0),                                                           # 7: cost 0
        _line(good, -5.0),                                                          # 8: negative cost
        _line(good, target__kind="cuda"),                                           # 9: kind differs from key
    ]
    rep = import_records(db, _write(tmp_path / "in.jsonl", lines))
    assert rep.imported == 1 and rep.n_refused == 7
    reasons = {r.line_no: r.reason for r in rep.refused}
    assert sorted(reasons) == [3, 4, 5, 6, 7, 8, 9]
    assert "split factor must be a positive integer" in reasons[3]
    assert "rm -rf" in reasons[4] and "not the hash of its spec" in reasons[5] and "flops" in reasons[6]
    assert "cuda" in reasons[9]
    best = db.best(W.key, HOST.key)
    assert best is not None and best.steps_hash == steps_hash(good) and best.origin != ""
    st = db.standing(W.key, HOST.key, best.steps_hash)
    assert st is not None and not st.verified and st.n_valid == 0 and st.n_imported == 1


def test_cli_import_reports_refused_lines_and_fails(db, tmp_path, capsys) -> None:
    path = _write(tmp_path / "in.jsonl", [_line(_steps(0), 2e-5), _line(_steps(0), -5.0)])
    assert main(["--db", str(db.engine.url), "import", str(path)]) == 1
    out = capsys.readouterr()
    assert "imported 1 records" in out.out and "line 3:" in out.err


def test_verify_measures_an_imported_plant_here_and_its_planted_cost_never_counts(db, tmp_path) -> None:
    planted = _steps(1)
    import_records(db, _write(tmp_path / "in.jsonl", [_line(planted, 1e-9)] * 1 +
                              [_line(planted, 1e-9 * (1 + i)) for i in range(1, 6)]))
    rep = verify_schedules(db, W, "cpu", top=3)
    (c,) = rep.checked
    assert c.ok and c.verified and c.n_valid == MIN_VERIFIED and c.median > 1e-7
    st = db.standing(W.key, HOST.key, steps_hash(planted))
    assert st.verified and st.cost > 1e-7  # ranked by the local medians only: the plants never count


def test_a_later_tuning_run_does_not_take_an_imported_plant_as_its_own(db, tmp_path) -> None:
    planted = _steps(2)
    import_records(db, _write(tmp_path / "in.jsonl", [_line(planted, 1e-9)]))
    r = tune(W, "cpu", 8, db=db, searcher="random", cost_model=None, batch_size=4, verify=2, progress=False)
    assert r.best_cost > 1e-7 and r.best_verified
    best = db.best(W.key, HOST.key)
    assert best.origin == "" and db.standing(W.key, HOST.key, best.steps_hash).verified


def test_verify_of_another_machines_target_is_refused(db) -> None:
    with pytest.raises(ValueError, match="not this machine's"):
        verify_schedules(db, W, "cpu|Some Other CPU (znver9)|512")


def test_verify_with_nothing_stored_says_so(db) -> None:
    with pytest.raises(LookupError, match="to verify"):
        verify_schedules(db, W, "cpu")


def test_apply_best_builds_an_imported_best_but_warns_that_it_is_unverified(db, tmp_path) -> None:
    import_records(db, _write(tmp_path / "in.jsonl", [_line(_steps(3), 2e-5)]))
    with pytest.warns(UnverifiedScheduleWarning, match="autosched verify"):
        f = apply_best(W, "cpu", db=db)
    a, b = np.random.rand(17, 23).astype("float32"), np.random.rand(23, 19).astype("float32")
    out = np.zeros((17, 19), "float32")
    f(a, b, out)
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-5)
