"""The public tuning API: `asc.tune`, `asc.tune_many`, `asc.apply_best`, and `asc.TuneOptions`.

`tune` and `tune_many` take their options as one `TuneOptions` (autosched.tuning.options) plus
keyword overrides of its fields, and wire the pieces in one place, `Session`: the database
(tuning_db/) that records every result and lets a second run start from what the first learned,
the measurer with its builder and runner (measure/), the cost model, the progress display, and per
workload its sketch space and searcher (a `TaskTuner`).
"""

from __future__ import annotations

import importlib
import json
import math
import os
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from autosched.compile.cpu_kernel import BuiltKernel, build
from autosched.compile.types import MeasureInput
from autosched.measure.batch import ProgramMeasurer
from autosched.measure.types import MeasureResult
from autosched.schedule.replay import schedule_from_steps
from autosched.space.template import TemplateSpace
from autosched.target.key import Target
from autosched.te.tensor import Tensor
from autosched.tuning.candidates import features_of_steps
from autosched.tuning.options import TuneOptions
from autosched.tuning.progress import TuneProgress
from autosched.tuning.protocols import CostModel, Database, Measurer, SearchSpace
from autosched.tuning.task_scheduler import TaskScheduler
from autosched.tuning.transfer import transfer_seeds
from autosched.tuning.tuner import Prior, TaskTuner, TuneResult, make_cost_model
from autosched.workload import Workload
from tuning_db import TuningDB
from tuning_db.settings import db_settings_from_env
from tuning_db.types import DISQUALIFYING, MIN_VERIFIED, ORIGIN_LOCAL, RecordIn

__all__ = ["NoTunedScheduleError", "Session", "TuneOptions", "TuneResult", "UnverifiedScheduleWarning", "apply_best",
           "known_schedules", "open_db",
           "plot_curves", "tune", "tune_many"]


class NoTunedScheduleError(LookupError):
    """The database holds no valid record for this workload and target."""


class UnverifiedScheduleWarning(UserWarning):
    """The schedule served has fewer than MIN_VERIFIED valid measurements on this target."""


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
        return TuningDB(db_settings_from_env())
    return TuningDB(db if "://" in str(db) else f"sqlite:///{Path(db).expanduser()}")


def register(db: Database, w: Workload, target: Target) -> None:
    db.ensure_workload(w.key, w.name, w.to_dict(), w.flops)
    db.ensure_target(target.key, target.kind, {"kind": target.kind, "device": target.device, "cores": target.cores})


def known_schedules(db: Database, workload_key: str, target_key: str) -> dict[str, Prior]:
    """steps hash -> what the database holds of every schedule for (workload, target): what a run
    reuses instead of measuring again (resume), and what it must never pick.

    The rule, the same for `tune` and `tune_many`: a schedule with any wrong-answer, runtime-error or
    crash record is ruled out; a valid record counts only if it was measured by this database's
    tuners (imported records are unverified: a schedule known only from an import is measured
    again) with a finite, positive median (a zero or non-finite cost is no measurement).
    """
    local: dict[str, list[float]] = {}
    ruled_out: set[str] = set()
    for r in db.records(workload_key, target_key):
        if r.error_code in DISQUALIFYING:
            ruled_out.add(r.steps_hash)
        elif (r.ok and r.origin == ORIGIN_LOCAL and r.median is not None and math.isfinite(r.median)
              and r.median > 0):
            local.setdefault(r.steps_hash, []).append(r.median)
    known = {h: Prior(tuple(m)) for h, m in local.items()}
    known.update({h: Prior(disqualified=True) for h in ruled_out})
    return known


class RecordToDB:
    """Measure callback: every result, failed ones too, becomes a record."""

    def __init__(self, db: Database, job_id: str | None = None) -> None:
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
    """The class named by "module:name", imported now (the GPU runner's module needs CuPy)."""
    mod, _, name = spec.partition(":")
    return getattr(importlib.import_module(mod), name)


def default_measurer(runner: Any = None, builder: Any = None, callbacks: Sequence = (),
                     kind: str = "cpu") -> ProgramMeasurer:
    """A ProgramMeasurer over a local process-pool builder and an isolated local runner, or Ray."""
    if runner == "ray" or (isinstance(runner, str) and ":" in runner):
        from autosched.measure.ray_runner import RayRunner  # lazy: importing Ray costs seconds

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


