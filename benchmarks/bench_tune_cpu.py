"""Tune the CPU suite of BENCHMARKS.md and time the results side by side with the peers.

For each workload: autosched tunes it (genetic search guided by the XGBoost model, fresh database,
the given trial budget), then the best kernel is timed round-robin against numpy, torch eager and
torch.compile in this process; TVM MetaSchedule (same trial budget) runs in its own environment
(benchmarks/.tvm-venv; `--install-tvm` creates it) and is reported as missing when absent.

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


def run_tvm(op: str, args: tuple, trials: int, ours: tuple[str, str] | None = None) -> dict:
    """Tune with TVM in its own environment; with `ours` (library, entry) also time our kernel there,
    side by side with TVM's best (same process, same aligned inputs, interleaved rounds)."""
    if not TVM_PY.exists():
        return {"missing": "TVM environment not installed (run with --install-tvm)"}
    from tvm_peer import TE_OPS

    if op not in TE_OPS:
        return {"missing": f"no TVM TE definition for {op} in tvm_peer.py"}
    cmd = [str(TVM_PY), str(HERE / "tvm_peer.py"), op, *map(str, args), "--trials", str(trials)]
    if ours is not None:
        cmd += ["--ours", *ours]
    # both runtimes keep their default waits there (TVM's pool spins; ours spins GOMP_SPINCOUNT as when tuned)
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env.setdefault("GOMP_SPINCOUNT", "10000000")  # what autosched.compile.cpu_kernel sets when it loads a kernel
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, env=env)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        return {"missing": f"TVM run failed: {p.stderr[-400:]}"}
    return json.loads(lines[-1])


def schedule_text(w, r) -> str | None:
    """The tuned schedule as primitive calls (what `autosched show` prints), for the results file."""
    from autosched.compile.instantiate import schedule_of
    from autosched.compile.types import MeasureInput

    if r.best_steps_json is None:
        return None
    s, _ = schedule_of(MeasureInput(w.key, w.to_json(), r.target, r.best_steps_json))
    return s.as_python()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--only", nargs="*", default=None, help=f"subset of {list(SUITE)}")
    ap.add_argument("--tvm", nargs="*", default=None, metavar="WORKLOAD",
                    help="also tune with TVM MetaSchedule (same trials): all workloads, or those listed")
    ap.add_argument("--install-tvm", action="store_true")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--out", default="bench_tune_cpu")
    a = ap.parse_args()
    if a.install_tvm and not TVM_PY.exists():
        subprocess.run([sys.executable, "-m", "venv", str(HERE / ".tvm-venv")], check=True)
        subprocess.run([str(TVM_PY), "-m", "pip", "install", "-q", "apache-tvm==0.27.0.post1", "numpy==2.3.5",
                        "psutil==7.2.2", "xgboost==3.2.0", "cloudpickle==3.1.3", "tornado==6.6.1"],
                       check=True)
        # TVM 0.27's wheels accept a newer apache-tvm-ffi than they work with (segfaults in ToJSONGraph)
        subprocess.run([str(TVM_PY), "-m", "pip", "install", "-q", "--no-deps", "apache-tvm-ffi==0.1.14.post1"],
                       check=True)

    from common import METHOD_INTERLEAVED, command_line, interleaved, machine, write_results
    from cpu_peers import check_peers, peers

    import autosched as asc
    from autosched.measure.executor import aligned_empty
    from autosched.workload import Workload

    def aligned_copy(v: np.ndarray) -> np.ndarray:
        out = aligned_empty(v.shape, v.dtype)
        out[...] = v
        return out

    from autosched.tuning.api import plot_curves

    rows, curves = [], {}
    machine_at_start = machine()
    command = command_line("bench_tune_cpu.py")
    names = a.only or list(SUITE)
    for key in names:
        op, args = SUITE[key]
        w = Workload.create(op, *args)
        with tempfile.TemporaryDirectory() as tmp:
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
        times = interleaved(contenders, rounds=15)
        row = {"workload": key, "op": op, "args": list(args), "trials": r.trials, "tune_seconds": tune_s,
               "measured": r.measured, "errors": r.errors, "max_abs_err": err, "gflop": w.flops / 1e9,
               "peer_max_abs_err": peer_err, "tuner_best_ms": r.best_cost * 1e3,
               "best_schedule": schedule_text(w, r),
               **{f"{n}_ms": v * 1e3 for n, v in times.items()}}
        row["speed_vs_torch"] = times["torch eager"] / times["autosched"] if "torch eager" in times else None
        curves[key] = r.curve
        if a.tvm is not None and (not a.tvm or key in a.tvm):
            row["tvm"] = run_tvm(op, args, a.trials, (str(f.library.path), f.source_obj.entry))
        rows.append(row)
        tv = row.get("tvm", {})
        print(f"{key:16s} tuned {r.trials} trials in {tune_s:6.1f} s  ours {times['autosched']*1e3:8.3f} ms "
              + "  ".join(f"{n} {v*1e3:8.3f} ms" for n, v in times.items() if n != "autosched")
              + (f"  tvm {tv['best_seconds']*1e3:.3f} ms ({tv['tune_seconds']:.0f} s)" if "best_seconds" in tv else "")
              + (f"  side by side in TVM's process: tvm {tv['side_by_side']['tvm_seconds']*1e3:.3f} ms, ours "
                 f"{tv['side_by_side']['autosched_seconds']*1e3:.3f} ms ({tv['side_by_side']['speedup_vs_tvm']:.2f}x)"
                 if tv.get("side_by_side") else "")
              + f"  err {err:.1e}", flush=True)
        # written after every workload: a long suite run that stops half way keeps what it measured
        payload = {"machine": machine_at_start, "trials": a.trials, "rows": rows, "curves": curves}
        plot_curves({k: v for k, v in curves.items()}, HERE / "results" / f"{a.out}_curves.png",
                    title=f"autosched tuning curves, {a.trials} trials")
        write_results(a.out, payload, table(payload), f"Tuned CPU suite ({a.trials} trials) vs peers",
                      method=f"{METHOD_INTERLEAVED} Command: `{command}`.")


def table(payload: dict) -> str:
    lines = ["| workload | autosched (tuned) | numpy | torch eager | torch.compile | TVM MetaSchedule (own timer) | "
             "ours vs torch eager (speed) | tuning time |", "|---|---|---|---|---|---|---|---|"]
    side = []
    for r in payload["rows"]:
        def cell(k, r=r):
            v = r.get(k)
            return "—" if v is None else f"{v:.3f} ms"
        gf = r["gflop"] / (r["autosched_ms"] / 1e3)
        tv = r.get("tvm") or {}
        # GFLOP/s from autosched's count of the workload's flops, the same numerator as ours
        tvc = (f"{tv['best_seconds']*1e3:.3f} ms ({r['gflop'] / tv['best_seconds']:.0f} GFLOP/s, "
               f"{tv['tune_seconds']:.0f} s{', -mcpu=' + tv['mcpu'] if 'mcpu' in tv else ''})"
               if "best_seconds" in tv else tv.get("missing", "not run"))
        sp = f"{r['speed_vs_torch']:.2f}x" if r.get("speed_vs_torch") else "—"
        lines.append(f"| {r['workload']} | {r['autosched_ms']:.3f} ms ({gf:.0f} GFLOP/s) | {cell('numpy_ms')} | "
                     f"{cell('torch eager_ms')} | {cell('torch.compile_ms')} | {tvc} | {sp} | "
                     f"{r['tune_seconds']:.0f} s |")
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
