"""Hand-written autosched schedules against numpy and torch (CPU), side by side in one run.

Issue targets: matmul 1024^3 fp32 at least 0.6x torch's GFLOP/s; softmax 4096x1024 no slower
than 1.3x torch eager. Run: `.venv/bin/python benchmarks/bench_manual_cpu.py [--quick]`.
"""

from __future__ import annotations

import os

# both OpenMP runtimes (ours and torch's) spin a while between calls, as a kernel loaded by autosched does
# (build_module and the measurement sandbox set this): a sleeping pool's wake-up costs milliseconds per
# call on these VMs, which would time the hypervisor. Contenders are timed in turns with a pause between
# them, so one's spinning pool does not tax the next. Set before either runtime loads.
os.environ.setdefault("GOMP_SPINCOUNT", "10000000")

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import SETTLE_S, command_line, interleaved, machine, thread_counts, write_results  # noqa: E402
from cpu_peers import allocates, check_peers, peers  # noqa: E402

import autosched as asc  # noqa: E402
from autosched.workload import Workload  # noqa: E402


def matmul_schedule(w: Workload, mr: int = 6, nr: int = 32):
    """Packed B panels (nr columns) and an mr x nr register tile; the classic CPU GEMM structure."""
    s = asc.create_schedule(w.dag)
    c = w.dag["C"]
    cl = s.cache_write(c, "local")
    bp = s.cache_read("B", "global", [cl])
    i, j = s[c].op.axis
    jo, ji = s[c].split(j, factor=nr)
    io, ii = s[c].split(i, factor=mr)
    s[c].reorder(jo, io, ii, ji)
    s[c].parallel(jo)
    s[c].unroll(ii)
    s[c].vectorize(ji)
    s[cl].compute_at(s[c], io)
    ci, cj = s[cl].op.axis
    (ck,) = s[cl].op.reduce_axis
    s[cl].reorder(ck, ci, cj)
    s[cl].unroll(ci)
    s[cl].vectorize(cj)
    s[bp].compute_at(s[c], jo)
    s[bp].vectorize(s[bp].op.axis[1])
    return s


def row_schedule(w: Workload, out: str, producers: list[str], vector: int = 16, rfactor: bool = True):
    """Row-wise ops (softmax, layernorm): reductions computed per row at the output's row loop.

    With `rfactor`, each row reduction is split into `vector` lanes that reduce independently
    (a vectorized spatial loop) and a short final reduction over the lanes: vector max/sum
    without reassociating floating point (no fast-math).
    """
    s = asc.create_schedule(w.dag)
    o = s[out]
    i, j = o.op.axis
    o.parallel(i)
    _, ji = o.split(j, factor=vector)
    o.vectorize(ji)
    for p in producers:
        st = s[p]
        if rfactor and st.op.reduce_axis:
            _, ki = st.split(st.op.reduce_axis[0], factor=vector)
            rf = s.rfactor(p, ki)
            spatial = [a.name for a in s[rf].op.axis if a.name != ki.name.replace(".", "_")]
            lane = ki.name.replace(".", "_")
            s[rf].reorder(*spatial, *[a.name for a in s[rf].op.reduce_axis], lane)
            s[rf].vectorize(lane)
            s[rf].compute_at(o, i)
        elif not st.op.reduce_axis:
            st.vectorize(st.op.axis[-1])
        st.compute_at(o, i)
    return s


def gelu_schedule(w: Workload):
    s = asc.create_schedule(w.dag)
    st = s[w.dag.outputs[0].name]
    axes = st.op.axis
    outer = st.fuse(*axes[:-1]) if len(axes) > 2 else axes[0]
    st.parallel(outer)
    _, vi = st.split(axes[-1], factor=16)
    st.vectorize(vi)
    return s


