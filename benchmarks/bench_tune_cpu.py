"""Tune the CPU suite of BENCHMARKS.md and time the results side by side with the peers.

For each workload: autosched tunes it (genetic search guided by the XGBoost model, fresh database,
the given trial budget), then the best kernel is timed round-robin against numpy, torch eager and
torch.compile in this process; TVM MetaSchedule (same trial budget) runs in its own environment
(benchmarks/.tvm-venv; `--install-tvm` creates it) and is reported as missing when absent.

Like with like: every contender computes with all of the machine's cores (TVM_NUM_THREADS is set for
TVM's tuning and timing; each side's thread count is stored beside its figure); peers write into a
preallocated output where their library offers `out=` (cpu_peers.PREALLOCATED), and the tables mark
the ones that allocate; both tuners start cold (our kernel cache is an empty directory per workload,
TVM tunes into an empty work dir and database); trial counts compare measurements one for one (ours
include the verification re-measurements). Results go to benchmarks/results/bench_tune_cpu_<machine
tag>.json (rows of workloads not re-run this time are kept from the file's earlier run, each row with
its own date and command); `benchmarks/docs_benchmarks.py` turns them into docs/benchmarks.md.

Run: `.venv/bin/python benchmarks/bench_tune_cpu.py --trials 200 [--tvm] [--only matmul1024]`
"""

from __future__ import annotations

import os

# both OpenMP runtimes (ours and torch's) spin a while between calls, as a kernel loaded by autosched does
# (build_module and the measurement sandbox set this): a sleeping pool's wake-up costs milliseconds per
# call on these VMs, which would time the hypervisor. Contenders are timed in turns with a pause between
# them, so one's spinning pool does not tax the next. Set before either runtime loads.
os.environ.setdefault("GOMP_SPINCOUNT", "10000000")

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import SETTLE_S  # noqa: E402  pause between contenders, longer than a pool's spin

SUITE = {
    "matmul1024": ("matmul", (1024, 1024, 1024)),
    "matmul512": ("matmul", (512, 512, 512)),
    "softmax": ("softmax", (4096, 1024)),
    "layernorm": ("layernorm", (4096, 1024)),
    "conv2d": ("conv2d_nchw", (1, 64, 56, 56, 64, 3, 3, 1, 1)),
    "dense_bias_relu": ("dense_bias_relu", (1024, 1024, 1024)),
    "batch_matmul": ("batch_matmul", (16, 256, 256, 256)),
    "depthwise": ("depthwise_conv2d_nchw", (1, 64, 56, 56, 3, 3, 1, 1)),
    "gelu": ("gelu", (4096, 1024)),
}
TVM_PY = HERE / ".tvm-venv" / "bin" / "python"


def tvm_env(cores: int) -> dict[str, str]:
    """The TVM subprocess's environment: TVM_NUM_THREADS = this machine's cores (TVM's default is half
    the logical CPUs, one thread on a 2-vCPU VM); both runtimes keep their default waits there
    (TVM's pool spins; ours spins GOMP_SPINCOUNT, which autosched.compile.cpu_kernel sets)."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env["TVM_NUM_THREADS"] = str(cores)
    env.setdefault("OMP_NUM_THREADS", str(cores))  # ours, loaded in TVM's process after its pool pinned a core
    env.setdefault("GOMP_SPINCOUNT", "10000000")
    return env


def run_tvm(op: str, args: tuple, trials: int, ours: tuple[str, str] | None = None) -> dict:
    """Tune with TVM in its own environment; with `ours` (library, entry) also time our kernel there,
    side by side with TVM's best (same process, same aligned inputs, interleaved rounds)."""
    if not TVM_PY.exists():
        return {"missing": "TVM environment not installed (run with --install-tvm)"}
    from tvm_peer import TE_OPS

    if op not in TE_OPS:
        return {"missing": f"no TVM TE definition for {op} in tvm_peer.py"}
    cmd = [str(TVM_PY), str(HERE / "tvm_peer.py"), op, *map(str, args), "--trials", str(trials),
           "--settle", str(SETTLE_S)]
    if ours is not None:
        cmd += ["--ours", *ours]
    cores = len(os.sched_getaffinity(0))
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, env=tvm_env(cores))
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        return {"missing": f"TVM run failed: {p.stderr[-400:]}"}
    out = json.loads(lines[-1])
    if out.get("threads") != cores:
        return {"missing": f"TVM ran on {out.get('threads')} threads, not the machine's {cores}", **out}
    return out


