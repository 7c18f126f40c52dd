"""Why one schedule measures differently from one search step to the next (issue 28's conv2d spread).

In the efficiency runs the same rule seed of conv2d measured 103-197 GFLOP/s as the first measurement
of five runs, and 183-198 when the runs' bests were re-measured side by side at the end. This times one
schedule (the space's first rule seed) through the tuner's own measurer under the conditions a search
step puts it in, each `--n` times in rotation:
  * `alone`: measured again right after itself (artifact cached, nothing in between);
  * `after_build`: measured right after a batch of `--batch` other candidates was compiled (gcc just ran);
  * `after_batch`: measured right after a batch of other candidates was measured (other kernels just ran);
  * `after_step`: measured right after a step of a guided search (genetic + xgb: proposal with the
    cost model and candidate lowering in this process and its feature workers, a batch built and
    measured, the model retrained).
Prints each condition's median, min and max GFLOP/s, and beside each measurement the CPU time the
hypervisor took from this VM during it (`steal` of /proc/stat, Linux only).

Run: `.venv/bin/python benchmarks/diag_measure_spread.py [--workload conv2d] [--n 12]`
"""

from __future__ import annotations

import os

os.environ.setdefault("GOMP_SPINCOUNT", "10000000")  # as the other CPU benchmarks

import argparse
import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_efficiency import SUITE  # noqa: E402


def steal_ms() -> float:
    """CPU time stolen from this machine by its hypervisor so far, all CPUs together (0 where unknown)."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()
        return int(fields[8]) * 1000 / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workload", default="conv2d", choices=list(SUITE))
    ap.add_argument("--n", type=int, default=12, help="rotations (each condition measured once per rotation)")
    ap.add_argument("--batch", type=int, default=8)
    a = ap.parse_args(argv)

    import numpy as np

    from autosched.compile.types import MeasureInput
    from autosched.space.registry import make_space
    from autosched.target.key import Target
    from autosched.tuning.api import close_measurer, default_measurer
    from autosched.tuning.tuner import TaskTuner, TuneOptions, make_cost_model
    from autosched.workload import Workload

    op, args = SUITE[a.workload]
    w = Workload.create(op, *args)
    tgt = Target.parse("cpu")
    space = make_space(w, "cpu")
    if not space.seeds:
        raise SystemExit(f"{a.workload}: the space has no rule seeds to time")

    def inp(config) -> MeasureInput:
        steps = space.apply(config).steps_json()
        return MeasureInput(w.key, w.to_json(), tgt.key, json.dumps(steps))

    seed = inp(space.space.index_of(space.seeds[0]))
    rng = np.random.default_rng(0)
    inner = default_measurer(kind="cpu")
    opts = TuneOptions(10_000, a.batch, "genetic", "xgb", 0, verify=0, transfer=False, seeds=False, progress=False)
    tuner = TaskTuner(w, tgt, inner, opts, model=make_cost_model("xgb", 0))
    gf: dict[str, list[float]] = {k: [] for k in ("alone", "after_build", "after_batch", "after_step")}

    stolen: dict[str, list[float]] = {k: [] for k in gf}

    def time_seed(label: str) -> None:
        before = steal_ms()
        res = inner.measure([seed])[0]
        gf[label].append(w.flops / res.median / 1e9 if res.ok else 0.0)
        stolen[label].append(steal_ms() - before)

    def fresh_batch() -> list[MeasureInput]:
        out = []
        while len(out) < a.batch:
            c = space.space.sample(rng)
            try:
                out.append(inp(c))
            except ValueError:  # a config that does not apply
                continue
        return out

    time_seed("alone")  # build it once
    gf["alone"].clear()
    for r in range(a.n):
        time_seed("alone")
        batch = fresh_batch()
        inner.builder.build(batch)  # gcc runs now; nothing measured
        time_seed("after_build")
        inner.measure(batch)  # cached artifacts: only the runs
        time_seed("after_batch")
        tuner.step()
        time_seed("after_step")
        print(f"rotation {r + 1}/{a.n}: " + ", ".join(f"{k} {v[-1]:.1f} (steal {stolen[k][-1]:.0f} ms)"
                                                       for k, v in gf.items()), flush=True)
    close_measurer(inner)
    summary = {k: {"median": statistics.median(v), "min": min(v), "max": max(v), "gflops": v, "steal_ms": stolen[k]}
               for k, v in gf.items()}
    for k, s in summary.items():
        print(f"{k:14s} median {s['median']:7.1f}  min {s['min']:7.1f}  max {s['max']:7.1f} GFLOP/s")
    return summary


if __name__ == "__main__":
    main()
