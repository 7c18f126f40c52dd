"""The public tuning API: `asc.tune`, `asc.tune_many`, `asc.apply_best`.

Wires the pieces: the workload's sketch space and a searcher (search/), the measurer with its
builder and runner (measure/), and the tuning database (tuning_db/) that records every result
and lets a second run start from what the first one learned.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from autosched.compile.types import MeasureInput
from autosched.measure.types import MeasureResult
from autosched.schedule.replay import schedule_from_steps
from autosched.target.key import Target
from autosched.te.tensor import Tensor
from autosched.tuning.tuner import TaskTuner, TuneOptions, TuneResult, make_cost_model
from autosched.workload import Workload
from tuning_db import TuningDB
from tuning_db.types import RecordIn


class NoTunedScheduleError(LookupError):
    """The database holds no valid record for this workload and target."""


def as_workload(w: Workload | Sequence[Tensor] | str, *args: Any) -> Workload:
    if isinstance(w, Workload):
        return w
    if isinstance(w, str):
        return Workload.create(w, *args)
    if isinstance(w, Sequence) and w and all(isinstance(t, Tensor) for t in w):
        return Workload.from_tensors(list(w))
    raise TypeError(f"expected a Workload, an op name or a list of tensors, got {type(w).__name__}")


def open_db(db: TuningDB | str | None) -> TuningDB:
    if isinstance(db, TuningDB):
        return db
    if db is None:
        from tuning_db.settings import db_settings_from_env

        return TuningDB(db_settings_from_env())
    return TuningDB(db if "://" in str(db) else f"sqlite:///{Path(db).expanduser()}")


def register(db: TuningDB, w: Workload, target: Target) -> None:
    db.ensure_workload(w.key, w.name, w.to_dict(), w.flops)
    db.ensure_target(target.key, target.kind, {"kind": target.kind, "device": target.device, "cores": target.cores})


class RecordToDB:
    """Measure callback: every result, failed ones too, becomes a record."""

    def __init__(self, db: TuningDB, job_id: str | None = None) -> None:
        self.db, self.job_id = db, job_id

    def __call__(self, inputs: Sequence[MeasureInput], results: Sequence[MeasureResult]) -> None:
        recs = []
        for inp, res in zip(inputs, results):
            costs = tuple(c for c in res.costs if math.isfinite(c)) if res.ok else ()
            recs.append(RecordIn(
                workload_key=inp.workload_key, target_key=inp.target, steps=json.loads(inp.steps_json),
                costs=costs, error_code=int(res.error_code),
                error_msg=res.error_msg[:2000], build_seconds=res.build_seconds, run_seconds=res.run_seconds,
                host=res.host, device=res.device, worker_id=str(res.worker_id), job_id=self.job_id))
        self.db.commit_records(recs)


# local (runner, builder) per target kind: GPU candidates compile with NVRTC/Triton and run on a GPU
_LOCAL_MEASURE = {
    "cpu": ("autosched.measure.local_runner:LocalRunner", "autosched.compile.builder:LocalBuilder"),
    "cuda": ("autosched.measure.gpu_runner:GpuRunner", "autosched.measure.gpu_runner:GpuBuilder"),
    "triton": ("autosched.measure.gpu_runner:GpuRunner", "autosched.measure.gpu_runner:GpuBuilder"),
}


def _load(spec: str):
    import importlib

    mod, _, name = spec.partition(":")
    return getattr(importlib.import_module(mod), name)


def default_measurer(runner: Any = None, builder: Any = None, callbacks: Sequence = (), kind: str = "cpu"):
    """A ProgramMeasurer over a local process-pool builder and an isolated local runner, or Ray."""
    from autosched.measure.batch import ProgramMeasurer

    if runner == "ray" or (isinstance(runner, str) and ":" in runner):
        from autosched.measure.ray_runner import RayRunner

        runner = RayRunner(address=None if runner == "ray" else runner)
    run_cls, build_cls = _LOCAL_MEASURE[kind]
    if runner is None:
        runner = _load(run_cls)()
    if builder is None:
        if hasattr(runner, "build"):
            builder = runner
        else:
            builder = _load(build_cls)(n_workers=max(1, (os.cpu_count() or 2)))
    return ProgramMeasurer(builder, runner, list(callbacks))


def warm_start(model, db: TuningDB, target: Target, exclude_key: str | None = None, limit: int = 1500,
               seed: int = 0) -> int:
    """Train `model` on the database's records of other workloads on the same target (transfer).

    A ranker learns what separates fast from slow, so each workload contributes an even sample of
    all its successful records (slow ones included), not only its best ones: trained on top-k
    records alone, every example looks good and the model learns nothing about what to avoid.
    """
    from autosched.tuning.candidates import features_of_steps

    infos = [i for i in db.workloads() if i.key != exclude_key]
    per_workload = max(1, limit // max(1, len(infos)))
    rng = np.random.default_rng(seed)
    triples = []
    for info in infos:
        try:
            w = Workload.from_json(info.spec)
        except Exception:  # noqa: BLE001  a record from an older format: skip it, don't fail the tuner
            continue
        recs = [r for r in db.records(info.key, target.key, ok_only=True) if r.median]
        if len(recs) > per_workload:
            recs = [recs[i] for i in sorted(rng.choice(len(recs), per_workload, replace=False))]
        for rec in recs:
            f = features_of_steps(w, rec.steps_json, target.kind)
            if f is not None:
                triples.append((f, w.flops / rec.median, info.key))
    if len(triples) >= 8:
        model.fit_from_records(triples)
    return len(triples)


def add_transfer_seeds(task: TaskTuner, db: TuningDB) -> None:
    """With the xgb model and `transfer` on, start `task` from the best stored schedules of the same
    operator at other shapes (see `autosched.tuning.transfer`)."""
    from autosched.tuning.transfer import transfer_seeds

    if task.options.cost_model == "xgb" and task.options.transfer:
        task.add_transfer_seeds(transfer_seeds(db, task.workload, task.target, task.space))


def _progress(task: TaskTuner) -> None:
    if os.environ.get("AUTOSCHED_QUIET"):
        return
    gf = task.curve[-1][1] if task.curve else 0.0
    print(f"[{task.workload.name}] trials {task.trials}/{task.options.trials}  best {gf:8.1f} GFLOP/s  "
          f"measured {task.measured}  reused {task.reused}  errors {sum(task.errors.values())}", flush=True)


def tune(workload: Workload | Sequence[Tensor] | str, target: str | Target = "cpu", trials: int = 200, *,
         searcher: str = "genetic", cost_model: str | None = "xgb", db: TuningDB | str | None = None,
         runner: Any = None, builder: Any = None, batch_size: int = 16, early_stopping: int | None = None,
         seed: int = 0, progress: bool = True, plot: str | Path | None = None, job_id: str | None = None,
         searcher_options: dict | None = None, on_batch: Callable[[TaskTuner], None] | None = None,
         should_stop: Callable[[], bool] | None = None, template: Callable | None = None,
         verify: int = 4, transfer: bool = True) -> TuneResult:
    """Tune `workload` on `target` for `trials` candidates; every result goes to the database.

    `on_batch(task)` is called after every batch (progress: `task.trials`, `task.best_cost`,
    `task.curve`); `should_stop()` is checked between batches, so a job can be cancelled cleanly.
    `template(cfg, s, tensors)` replaces the generated sketch space with an expert template
    (see `autosched.space.template`). At the end the `verify` best schedules are measured twice
    more, back to back, and the best by the median of its measurements wins (`TaskTuner.verify`).
    With the xgb model, the knowledge of other workloads in the database is used twice: the model
    is warm-started from their records, and (`transfer`) the best schedules of the same operator at
    other shapes are measured first (`autosched.tuning.transfer`). Without a model a run uses its
    own measurements alone.
    """
    w = as_workload(workload)
    tgt = Target.parse(target)
    opts = TuneOptions(trials, batch_size, searcher, cost_model, seed, early_stopping, searcher_options or {},
                       verify, transfer)
    database = open_db(db)
    register(database, w, tgt)
    known = {r.steps_hash: r.median for r in database.records(w.key, tgt.key, ok_only=True)
             if r.median is not None}
    model = make_cost_model(cost_model, seed)
    if model is not None and cost_model == "xgb":
        warm_start(model, database, tgt, exclude_key=w.key, seed=seed)
    measurer = default_measurer(runner, builder, [RecordToDB(database, job_id)], kind=tgt.kind)
    t0 = time.perf_counter()
    def after_batch(t: TaskTuner) -> None:
        if progress:
            _progress(t)
        if on_batch is not None:
            on_batch(t)

    space = None
    if template is not None:
        from autosched.space.template import TemplateSpace

        space = TemplateSpace(w.dag, template, w.args_order)
    task = TaskTuner(w, tgt, measurer, opts, known=known, model=model, on_batch=after_batch, space=space)
    add_transfer_seeds(task, database)
    try:
        result = task.run(should_stop)
    finally:
        _close(measurer)
    result.seconds = time.perf_counter() - t0
    if plot:
        plot_curves({w.name: result.curve}, plot, title=f"{w.name} on {tgt.kind}")
    return result


def _close(measurer) -> None:
    for obj in (measurer.runner, measurer.builder):
        close = getattr(obj, "close", None) or getattr(obj, "shutdown", None)
        if close is not None:
            try:
                close()
            except Exception:  # noqa: BLE001  closing must not mask the tuning result
                pass


def tune_many(workloads: Sequence[Workload], target: str | Target = "cpu", trials: int = 400, *,
              weights: Sequence[float] | None = None, db: TuningDB | str | None = None, runner: Any = None,
              searcher: str = "genetic", cost_model: str | None = "xgb", batch_size: int = 16, seed: int = 0,
              progress: bool = True) -> list[TuneResult]:
    """Share a budget of `trials` over several workloads with Ansor's gradient-based task scheduler."""
    from autosched.tuning.task_scheduler import TaskScheduler

    tgt = Target.parse(target)
    database = open_db(db)
    measurer = default_measurer(runner, None, [RecordToDB(database)], kind=tgt.kind)
    model = make_cost_model(cost_model, seed)  # one model shared by all tasks: they transfer
    tasks = []
    for w in workloads:
        register(database, w, tgt)
        known = {r.steps_hash: r.median for r in database.records(w.key, tgt.key, ok_only=True) if r.median}
        tasks.append(TaskTuner(w, tgt, measurer, TuneOptions(trials, batch_size, searcher, cost_model, seed),
                               known=known, model=model, on_batch=_progress if progress else None,
                               check_transfer=False))
    for t in tasks:
        add_transfer_seeds(t, database)
    sched = TaskScheduler(len(tasks), weights)
    used, t0 = 0, time.perf_counter()
    try:
        while used < trials and not sched.done:
            k = sched.next_task()
            n = tasks[k].step()
            used += n
            sched.update(k, tasks[k].best_cost, n)
            if n == 0 or tasks[k].done:
                sched.dead[k] = True  # nothing left to try for this task
        for t in tasks:
            t.verify()
    finally:
        _close(measurer)
    return [t.result(time.perf_counter() - t0) for t in tasks]


def apply_best(workload: Workload | Sequence[Tensor] | str, target: str | Target = "cpu", *,
               db: TuningDB | str | None = None):
    """The built kernel of the best record for (workload, target); says so plainly when there is none."""
    from autosched.compile.cpu_kernel import build

    w = as_workload(workload)
    tgt = Target.parse(target)
    database = open_db(db)
    rec = database.best(w.key, tgt.key)
    if rec is None:
        raise NoTunedScheduleError(
            f"no tuned schedule for workload {w.name} (key {w.key[:16]}...) on target {tgt.key!r}; "
            f"run `autosched tune` for it first")
    s, args = schedule_from_steps(w, rec.steps_json)
    return build(s, args, tgt)


def plot_curves(curves: dict[str, list[tuple[int, float]]], path: str | Path, title: str = "") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for label, curve in curves.items():
        if curve:
            xs, ys = zip(*curve)
            ax.plot(xs, ys, label=label)
    ax.set_xlabel("trials")
    ax.set_ylabel("best GFLOP/s so far")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