def merged_rows(path: Path, rows: list[dict]) -> list[dict]:
    """`rows`, after the rows of the file's earlier run for workloads not re-run now, when that run
    stored thread counts (rows from before the like-with-like protocol are dropped, not mixed in)."""
    if not path.exists():
        return rows
    try:
        old = json.loads(path.read_text()).get("rows", [])
    except (json.JSONDecodeError, AttributeError) as exc:
        raise SystemExit(f"{path}: not a bench_tune_cpu results file ({exc}); move it away first") from None
    now = {r["workload"] for r in rows}
    return [r for r in old if r.get("workload") not in now and "threads" in r] + rows


def cold_cache(tmp: str) -> None:
    """Point our kernel cache (autosched.compile.c_compiler.default_cache_dir, under XDG_CACHE_HOME) at
    an empty directory, so tuning time starts cold as TVM's does; measurement workers inherit it."""
    os.environ["XDG_CACHE_HOME"] = str(Path(tmp) / "xdg-cache")


def schedule_text(w, r) -> str | None:
    """The tuned schedule as primitive calls (what `autosched show` prints), for the results file."""
    from autosched.compile.instantiate import schedule_of
    from autosched.compile.types import MeasureInput

    if r.best_steps_json is None:
        return None
    s, _ = schedule_of(MeasureInput(w.key, w.to_json(), r.target, r.best_steps_json))
    return s.as_python()