def warm_start(model: CostModel, db: Database, target: Target, exclude_key: str | None = None, limit: int = 1500,
               seed: int = 0) -> int:
    """Train `model` on the database's records of other workloads on the same target (transfer).

    A ranker learns what separates fast from slow, so each workload contributes an even sample of
    all its successful records (slow ones included), not only its best ones: trained on top-k
    records alone, every example looks good and the model learns nothing about what to avoid.
    """
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


def add_transfer_seeds(task: TaskTuner, db: Database) -> None:
    """With the xgb model and `transfer` on, start `task` from the best stored schedules of the same
    operator at other shapes (see `autosched.tuning.transfer`)."""
    if task.options.cost_model == "xgb" and task.options.transfer:
        task.add_transfer_seeds(transfer_seeds(db, task.workload, task.target, task.space))


def close_measurer(measurer: Any) -> None:
    for obj in (getattr(measurer, "runner", None), getattr(measurer, "builder", None)):
        close = getattr(obj, "close", None) or getattr(obj, "shutdown", None)
        if close is not None:
            try:
                close()
            except Exception:  # noqa: BLE001  closing must not mask the tuning result
                pass


class Session:
    """The wiring of one tuning call, in one place for `tune` and `tune_many`.

    Opens the database, the measurer (builder and runner; every result becomes a record), one cost
    model and the progress display; `task(w)` registers a workload and makes its TaskTuner over
    them, starting from what the database already knows of it (`known_schedules`) and, with the xgb
    model and `transfer`, from the same operator's best schedules at other shapes. Several tasks
    share the measurer and the model. Closing the session closes the runner, builder and display.
    """

    def __init__(self, target: Target, options: TuneOptions, workloads: Sequence[Workload] = (), *,
                 budget: int | None = None) -> None:
        self.target, self.options = target, options
        self.db: Database = open_db(options.db)
        self.model: CostModel | None = make_cost_model(options.cost_model, options.seed)
        self.measurer: Measurer = default_measurer(options.runner, options.builder,
                                                   [RecordToDB(self.db, options.job_id)], kind=target.kind)
        self.progress: TuneProgress | None = None
        if TuneProgress.wanted(options.progress):
            self.progress = TuneProgress([w.name for w in workloads], [options.trials] * len(workloads),
                                         budget=budget)

    def warm_start(self, exclude_key: str | None) -> int:
        """Train the xgb model on the database's records of other workloads (`warm_start`); a model
        shared by live tasks (`tune_many`) learns from them instead."""
        if self.model is None or self.options.cost_model != "xgb":
            return 0
        return warm_start(self.model, self.db, self.target, exclude_key=exclude_key, seed=self.options.seed)

    def task(self, workload: Workload, *, space: SearchSpace | None = None,
             check_transfer: bool = True) -> TaskTuner:
        register(self.db, workload, self.target)
        task = TaskTuner(workload, self.target, self.measurer, self.options,
                         known=known_schedules(self.db, workload.key, self.target.key), model=self.model,
                         on_batch=self._after_batch, space=space, check_transfer=check_transfer)
        add_transfer_seeds(task, self.db)
        return task

    def should_stop(self) -> bool:
        return self.options.should_stop is not None and bool(self.options.should_stop())

    def _after_batch(self, task: TaskTuner) -> None:
        if self.progress is not None:
            self.progress.update(task)
        if self.options.on_batch is not None:
            self.options.on_batch(task)

    def close(self) -> None:
        try:
            close_measurer(self.measurer)
        finally:
            if self.progress is not None:
                self.progress.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def tune(workload: Workload | Sequence[Tensor] | str, target: str | Target = "cpu", trials: int | None = None, *,
         options: TuneOptions | None = None, **overrides: Any) -> TuneResult:
    """Tune `workload` on `target` for `trials` candidates; every result goes to the database.

    Options: `options` (a `TuneOptions`; default: its defaults, 200 trials), then `trials` if given,
    then `overrides`, keywords named like the fields of `TuneOptions` (`db=`, `searcher=`,
    `batch_size=`, `progress=`, ...); an unknown keyword raises TypeError.

    `on_batch(task)` is called after every batch (progress: `task.trials`, `task.best_cost`,
    `task.curve`); `should_stop()` is checked between batches, so a job can be cancelled cleanly.
    `template(cfg, s, tensors)` replaces the generated sketch space with an expert template
    (see `autosched.space.template`). At the end the `verify` best schedules are brought to
    MIN_VERIFIED measurements each, back to back, and the best by the median of its measurements
    wins (`TaskTuner.verify`); a schedule that ever fails its check is ruled out for good.
    With the xgb model, the knowledge of other workloads in the database is used twice: the model
    is warm-started from their records, and (`transfer`) the best schedules of the same operator at
    other shapes are measured first (`autosched.tuning.transfer`). Without a model a run uses its
    own measurements alone. `progress`: a live display on a terminal, plain lines otherwise.
    """
    opts = TuneOptions.resolve(options, overrides, "tune", trials=trials)
    w = as_workload(workload)
    tgt = Target.parse(target)
    space = TemplateSpace(w.dag, opts.template, w.args_order) if opts.template is not None else None
    with Session(tgt, opts, [w]) as session:
        session.warm_start(exclude_key=None)  # the workload's own stored records too: a resumed run starts informed
        t0 = time.perf_counter()
        task = session.task(w, space=space)
        result = task.run(session.should_stop)
    result.seconds = time.perf_counter() - t0
    if opts.plot:
        plot_curves({w.name: result.curve}, opts.plot, title=f"{w.name} on {tgt.kind}")
    return result


