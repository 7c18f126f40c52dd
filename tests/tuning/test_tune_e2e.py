"""End to end on the CPU: tune a small operator, resume from the database, apply the best, CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import autosched as asc
from autosched.tuning.api import NoTunedScheduleError
from autosched.workload import Workload


@pytest.fixture()
def db_url(tmp_path):
    return f"sqlite:///{tmp_path}/tune.db"


@pytest.mark.slow
def test_tune_records_resumes_and_applies_best(db_url):
    w = Workload.create("matmul", 64, 48, 32)
    r1 = asc.tune(w, "cpu", 12, db=db_url, batch_size=6, progress=False, seed=1)
    assert r1.trials == 12 and r1.measured + r1.reused + sum(r1.errors.values()) >= 12
    assert r1.best_steps_json is not None and np.isfinite(r1.best_cost)
    assert len(r1.curve) == 12
    # the best schedules were re-measured; the best by its median is the result, and the database's
    # best (each schedule judged by all its records) is that same schedule at that same cost
    assert 2 <= len(r1.verified) <= 12 and r1.best_cost <= min(r1.verified.values())
    from tuning_db import TuningDB, steps_hash

    db = TuningDB(db_url)
    best = db.best(w.key, asc.Target.host().key)
    assert best.steps_hash == steps_hash(json.loads(r1.best_steps_json))
    assert best.median == pytest.approx(r1.best_cost)
    n_records = db.count_records(w.key)
    assert n_records == r1.measured  # every measurement is stored, failed ones too
    # a second run with the same seed may propose the stored schedules again: they are reused, not
    # measured, and cost no trial, so its 12 trials go to schedules the first run did not try
    seen = {r.steps_hash for r in db.records(w.key)}
    r2 = asc.tune(w, "cpu", 12, db=db_url, batch_size=6, progress=False, seed=1)
    assert r2.trials == 12
    assert db.count_records(w.key) == n_records + r2.measured
    new = {r.steps_hash for r in db.records(w.key)} - seen
    assert len(new) >= 12 - sum(r2.errors.values()), (len(new), r2.errors, r2.reused)
    f = asc.apply_best(w, db=db_url)
    x = w.dag.random_inputs(3)
    c = np.empty((64, 48), "float32")
    f(x["A"], x["B"], c)
    np.testing.assert_allclose(c, x["A"] @ x["B"], rtol=1e-4, atol=1e-4)


def test_apply_best_without_records_says_so(db_url):
    w = Workload.create("matmul", 8, 8, 8)
    with pytest.raises(NoTunedScheduleError, match="no tuned schedule"):
        asc.apply_best(w, db=db_url)


@pytest.mark.slow
@pytest.mark.parametrize("op,args", [("softmax", (16, 40)), ("conv2d_nchw", (1, 4, 8, 8, 8, 3, 3, 1, 1)),
                                     ("layernorm", (8, 24))])
def test_tune_other_ops_gives_correct_kernels(db_url, op, args):
    w = Workload.create(op, *args)
    r = asc.tune(w, "cpu", 6, db=db_url, batch_size=6, progress=False, cost_model=None, searcher="random")
    assert r.best_steps_json is not None
    f = asc.apply_best(w, db=db_url)
    x = w.dag.random_inputs(5)
    outs = {t.name: np.empty(t.shape, t.dtype) for t in w.dag.outputs}
    f(*[x[n] if n in x else outs[n] for n in w.args_order])
    ref = w.dag.evaluate(x)
    for name, arr in outs.items():
        np.testing.assert_allclose(arr, ref[name], rtol=1e-4, atol=1e-5)


def test_tune_rejects_bad_options(db_url):
    with pytest.raises(ValueError, match="trials"):
        asc.tune(Workload.create("matmul", 8, 8, 8), "cpu", 0, db=db_url)
    with pytest.raises(ValueError, match="unknown cost model"):
        asc.tune(Workload.create("matmul", 8, 8, 8), "cpu", 4, db=db_url, cost_model="gbdt")
    with pytest.raises(ValueError, match="unknown target"):
        asc.tune(Workload.create("matmul", 8, 8, 8), "fpga", 4, db=db_url)


def _cli(*args, db):
    return subprocess.run([sys.executable, "-m", "autosched.cli.main", "--db", db, *args],
                          capture_output=True, text=True, timeout=600, env={"AUTOSCHED_QUIET": "1",
                                                                            "PATH": "/usr/bin:/bin"})


@pytest.mark.slow
def test_cli_tune_best_show_export_import_plot(tmp_path):
    db = str(tmp_path / "cli.db")
    p = _cli("tune", "matmul", "32", "32", "32", "--trials", "6", "--batch-size", "6", "--cost-model", "none",
             "--plot", str(tmp_path / "curve.png"), db=db)
    assert p.returncode == 0, p.stderr
    key = next(ln.split()[-1] for ln in p.stdout.splitlines() if ln.startswith("workload key:"))
    assert (tmp_path / "curve.png").stat().st_size > 1000
    p = _cli("best", key, db=db)
    assert p.returncode == 0, p.stderr
    best = json.loads(p.stdout)
    assert best["workload_key"] == key and best["steps"]
    p = _cli("show", key, db=db)
    assert p.returncode == 0 and "s[" in p.stdout and "default_function" in p.stdout
    p = _cli("export", str(tmp_path / "rec.jsonl"), db=db)
    assert p.returncode == 0 and "exported" in p.stdout
    p = _cli("import", str(tmp_path / "rec.jsonl"), db=str(tmp_path / "other.db"))
    assert p.returncode == 0, p.stderr
    p = _cli("best", key, db=str(tmp_path / "other.db"))
    assert p.returncode == 0 and json.loads(p.stdout)["median_ms"] == pytest.approx(best["median_ms"])
    p = _cli("plot", key, "--out", str(tmp_path / "p.png"), db=db)
    assert p.returncode == 0 and (tmp_path / "p.png").exists()
    p = _cli("best", "0" * 64, db=db)
    assert p.returncode == 2 and "no tuned schedule" in p.stderr
    p = _cli("tune", "nosuchop", "1", db=db)
    assert p.returncode == 2 and "nosuchop" in p.stderr


def _matmul_template(cfg, s, tensors):
    a, b, c = tensors
    i, j = s[c].op.axis
    cfg.define_split("tile_i", i.extent, max_factor=16)
    cfg.define_split("tile_j", j.extent, max_factor=32, policy="power2")
    cfg.define_knob("parallel", [True, False])
    io, ii = s[c].split(i, factor=cfg["tile_i"])
    jo, ji = s[c].split(j, factor=cfg["tile_j"])
    s[c].reorder(io, jo, ii, ji)
    if cfg["parallel"]:
        s[c].parallel(io)
    s[c].vectorize(ji)


@pytest.mark.slow
def test_tune_with_expert_template(db_url):
    from autosched.space.template import TemplateSpace

    w = Workload.create("matmul", 48, 64, 16)
    space = TemplateSpace(w.dag, _matmul_template, w.args_order)
    assert space.space.names == ("tile_i", "tile_j", "parallel")
    assert space.space.knob("tile_j").choices == (1, 2, 4, 8, 16, 32)
    r = asc.tune(w, "cpu", 8, db=db_url, batch_size=8, progress=False, template=_matmul_template,
                 cost_model=None, searcher="random")
    assert r.best_steps_json is not None and r.measured >= 1
    steps = json.loads(r.best_steps_json)
    assert {st["kind"] for st in steps} >= {"split", "reorder", "annotate"}


def test_template_errors_are_clear():
    from autosched.schedule.state import ScheduleError
    from autosched.space.template import TemplateSpace

    w = Workload.create("matmul", 8, 8, 8)

    def no_knobs(cfg, s, t):
        pass

    def reads_undefined(cfg, s, t):
        cfg["x"]

    with pytest.raises(ScheduleError, match="defines no knobs"):
        TemplateSpace(w.dag, no_knobs, w.args_order)
    with pytest.raises(ScheduleError, match="before defining"):
        TemplateSpace(w.dag, reads_undefined, w.args_order)


@pytest.mark.parametrize("width", [64, 67])
def test_sketch_lanes_knob_gives_correct_row_reductions(width):
    """The row max and sum of a softmax rfactored into vector lanes, at a width the lanes divide and
    at one they do not (the ragged last chunk)."""
    from autosched.schedule.state import ScheduleError
    from autosched.space.cpu_sketch import SketchSpace

    w = Workload.create("softmax", 8, width)
    sp = SketchSpace(w.dag)
    assert "maxelem.lanes" in sp.space.names and "expsum.lanes" in sp.space.names
    assert 0 in sp.space.knob("maxelem.lanes").choices and len(sp.space.knob("maxelem.lanes").choices) > 1
    x = w.dag.random_inputs(2)
    ref = w.dag.evaluate(x)["norm"]
    built = 0
    for cfg in sp.space.iter_configs():
        v = sp.space.values(cfg)
        if not (v["maxelem.lanes"] and v["expsum.lanes"]) or built >= 8:
            continue
        try:
            s = sp.apply(cfg)
            f = asc.build(s, [w.dag[n] for n in w.args_order])
        except ScheduleError:
            continue
        assert any(st.kind == "rfactor" for st in s.steps)
        out = np.empty((8, width), "float32")
        f(x["X"], out)
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-7)
        built += 1
    assert built >= 4


@pytest.mark.slow
def test_warm_start_learns_from_slow_records_too(db_url):
    """The transfer set spans each other workload's records, not only its best ones (a ranker needs both)."""
    from autosched.cost_model.xgb_model import XGBModel
    from autosched.target.key import Target
    from autosched.tuning.api import open_db, warm_start

    other = Workload.create("matmul", 32, 32, 32)
    asc.tune(other, "cpu", 16, db=db_url, batch_size=6, progress=False, seed=2, cost_model=None)
    db = open_db(db_url)
    target = Target.host()
    throughputs = sorted(other.flops / r.median for r in db.records(other.key, target.key, ok_only=True))
    assert len(throughputs) >= 14
    model = XGBModel(seed=0, min_samples=4)
    n = warm_start(model, db, target, exclude_key="some-other-workload", limit=9)
    assert n == 9 and model.is_trained
    used = np.sort(model._y)
    slowest_quarter = throughputs[len(throughputs) // 4 - 1]
    assert used[0] <= slowest_quarter and used[-1] > np.median(throughputs)  # slow and fast schedules both learned
