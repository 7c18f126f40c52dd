"""Tuned softmax and layernorm against torch eager, timed in many fresh processes.

Why: the issue's target for these kernels is "at least as fast as torch eager", and on the shared
2-core VM one process's interleaved median moves by 20-50% from one process to the next (the same
softmax kernel has timed 1.3-2.9 ms at one hour). One process's ratio is then one draw. This tunes
each workload once, then starts `--procs` fresh processes per thread count, in alternation; each
builds the tuned kernel from the database, checks it against the reference, and times it
interleaved with torch eager as users call it (allocating its output) and, for softmax, torch
writing into a preallocated output as ours does (`torch._softmax(..., out=)`). Reported per
workload and thread count: every process's ratio (torch ms / ours ms, above 1 = ours faster), their
median, and in how many processes ours was at least as fast. One thread shows the kernels alone,
without either runtime's thread pool.

Run: `.venv/bin/python benchmarks/bench_parity.py [--trials 200] [--procs 7] [--threads 2 1]`
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

WORKLOADS = {"softmax": ("softmax", (4096, 1024)), "layernorm": ("layernorm", (4096, 1024))}


def child(db: str, key: str, threads: int, rounds: int) -> dict:
    """One fresh process: our tuned kernel and torch eager, interleaved."""
    import torch
    import torch.nn.functional as F
    from common import interleaved

    import autosched as asc
    from autosched.measure.executor import aligned_empty
    from autosched.workload import Workload

    torch.set_num_threads(threads)
    op, args = WORKLOADS[key]
    w = Workload.create(op, *args)
    f = asc.apply_best(w, db=db)
    x = {}
    for k, v in w.dag.random_inputs(0).items():
        x[k] = aligned_empty(v.shape, v.dtype)
        x[k][...] = v
    outs = {t.name: aligned_empty(t.shape, np.dtype(t.dtype)) for t in w.dag.outputs}
    call = [x[n] if n in x else outs[n] for n in w.args_order]
    f(*call)
    ref = w.dag.evaluate(x)[w.dag.outputs[-1].name]
    err = float(np.abs(outs[w.dag.outputs[-1].name] - ref).max())
    t = {k: torch.from_numpy(v) for k, v in x.items()}
    contenders = {"autosched": lambda: f(*call)}
    if op == "softmax":
        pre = torch.empty_like(t["X"])
        contenders["torch eager (allocates)"] = lambda: torch.softmax(t["X"], dim=-1)
        contenders["torch eager (out=)"] = lambda: torch._softmax(t["X"], -1, False, out=pre)
    else:  # F.layer_norm has no out=
        n = args[1]
        contenders["torch eager (allocates)"] = lambda: F.layer_norm(t["X"], (n,), t["gamma"], t["beta"], 1e-5)
    torch_err = max(float(np.abs(fn().numpy() - ref).max()) for k, fn in contenders.items() if k != "autosched")
    times = interleaved(contenders, rounds=rounds)
    return {"workload": key, "threads": threads, "max_abs_err": err, "torch_max_abs_err": torch_err,
            **{f"{k}_ms": v * 1e3 for k, v in times.items()}}


def spawn(db: str, key: str, threads: int, rounds: int) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), GOMP_SPINCOUNT="10000000")
    out = subprocess.run([sys.executable, __file__, "--child", "--db", db, "--only", key, "--threads", str(threads),
                          "--rounds", str(rounds)], env=env, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise SystemExit(f"{key} ({threads} threads): child failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def summary(runs: list[dict]) -> dict:
    ours = [r["autosched_ms"] for r in runs]
    out = {"processes": len(runs), "autosched_ms": float(np.median(ours))}
    for peer in ("torch eager (allocates)", "torch eager (out=)"):
        if f"{peer}_ms" not in runs[0]:
            continue
        ratios = [r[f"{peer}_ms"] / r["autosched_ms"] for r in runs]
        out[peer] = {"ms": float(np.median([r[f"{peer}_ms"] for r in runs])), "ratios": ratios,
                     "median_ratio": float(np.median(ratios)), "ours_at_least_as_fast": sum(x >= 1.0 for x in ratios)}
    return out


def table(results: dict) -> str:
    lines = ["| workload | threads (each side) | processes | autosched (median ms) | peer | peer (median ms) | "
             "ratio per process (peer / ours) | median ratio | ours at least as fast |",
             "|---|---|---|---|---|---|---|---|---|"]
    for key, by_threads in results.items():
        for threads, s in by_threads.items():
            for peer in ("torch eager (allocates)", "torch eager (out=)"):
                if peer not in s:
                    continue
                p = s[peer]
                lines.append(f"| {key} | {threads} | {s['processes']} | {s['autosched_ms']:.3f} | {peer} | "
                             f"{p['ms']:.3f} | {' '.join(f'{x:.2f}' for x in p['ratios'])} | "
                             f"{p['median_ratio']:.2f}x | {p['ours_at_least_as_fast']} of {s['processes']} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--procs", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--threads", nargs="+", type=int, default=[2, 1])
    ap.add_argument("--only", nargs="*", default=list(WORKLOADS))
    ap.add_argument("--db", default=None, help="database holding the tuned schedules (default: tune into a temp one)")
    ap.add_argument("--out", default="bench_parity")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a.db, a.only[0], a.threads[0], a.rounds)))
        return

    from common import command_line, machine, write_results

    import autosched as asc
    from autosched.workload import Workload

    m = machine()
    db = a.db or f"sqlite:///{tempfile.mkdtemp()}/parity.db"
    tuning = {}
    if a.db is None:
        for key in a.only:
            op, args = WORKLOADS[key]
            t0 = time.perf_counter()
            r = asc.tune(Workload.create(op, *args), "cpu", a.trials, db=db, progress=False)
            tuning[key] = {"trials": a.trials, "seconds": time.perf_counter() - t0, "tuner_best_ms": r.best_cost * 1e3}
            print(f"tuned {key}: {r.best_cost * 1e3:.3f} ms in {tuning[key]['seconds']:.0f} s", flush=True)
    runs: dict[tuple[str, int], list[dict]] = {}
    for p in range(a.procs):
        for threads in a.threads:
            for key in a.only:
                r = spawn(db, key, threads, a.rounds)
                if r["max_abs_err"] > 1e-4:
                    raise SystemExit(f"{key}: tuned kernel max abs error {r['max_abs_err']:.3g} against the reference")
                runs.setdefault((key, threads), []).append(r)
                peers = "  ".join(f"{k[:-3]} {v:.3f}" for k, v in r.items() if k.endswith("_ms"))
                print(f"process {p + 1}/{a.procs} {key} {threads} threads: {peers}", flush=True)
    results = {key: {threads: summary(runs[(key, threads)]) for threads in a.threads} for key in a.only}
    command = command_line("bench_parity.py")
    payload = {"machine": m, "tuning": tuning, "results": results,
               "runs": {f"{k}/{t}": v for (k, t), v in runs.items()}}
    write_results(a.out, payload, table(results), "Tuned softmax and layernorm against torch eager, many processes",
                  method=(f"Command: `{command}`. Each workload tuned once ({a.trials} trials); then {a.procs} fresh "
                          f"processes per workload and thread count, in alternation, each timing ours and torch "
                          f"interleaved ({a.rounds} rounds, medians). Ratio above 1: ours faster."))
    print(table(results))


if __name__ == "__main__":
    main()
