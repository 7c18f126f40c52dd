"""Search efficiency: how many measurements until a searcher holds a kernel this good.

Protocol (one rule for every searcher, so no run gets a head start):
- every run starts from its own database: a fresh empty SQLite file (state "empty", transfer off),
  or a copy of one warm database built once before all runs by tuning OTHER shapes of the same
  operator (state "warm"; identical for every searcher, model-guided runs warm-start from it);
- seeds are on for every searcher or off for every searcher (`TuneOptions.seeds`: the space's
  rule-derived seeds; in the warm state also the transferred best schedules of the other shapes);
- configs that fail to instantiate are never built nor counted, for every searcher (the guided
  searchers' model filter and random search pay the same: nothing);
- the x axis counts measurements: every build+run the measurer performs, failed ones included
  (verification re-measurement is off during the search, so none hide outside the count);
- the curve is the best single measured GFLOP/s so far; at the end each run's best is re-measured
  once, side by side with the other runs' bests, to show lucky samples (`audit`);
- runs advance in lockstep rounds (batch k of every run before batch k+1 of any), so the machine's
  drift over a long run is shared by all searchers.

Run (wrap it in `flock /tmp/autosched-bench.lock` on a shared machine):
  `.venv/bin/python benchmarks/bench_efficiency.py --workloads matmul softmax --seeds 5 --budget 64 \
     --seeded-budget 32 --tvm-results benchmarks/results/bench_tune_cpu_<tag>.json --keep-dbs /tmp/eff`
"""

from __future__ import annotations

import os

# as in the other CPU benchmarks: a spinning OpenMP pool, so a kernel's timing is not a wake-up's
os.environ.setdefault("GOMP_SPINCOUNT", "10000000")

import argparse
import json
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from efficiency_report import (  # noqa: E402
    plot,
    read_tvm,
    report_lines,
    summarize,
    table_lines,
)

SUITE: dict[str, tuple[str, tuple[int, ...]]] = {  # the sizes of bench_tune_cpu.py's SUITE
    "matmul": ("matmul", (1024, 1024, 1024)),
    "conv2d": ("conv2d_nchw", (1, 64, 56, 56, 64, 3, 3, 1, 1)),
    "dense_bias_relu": ("dense_bias_relu", (1024, 1024, 1024)),
    "softmax": ("softmax", (4096, 1024)),
}
WARM_SHAPES: dict[str, list[tuple[int, ...]]] = {  # other shapes of each operator, for the warm state
    "matmul": [(512, 512, 512), (768, 768, 768)],
    "conv2d": [(1, 64, 28, 28, 64, 3, 3, 1, 1)],
    "dense_bias_relu": [(512, 512, 512)],
    "softmax": [(2048, 512)],
}
BATCH = 16
MAX_IDLE_STEPS = 50  # steps in a row that measure nothing (all proposals filtered or known): the run is over


@dataclass(frozen=True)
class Variant:
    """One line of the comparison: a searcher, its cost model (None: measurements alone), seeds on/off."""

    searcher: str
    model: str | None
    seeds: bool
    budget: int

    @property
    def label(self) -> str:
        return f"{self.searcher}{'+' + self.model if self.model else ''}{' +seeds' if self.seeds else ''}"


def parse_searcher(spec: str) -> tuple[str, str | None, int | None]:
    """"random" -> ("random", None, None); "genetic+xgb@100" -> ("genetic", "xgb", 100): a searcher, its
    cost model and its own seeds-off budget (default --budget); unknown names are refused."""
    from autosched.search.registry import SEARCHERS

    spec, at, budget_text = spec.partition("@")
    budget = None
    if at:
        if not budget_text.isdigit() or int(budget_text) < 1:
            raise ValueError(f"budget {budget_text!r} after '@' in {spec}@{budget_text}: want a whole number >= 1")
        budget = int(budget_text)
    name, _, model = spec.partition("+")
    if name not in SEARCHERS:
        raise ValueError(f"unknown searcher {name!r} in {spec!r}; valid: {sorted(SEARCHERS)}")
    if model not in ("", "xgb", "random"):
        raise ValueError(f"unknown cost model {model!r} in {spec!r}; use 'xgb' or 'random' (or none)")
    return name, model or None, budget