def run(quick: bool) -> dict:
    import torch

    torch.set_num_threads(len(__import__("os").sched_getaffinity(0)))
    rows = []
    n = 256 if quick else 1024
    cases = []
    w = Workload.create("matmul", n, n, n)
    cases.append((f"matmul {n}x{n}x{n} fp32", w, matmul_schedule(w)))
    m, k = (512, 256) if quick else (4096, 1024)
    w = Workload.create("softmax", m, k)
    cases.append((f"softmax {m}x{k} fp32", w, row_schedule(w, "norm", ["maxelem", "expv", "expsum", "rsum"])))
    w = Workload.create("layernorm", m, k)
    cases.append((f"layernorm {m}x{k} fp32", w, row_schedule(w, "out", ["mean", "var"])))
    w = Workload.create("gelu", m, k)
    cases.append((f"gelu {m}x{k} fp32", w, gelu_schedule(w)))
    for label, w, s in cases:
        args = [w.dag[a] for a in w.args_order]
        f = asc.build(s, args)
        x = w.dag.random_inputs(0)
        outs = {t.name: np.empty(t.shape, "float32") for t in w.dag.outputs}
        call_args = [x[a] if a in x else outs[a] for a in w.args_order]
        f(*call_args)
        ref = w.dag.evaluate(x)
        err = max(float(np.abs(outs[o] - ref[o]).max()) for o in outs)
        peer_fns = peers(w, x, compile_torch=False)
        out_name = w.dag.outputs[-1].name
        peer_err = check_peers(peer_fns, ref[out_name])
        scale = float(np.abs(ref[out_name]).max()) or 1.0
        for name, e in peer_err.items():
            if e > 1e-3 * scale:
                raise SystemExit(f"{label}: peer {name} disagrees with the reference (max abs err {e:.3g})")
        peer_fns = {("torch" if k == "torch eager" else k): v for k, v in peer_fns.items()}
        times = interleaved({"autosched": lambda f=f, a=call_args: f(*a), **peer_fns}, rounds=5 if quick else 15,
                            settle_s=SETTLE_S)
        flops = w.flops
        counts = thread_counts()
        threads = {k: counts.get("torch eager" if k == "torch" else k, "?") for k in times}
        row = {"workload": label, "max_abs_err": err, "not_vectorized": f.not_vectorized, "threads": threads,
               "allocates": {k: allocates(w.name, "torch eager" if k == "torch" else k) for k in times
                             if k != "autosched"}, "peer_max_abs_err": peer_err,
               **{f"{k}_ms": v * 1e3 for k, v in times.items()},
               **{f"{k}_gflops": flops / v / 1e9 for k, v in times.items()},
               "ratio_vs_torch_time": times["torch"] / times["autosched"]}
        rows.append(row)
        print(f"{label:28s} ours {times['autosched']*1e3:8.3f} ms  torch {times['torch']*1e3:8.3f} ms  "
              + (f"numpy {times['numpy']*1e3:8.3f} ms  " if "numpy" in times else "")
              + f"speed vs torch {row['ratio_vs_torch_time']:.2f}x  err {err:.1e}", flush=True)
    return {"machine": machine(), "command": command_line("bench_manual_cpu.py"), "rows": rows}


def table(payload: dict) -> str:
    """Each figure with the threads that side computed with, and *allocates* where a peer creates its
    output on every call (ours and the others write into a preallocated one)."""
    lines = ["| workload | autosched | torch eager | numpy | autosched / torch (speed) |", "|---|---|---|---|---|"]
    for r in payload["rows"]:
        th, alloc = r.get("threads", {}), r.get("allocates", {})

        def cell(k: str, r=r, th=th, alloc=alloc) -> str:
            if f"{k}_ms" not in r:
                return "—"
            gf = f", {r[f'{k}_gflops']:.0f} GFLOP/s" if r["workload"].startswith("matmul") else ""
            return f"{r[f'{k}_ms']:.3f} ms ({th.get(k, '?')} thr{gf}{', allocates' if alloc.get(k) else ''})"

        lines.append(f"| {r['workload']} | {cell('autosched')} | {cell('torch')} | {cell('numpy')} | "
                     f"{r['ratio_vs_torch_time']:.2f}x |")
    return "\n".join(lines)

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    a = ap.parse_args()
    payload = run(a.quick)
    if not a.quick:
        write_results("bench_manual_cpu", payload, table(payload), "Hand-written schedules vs numpy and torch (CPU)")
    print(table(payload))