def tune_many(workloads: Sequence[Workload], target: str | Target = "cpu", trials: int | None = None, *,
              weights: Sequence[float] | None = None, options: TuneOptions | None = None,
              **overrides: Any) -> list[TuneResult]:
    """Share a budget of `trials` (default 400, or `options.trials`) over several workloads with
    Ansor's gradient-based task scheduler. Options as for `tune`; the tasks share one measurer and
    one cost model (not warm-started: the live tasks teach it), and `template` does not apply."""
    if trials is None and options is None:
        trials = 400
    opts = TuneOptions.resolve(options, overrides, "tune_many", trials=trials)
    if opts.template is not None:
        raise TypeError("tune_many() takes no template: a template is one workload's space; use tune()")
    tgt = Target.parse(target)
    with Session(tgt, opts, workloads, budget=opts.trials) as session:
        # the model is shared by live tasks: their records are not stale transfer to be checked
        tasks = [session.task(w, check_transfer=False) for w in workloads]
        sched = TaskScheduler(len(tasks), weights)
        used, t0 = 0, time.perf_counter()
        while used < opts.trials and not sched.done and not session.should_stop():
            k = sched.next_task()
            n = tasks[k].step()
            used += n
            sched.update(k, tasks[k].best_cost, n)
            if tasks[k].proposed_last == 0 or tasks[k].done:
                sched.dead[k] = True  # nothing left to try for this task
        if not session.should_stop():
            for t in tasks:
                t.verify()
    results = [t.result(time.perf_counter() - t0) for t in tasks]
    if opts.plot:
        plot_curves({r.workload.name: r.curve for r in results}, opts.plot, title=f"{len(results)} tasks on {tgt.kind}")
    return results


def apply_best(workload: Workload | Sequence[Tensor] | str, target: str | Target = "cpu", *,
               db: TuningDB | str | None = None) -> BuiltKernel:
    """The built kernel of the best schedule for (workload, target); says so plainly when there is
    none. A schedule that ever failed its check is never served (`TuningDB.best`); an unverified
    best (fewer than MIN_VERIFIED measurements here, e.g. imported) is served with a warning."""
    w = as_workload(workload)
    tgt = Target.parse(target)
    database = open_db(db)
    rec = database.best(w.key, tgt.key)
    if rec is None:
        raise NoTunedScheduleError(
            f"no tuned schedule for workload {w.name} (key {w.key[:16]}...) on target {tgt.key!r}; "
            f"run `autosched tune` for it first")
    standing = database.standing(w.key, tgt.key, rec.steps_hash)
    if standing is not None and not standing.verified:
        warnings.warn(f"the best schedule for {w.name} on {tgt.key!r} is unverified ({standing.n_valid} valid "
                      f"measurements here, {MIN_VERIFIED} needed); `autosched verify {w.key}` re-measures it",
                      UnverifiedScheduleWarning, stacklevel=2)
    s, args = schedule_from_steps(w, rec.steps_json)
    return build(s, args, tgt)


def plot_curves(curves: dict[str, list[tuple[int, float]]], path: str | Path, title: str = "") -> Path:
    import matplotlib  # lazy: plotting is optional and matplotlib is slow to import

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