class CountingMeasurer:
    """The run's view of the shared measurer: records every result in the run's own database and
    counts it, with the best GFLOP/s after each measurement (the curve)."""

    def __init__(self, inner: Any, db: Any, flops: float) -> None:
        from autosched.tuning.api import RecordToDB

        self.inner, self.record, self.flops = inner, RecordToDB(db), flops
        self.curve: list[float] = []
        self.best_steps: str | None = None
        self.errors: dict[str, int] = {}

    @property
    def n(self) -> int:
        return len(self.curve)

    def measure(self, inputs: list) -> list:
        results = self.inner.measure(inputs)
        self.record(inputs, results)
        best = self.curve[-1] if self.curve else 0.0
        for inp, res in zip(inputs, results):
            g = self.flops / res.median / 1e9 if res.ok and res.median > 0 else 0.0
            if not res.ok:
                self.errors[str(res.error_code)] = self.errors.get(str(res.error_code), 0) + 1
            if g > best:
                best, self.best_steps = g, inp.steps_json
            self.curve.append(best)
        return results


@dataclass
class Run:
    variant: Variant
    seed: int
    tuner: Any
    meter: CountingMeasurer
    db_path: Path
    idle: int = 0
    finished: bool = False
    audit_gflops: float | None = None
    transferred: int = 0
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)

    def step(self) -> None:
        """One batch of at most the measurements left; a run ends at its budget, when its space is
        exhausted, or after MAX_IDLE_STEPS batches in a row that measured nothing."""
        t = self.tuner
        left = self.variant.budget - self.meter.n
        if left <= 0 or t.searcher.exhausted or self.idle >= MAX_IDLE_STEPS:
            self.finished = True
            return
        t.options = t.options.replace(trials=t.trials + left)  # a batch never proposes past the budget
        before, t0 = self.meter.n, time.perf_counter()
        used = t.step()
        self.seconds += time.perf_counter() - t0
        self.idle = self.idle + 1 if self.meter.n == before else 0
        if used == 0 and t.proposed_last == 0:
            self.finished = True


def make_run(w: Any, tgt: Any, inner: Any, v: Variant, seed: int, workdir: Path, warm_db: Path | None) -> Run:
    """A run from its own database: empty, or a copy of the shared warm one."""
    from autosched.tuning.api import known_schedules, open_db, register, warm_start
    from autosched.tuning.transfer import transfer_seeds
    from autosched.tuning.tuner import TaskTuner, TuneOptions, make_cost_model

    path = workdir / f"{w.name}-{'warm' if warm_db else 'empty'}-{v.label.replace(' +', '_')}-s{seed}.db"
    if warm_db is not None:
        shutil.copyfile(warm_db, path)
    db = open_db(f"sqlite:///{path}")
    register(db, w, tgt)
    meter = CountingMeasurer(inner, db, w.flops)
    opts = TuneOptions(v.budget, BATCH, v.searcher, v.model, seed, verify=0, transfer=False, seeds=v.seeds,
                       progress=False)
    model = make_cost_model(v.model, seed)
    if model is not None and warm_db is not None and v.model == "xgb":
        warm_start(model, db, tgt, exclude_key=w.key, seed=seed)
    t = TaskTuner(w, tgt, meter, opts, known=known_schedules(db, w.key, tgt.key), model=model)
    transferred = 0
    if warm_db is not None and v.seeds:  # the warm state's seeds, for every searcher alike
        moved = transfer_seeds(db, w, tgt, t.space)
        t.add_transfer_seeds(moved)
        transferred = len(moved)
    return Run(v, seed, t, meter, path, transferred=transferred)


def run_lockstep(runs: list[Run], log: Any = print) -> None:
    """Batch k of every run before batch k+1 of any, the order rotating each round."""
    total = sum(r.variant.budget for r in runs)
    t0, rnd = time.perf_counter(), 0
    while not all(r.finished for r in runs):
        k = rnd % len(runs)
        for r in runs[k:] + runs[:k]:
            if not r.finished:
                r.step()
        rnd += 1
        log(f"round {rnd}: {sum(r.meter.n for r in runs)}/{total} measurements ({time.perf_counter() - t0:.0f} s)")


def audit(runs: list[Run], inner: Any, w: Any, tgt: Any) -> None:
    """Re-measure each run's best schedule once, all of them in one rotating pass (not counted in
    the curves): a best that was a lucky sample shows here as a lower figure."""
    from autosched.compile.types import MeasureInput

    todo = [r for r in runs if r.meter.best_steps is not None]
    if not todo:
        return
    inputs = [MeasureInput(w.key, w.to_json(), tgt.key, r.meter.best_steps) for r in todo]
    for r, res in zip(todo, inner.measure(inputs)):
        r.audit_gflops = w.flops / res.median / 1e9 if res.ok and res.median > 0 else 0.0