def install_tvm() -> None:
    """TVM lives in its own venv so its numpy/xgboost pins never meet ours; re-running refreshes it."""
    if not TVM_PY.exists():
        subprocess.run([sys.executable, "-m", "venv", str(HERE / ".tvm-venv")], check=True)
    subprocess.run([str(TVM_PY), "-m", "pip", "install", "-q", "apache-tvm==0.27.0.post1", "numpy==2.3.5",
                    "psutil==7.2.2", "xgboost==3.2.0", "cloudpickle==3.1.3", "tornado==6.6.1"],
                   check=True)
    # TVM 0.27's wheels accept a newer apache-tvm-ffi than they work with (segfaults in ToJSONGraph)
    subprocess.run([str(TVM_PY), "-m", "pip", "install", "-q", "--no-deps", "apache-tvm-ffi==0.1.14.post1"],
                   check=True)
    print(f"TVM environment ready: {TVM_PY}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--only", nargs="*", default=None, help=f"subset of {list(SUITE)}")
    ap.add_argument("--tvm", nargs="*", default=None, metavar="WORKLOAD",
                    help="also tune with TVM MetaSchedule (same trials): all workloads, or those listed")
    ap.add_argument("--install-tvm", action="store_true",
                    help="create benchmarks/.tvm-venv with TVM's pinned wheels, then exit")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--out", default=None, help="results stem (default bench_tune_cpu_<machine tag>)")
    a = ap.parse_args()
    if a.install_tvm:
        install_tvm()
        return


    from common import command_line, interleaved, machine, machine_tag, thread_counts, write_results
    from cpu_peers import allocates, check_peers, peers

    import autosched as asc
    from autosched.measure.executor import aligned_empty
    from autosched.workload import Workload

    def aligned_copy(v: np.ndarray) -> np.ndarray:
        out = aligned_empty(v.shape, v.dtype)
        out[...] = v
        return out

    from autosched.tuning.api import plot_curves

    unknown = sorted(set(a.only or []) - set(SUITE))
    if unknown:
        raise SystemExit(f"--only: unknown workload(s) {unknown}; the suite has {list(SUITE)}")
    stem = a.out or f"bench_tune_cpu_{machine_tag()}"
    rows, curves = [], {}
    machine_at_start = machine()
    command = command_line("bench_tune_cpu.py")
    names = a.only or list(SUITE)
    kernels = tempfile.TemporaryDirectory()  # the tuned kernels stay loadable until the process ends
    for key in names:
        op, args = SUITE[key]
        w = Workload.create(op, *args)
        tmp = tempfile.mkdtemp(dir=kernels.name)
        cold_cache(tmp)
        db = f"sqlite:///{tmp}/tune.db"
        t0 = time.perf_counter()
        r = asc.tune(w, "cpu", a.trials, db=db, progress=False)
        tune_s = time.perf_counter() - t0
        f = asc.apply_best(w, db=db)
        # 64-byte-aligned arrays for every contender, as the tuner's runner uses (numpy's own large
        # arrays start 16 bytes past a cache line, which splits every 64-byte vector load in two)
        x = {k: aligned_copy(v) for k, v in w.dag.random_inputs(0).items()}
        outs = {t.name: aligned_empty(t.shape, np.dtype(t.dtype)) for t in w.dag.outputs}
        call = [x[n] if n in x else outs[n] for n in w.args_order]
        f(*call)
        ref = w.dag.evaluate(x)
        err = max(float(np.abs(outs[o] - ref[o]).max()) for o in outs)
        peer_fns = peers(w, x, not a.no_compile)
        peer_err = check_peers(peer_fns, ref[w.dag.outputs[-1].name])
        scale = float(np.abs(ref[w.dag.outputs[-1].name]).max()) or 1.0
        for n, e in peer_err.items():
            if e > 1e-3 * scale:
                raise SystemExit(f"{key}: peer {n} disagrees with the reference (max abs err {e:.3g})")
        contenders = {"autosched": lambda f=f, call=call: f(*call), **peer_fns}
        times = interleaved(contenders, rounds=15, settle_s=SETTLE_S)
        threads = {n: v for n, v in thread_counts().items() if n in times}
        row = {"workload": key, "op": op, "args": list(args), "trials": r.trials, "tune_seconds": tune_s,
               "date": machine_at_start["date"], "command": command, "threads": threads,
               "allocates": {n: allocates(op, n) for n in times if n != "autosched"},
               "measured": r.measured, "errors": r.errors, "max_abs_err": err, "gflop": w.flops / 1e9,
               "peer_max_abs_err": peer_err, "tuner_best_ms": r.best_cost * 1e3,
               "best_schedule": schedule_text(w, r),
               **{f"{n}_ms": v * 1e3 for n, v in times.items()}}
        row["speed_vs_torch"] = times["torch eager"] / times["autosched"] if "torch eager" in times else None
        curves[key] = r.curve
        if a.tvm is not None and (not a.tvm or key in a.tvm):
            row["tvm"] = run_tvm(op, args, a.trials, (str(f.library.path), f.source_obj.entry))
            if "tvm_curve" in row["tvm"]:
                row["tvm_curve"] = row["tvm"]["tvm_curve"]
        row["curve"] = [list(p) for p in r.curve]
        rows.append(row)
        tv = row.get("tvm", {})
        print(f"{key:16s} tuned {r.trials} trials ({r.measured} measurements) in {tune_s:6.1f} s  "
              f"ours {times['autosched']*1e3:8.3f} ms ({threads['autosched']} threads) "
              + "  ".join(f"{n} {v*1e3:8.3f} ms ({threads.get(n, '?')} threads)" for n, v in times.items()
                          if n != "autosched")
              + (f"  tvm {tv['best_seconds']*1e3:.3f} ms ({tv['tune_seconds']:.0f} s, {tv.get('threads')} threads)"
                 if "best_seconds" in tv else "")
              + (f"  side by side in TVM's process: tvm {tv['side_by_side']['tvm_seconds']*1e3:.3f} ms, ours "
                 f"{tv['side_by_side']['autosched_seconds']*1e3:.3f} ms ({tv['side_by_side']['speedup_vs_tvm']:.2f}x)"
                 if tv.get("side_by_side") else "")
              + f"  err {err:.1e}", flush=True)
        # written after every workload: a long suite run that stops half way keeps what it measured
        all_rows = merged_rows(HERE / "results" / f"{stem}.json", rows)
        payload = {"machine": machine_at_start, "machine_tag": machine_tag(), "trials": a.trials, "rows": all_rows}
        plot_curves({r["workload"]: [tuple(p) for p in r["curve"]] for r in all_rows if r.get("curve")},
                    HERE / "results" / f"{stem}_curves.png", title=f"autosched tuning curves, {a.trials} trials")
        write_results(stem, payload, table(payload), f"Tuned CPU suite ({a.trials} trials) vs peers",
                      method=f"{METHOD} Command: `{command}`.")