def build_warm_db(op: str, shapes: list[tuple[int, ...]], inner: Any, tgt: Any, measurements: int,
                  path: Path) -> Path:
    """Tune other shapes of `op` (genetic+xgb with seeds, `measurements` each) into one database:
    the shared warm state, built once and copied for every run."""
    from autosched.tuning.api import open_db, register
    from autosched.tuning.tuner import TaskTuner, TuneOptions
    from autosched.workload import Workload

    db = open_db(f"sqlite:///{path}")
    for shape in shapes:
        w = Workload.create(op, *shape)
        register(db, w, tgt)
        meter = CountingMeasurer(inner, db, w.flops)
        t = TaskTuner(w, tgt, meter, TuneOptions(measurements, BATCH, "genetic", "xgb", 0, verify=0, transfer=False,
                                                 progress=False))
        run = Run(Variant("genetic", "xgb", True, measurements), 0, t, meter, path)
        while not run.finished:
            run.step()
    db.close()
    return path


# ---------------------------------------------------------------- summary

def main(argv: list[str] | None = None) -> dict:
    from common import command_line, machine

    from autosched.space.registry import make_space
    from autosched.target.key import Target
    from autosched.tuning.api import close_measurer, default_measurer
    from autosched.workload import Workload

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workloads", nargs="+", default=list(SUITE), choices=list(SUITE))
    ap.add_argument("--shape", nargs="+", type=int, default=None, help="override the shape (tests: a small one)")
    ap.add_argument("--searchers", nargs="+", default=["random", "genetic+xgb@100"],
                    help="searcher[+model][@budget]: the budget overrides --budget for its seeds-off runs")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--budget", type=int, default=200, help="measurements per run without rule-derived seeds")
    ap.add_argument("--seeded-budget", type=int, default=32, help="measurements per run with them (0: skip)")
    ap.add_argument("--states", nargs="+", default=["empty"], choices=["empty", "warm"])
    ap.add_argument("--warm-measurements", type=int, default=64)
    ap.add_argument("--tvm-results", type=Path, default=None)
    ap.add_argument("--keep-dbs", type=Path, default=None, help="keep every run's database here (held-out data)")
    ap.add_argument("--tag", default=None, help="result file suffix (default: this machine's ISA tag)")
    ap.add_argument("--out-dir", type=Path, default=HERE / "results")
    ap.add_argument("--from-json", type=Path, default=None, help="re-summarize this result file; measure nothing")
    a = ap.parse_args(argv)
    if a.from_json is not None:
        return resummarize(a.from_json, a.tvm_results, a.out_dir, a.tag or "")
    if a.seeds < 1 or a.budget < 1 or a.seeded_budget < 0:
        ap.error("--seeds and --budget must be >= 1, --seeded-budget >= 0")
    try:
        specs = [parse_searcher(s) for s in a.searchers]
    except ValueError as e:
        ap.error(f"--searchers: {e}")
    tvm = read_tvm(a.tvm_results)
    tgt = Target.parse("cpu")
    inner = default_measurer(kind="cpu")
    workdir = a.keep_dbs or Path(tempfile.mkdtemp(prefix="eff-"))
    workdir.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    head = {"machine": machine(), "command": command_line("bench_efficiency.py"), "protocol": __doc__,
            "tvm_results": str(a.tvm_results) if a.tvm_results else None, "seeds": a.seeds, "budget": a.budget,
            "seeded_budget": a.seeded_budget, "searchers": a.searchers, "states": a.states}
    try:
        for name in a.workloads:
            op, shape = SUITE[name]
            w = Workload.create(op, *(a.shape or shape))
            has_seeds = bool(getattr(make_space(w, "cpu"), "seeds", ()))
            results[name] = {"op": op, "args": list(a.shape or shape), "has_rule_seeds": has_seeds,
                             "tvm": tvm.get(name), "states": {}, "machine": head["machine"],
                             "command": head["command"]}
            for state in a.states:
                warm = None
                if state == "warm":
                    warm = build_warm_db(op, WARM_SHAPES[name], inner, tgt, a.warm_measurements,
                                         workdir / f"{name}-warm-base.db")
                variants = [Variant(s, m, False, b or a.budget) for s, m, b in specs]
                # a space without rule-derived seeds (softmax) would repeat the seeds-off runs: skipped
                if a.seeded_budget and (has_seeds or state == "warm"):
                    variants += [Variant(s, m, True, a.seeded_budget) for s, m, _ in specs]
                runs = [make_run(w, tgt, inner, v, seed, workdir, warm) for v in variants for seed in range(a.seeds)]
                t0 = time.perf_counter()
                run_lockstep(runs, log=lambda m, n=name, s=state: print(f"{n} {s} {m}", flush=True))
                audit(runs, inner, w, tgt)
                summ = summarize(runs, (tvm.get(name) or {}).get("gflops"), has_seeds)
                summ["seconds"] = time.perf_counter() - t0
                summ["curves"] = {}
                for r in runs:
                    summ["curves"].setdefault(r.variant.label, []).append(r.meter.curve)
                summ["runs"] = [{"label": r.variant.label, "variant": vars_of(r.variant), "seed": r.seed,
                                 "measured": r.meter.n, "curve": r.meter.curve, "transferred": r.transferred,
                                 "trials": r.tuner.trials, "errors": r.meter.errors, "audit_gflops": r.audit_gflops,
                                 "final_gflops": r.meter.curve[-1] if r.meter.curve else 0.0,
                                 "db": str(r.db_path) if a.keep_dbs else None} for r in runs]
                results[name]["states"][state] = summ
                print("\n".join(table_lines(name, state, summ)), flush=True)
                write(a, results, head)  # after every workload: a run cut short keeps what it finished
    finally:
        close_measurer(inner)
        if a.keep_dbs is None:
            shutil.rmtree(workdir, ignore_errors=True)
    return write(a, results, head)