METHOD = ("Medians of interleaved rounds; threads per contender in brackets; our kernels and TVM's write into a "
          "preallocated output, and so do peers except where marked *allocates*; tuning from a cold kernel cache, "
          "measurements counted one for one (ours include verification re-measurements).")


def table(payload: dict) -> str:
    lines = ["| workload | autosched (tuned) | numpy | torch eager | torch.compile | TVM MetaSchedule (own timer) | "
             "ours vs torch eager (speed) | tuning time | measurements (ours / TVM) |",
             "|---|---|---|---|---|---|---|---|---|"]
    side = []
    for r in payload["rows"]:
        th, alloc = r.get("threads", {}), r.get("allocates", {})

        def cell(k, r=r, th=th, alloc=alloc):
            v = r.get(f"{k}_ms")
            if v is None:
                return "—"
            return f"{v:.3f} ms ({th.get(k, '?')} thr{', allocates' if alloc.get(k) else ''})"
        gf = r["gflop"] / (r["autosched_ms"] / 1e3)
        tv = r.get("tvm") or {}
        # GFLOP/s from autosched's count of the workload's flops, the same numerator as ours
        tvc = (f"{tv['best_seconds']*1e3:.3f} ms ({r['gflop'] / tv['best_seconds']:.0f} GFLOP/s, "
               f"{tv.get('threads', '?')} thr, {tv['tune_seconds']:.0f} s"
               f"{', -mcpu=' + tv['mcpu'] if 'mcpu' in tv else ''})"
               if "best_seconds" in tv else tv.get("missing", "not run"))
        sp = f"{r['speed_vs_torch']:.2f}x" if r.get("speed_vs_torch") else "—"
        meas = f"{r['measured']} / {tv.get('measured', '—')}"
        lines.append(f"| {r['workload']} | {r['autosched_ms']:.3f} ms ({gf:.0f} GFLOP/s, "
                     f"{th.get('autosched', '?')} thr) "
                     f"| {cell('numpy')} | {cell('torch eager')} | {cell('torch.compile')} | {tvc} | {sp} | "
                     f"{r['tune_seconds']:.0f} s | {meas} |")
        if tv.get("side_by_side"):
            sb = tv["side_by_side"]
            side.append(f"| {r['workload']} | {sb['autosched_seconds']*1e3:.3f} ms "
                        f"({r['gflop'] / sb['autosched_seconds']:.0f} GFLOP/s) | {sb['tvm_seconds']*1e3:.3f} ms "
                        f"({r['gflop'] / sb['tvm_seconds']:.0f} GFLOP/s) | **{sb['speedup_vs_tvm']:.2f}x** | "
                        f"{r['tune_seconds']:.0f} s vs {tv['tune_seconds']:.0f} s | {sb['max_abs_diff']:.1e} |")
    if side:
        lines += ["", "Side by side with TVM (both best kernels in TVM's process, same 64-byte-aligned inputs, "
                  "interleaved rounds, medians; each runtime with its default spinning waits):", "",
                  "| workload | autosched | TVM MetaSchedule | speed vs TVM | tuning time (ours vs TVM, same trials) "
                  "| max abs diff |", "|---|---|---|---|---|---|", *side]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