def vars_of(v: Variant) -> dict:
    return {"searcher": v.searcher, "model": v.model, "seeds": v.seeds, "budget": v.budget}


def resummarize(path: Path, tvm_path: Path | None, out_dir: Path, tag: str) -> dict:
    """Summarize a finished run's JSON again (e.g. with TVM's figures that came later), measuring nothing."""
    from types import SimpleNamespace

    data = json.loads(path.read_text())
    tvm = read_tvm(tvm_path)
    for name, d in data["workloads"].items():
        d["tvm"] = tvm.get(name) or d.get("tvm")
        for summ in d["states"].values():
            runs = [SimpleNamespace(variant=Variant(**r["variant"]), audit_gflops=r["audit_gflops"],
                                    transferred=r["transferred"],
                                    meter=SimpleNamespace(curve=r["curve"], n=len(r["curve"])))
                    for r in summ["runs"]]
            summ.update(summarize(runs, (d["tvm"] or {}).get("gflops"), d.get("has_rule_seeds", True)))
    head = {k: v for k, v in data.items() if k != "workloads"}
    head["tvm_results"] = str(tvm_path) if tvm_path else head.get("tvm_results")
    return write(SimpleNamespace(tag=tag, out_dir=out_dir), data["workloads"], head)


PROTOCOL_KEYS = ("seeds", "budget", "seeded_budget", "searchers")
"""Settings two runs must share for their workloads to sit in one report (`merge_previous`)."""


def merge_previous(path: Path, results: dict, head: dict) -> dict:
    """This run's results with the workloads and states of an earlier result file at `path` that it did not
    measure, when that file used the same protocol settings (so one report may be measured a few
    workloads or states at a time); this run's alone otherwise."""
    if not path.exists():
        return results
    old = json.loads(path.read_text())
    if any(old.get(k) != head.get(k) for k in PROTOCOL_KEYS):
        print(f"note: {path.name} was measured with other settings; this run replaces it", file=sys.stderr)
        return results
    merged = dict(old.get("workloads", {}))
    for name, d in results.items():
        earlier = merged.get(name)
        if earlier is not None and "states" in earlier and "states" in d and earlier.get("args") == d.get("args"):
            # a run of one state (say "warm") keeps the other states measured earlier, each with the
            # machine and command it was measured with
            kept = {st: {"machine": earlier.get("machine"), "command": earlier.get("command"), **summ}
                    for st, summ in earlier.get("states", {}).items() if st not in d.get("states", {})}
            d = {**d, "states": {**kept, **d.get("states", {})}}
        merged[name] = d
    return merged


def write(a: argparse.Namespace, results: dict, head: dict) -> dict:
    """The result files: efficiency_<tag>.{json,md,png}, with the workloads of earlier runs of the same
    protocol kept (each workload carries the machine, date and command it was measured with)."""
    from common import machine_tag

    tag = a.tag or machine_tag()
    a.out_dir.mkdir(parents=True, exist_ok=True)
    stem = a.out_dir / f"efficiency_{tag}"
    results = merge_previous(stem.with_suffix(".json"), results, head)
    out = {**head, "workloads": results}
    stem.with_suffix(".json").write_text(json.dumps(out, indent=1, default=str))
    stem.with_suffix(".md").write_text("\n".join(report_lines(tag, out)) + "\n")
    plot(results, stem.with_suffix(".png"))
    return out

if __name__ == "__main__":
    main()
