"""GPU suite of BENCHMARKS.md, side by side with the peers in one run, on the device machine.

For each workload: a hand-written autosched schedule, a tuned one (`asc.tune` with the GPU
builder/runner, a small trial budget, the space's rule-derived seeds measured in the first batch;
the tuned rows say which seed, if any, is the best kernel), and the peers (cuBLAS, cuDNN, torch eager and
torch.compile, the Triton tutorial's 8-config autotuned matmul, the copy ceiling). Every kernel,
ours and the peers', is checked against the numpy reference of the workload's DAG (computed
once, in parallel, before anything runs on the GPU) and timed the same way: CUDA events, a
256 MB write before each call (cold L2), median of 25 calls. Peers allocate their outputs as
torch does; ours write into preallocated outputs.

    python benchmarks/gpu/bench_gpu.py --out DIR [--trials 32] [--deadline-s 540] [--only NAME]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import autosched as asc  # noqa: E402
from autosched import te  # noqa: E402
from autosched.codegen.source import ArgSpec  # noqa: E402
from autosched.compile.types import MeasureInput
from autosched.measure.checking import check_outputs  # noqa: E402
from autosched.measure.reference import DagReferenceProvider  # noqa: E402
from autosched.schedule.schedule import Schedule  # noqa: E402
from autosched.schedule.steps import step_from_dict  # noqa: E402
from autosched.space import gpu_templates as gt  # noqa: E402
from autosched.workload import Workload  # noqa: E402


def bias_relu(M: int, N: int) -> Workload:
    X = te.placeholder((M, N), "X")
    b = te.placeholder((N,), "bias")
    out = te.compute((M, N), lambda i, j: te.maximum(X[i, j] + b[j], 0.0), "out")
    return Workload.from_tensors([X, b, out], "bias_relu")


def suite(quick: bool):
    """(label, workload, flops, bytes, [(target, hand schedule fn)], peers)."""
    n = 1024 if quick else 4096
    rows = 2048 if quick else 16384
    mm32 = Workload.create("matmul", n, n, n, "float32")
    mm16 = Workload.create("matmul", n, n, n, "bfloat16")
    sm = Workload.create("softmax", rows, 4096)
    ln = Workload.create("layernorm", rows, 4096)
    ge = Workload.create("gelu", (1 << 23) if quick else (1 << 26))
    br = bias_relu(rows, 4096)
    cv = Workload.create("conv2d_nchw", 8 if quick else 32, 256, 14, 14, 256, 3, 3, 1, 1)
    mb = lambda w: 2 * w.dag.placeholders[0].shape[0] * int(np.prod(w.dag.placeholders[0].shape[1:])) * 4  # noqa: E731
    return [
        (f"matmul {n}^3 fp32 (TF32 off)", mm32, mm32.flops, 0,
         [("cuda", lambda s: gt.cuda_gemm(s, (16, 8), (4, 4), (16,), (2, 4), vector_fetch=4, smem_layout=2,
                                          double_buffer=2, group=8))], ["cublas_fp32"]),
        (f"matmul {n}^3 bf16", mm16, mm16.flops, 0,
         [("triton", lambda s: gt.triton_gemm(s, 128, 256, 64, 8, 8, 3))], ["cublas_bf16", "triton_autotune8"]),
        (f"softmax {rows}x4096 fp32", sm, 0, mb(sm), [("triton", lambda s: gt.triton_rowwise(s, 1, None, 8))],
         ["torch_eager", "torch_compile"]),
        (f"layernorm {rows}x4096 fp32", ln, 0, mb(ln),  # Welford chunks of 2048, evict-first store: the best
         [("triton", lambda s: _evicting_welford(gt.triton_rowwise(s, 1, 2048, 16)))],  # variant (results/bench_gpu.md)
         ["torch_eager", "torch_compile"]),
        ("gelu(tanh) 64M fp32", ge, 0, 2 * ge.dag.placeholders[0].shape[0] * 4,
         [("triton", lambda s: gt.triton_elementwise(s, 4096, 8)), ("cuda", lambda s: gt.cuda_elementwise(s, 256, 4))],
         ["torch_eager", "torch_compile"]),
        (f"bias+relu {rows}x4096 fp32", br, 0, mb(br),
         [("triton", lambda s: gt.triton_elementwise(s, 4096, 8)), ("cuda", lambda s: gt.cuda_elementwise(s, 256, 4))],
         ["torch_eager", "torch_compile"]),
        ("conv2d N32 C256 14x14 K256 3x3 fp32", cv, cv.flops, 0,
         [("cuda", lambda s: gt.cuda_gemm(s, (1, 16, 2, 7), (1, 4, 7, 2), (4, 3, 3), smem_layout=2, double_buffer=2))],
         ["cudnn_fp32"]),
    ]


def _evicting_welford(s: Schedule) -> Schedule:
    from autosched.space.gpu_sketch import store_evict, welford

    welford(s)
    store_evict(s)
    return s


def arg_specs(w: Workload) -> list[ArgSpec]:
    outs = {t.name for t in w.dag.outputs}
    return [ArgSpec(t.name, tuple(t.shape), t.dtype, t.name in outs) for t in w.tensors()]


def compute_reference(w_json: str):
    w = Workload.from_json(w_json)
    return w.key, DagReferenceProvider(0)(MeasureInput(w.key, w_json, "", "[]"), arg_specs(w))


# ---- device side ---------------------------------------------------------------------------------


def timer(fn, repeat: int = 25, warmup: int = 3) -> float:
    import torch

    if not hasattr(timer, "flush"):
        timer.flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    flush = timer.flush
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(repeat)]
    for s, e in ev:
        flush.zero_()
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return float(np.median([s.elapsed_time(e) for s, e in ev]))


def copy_ceiling_ms() -> float:
    """A 4 GiB device-to-device copy (8 GiB of traffic): the bandwidth ceiling of this run."""
    import torch

    src = torch.empty(1 << 30, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    return timer(lambda: dst.copy_(src), repeat=10)


def device_inputs(w: Workload, ref):
    from autosched.measure.gpu_worker import to_device

    return {a.name: to_device(ref.inputs[a.name], a.dtype) for a in arg_specs(w) if not a.is_output}


def check(w: Workload, ref, out) -> tuple[bool, str, float]:
    from autosched.measure.gpu_worker import to_host

    name = w.dag.outputs[0].name
    host = to_host(out.contiguous(), w.dag.outputs[0].dtype)
    res = check_outputs({name: host}, {name: ref.expected[name]}, ref.reduce_len)
    e = np.asarray(ref.expected[name], dtype=np.float64)
    rel = float(np.linalg.norm(host.astype(np.float64) - e) / max(np.linalg.norm(e), 1e-30))
    return res.ok, res.message, rel


def peer_fn(peer: str, w: Workload, ins: dict):
    import torch
    import torch.nn.functional as F

    x = list(ins.values())
    name = w.name
    if peer.startswith("cublas") or peer == "cudnn_fp32":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    if peer in ("cublas_fp32", "cublas_bf16"):
        return lambda: torch.matmul(x[0], x[1])
    if peer == "cudnn_fp32":
        return lambda: F.conv2d(x[0], x[1], padding=1)
    if peer == "triton_autotune8":
        import triton_tutorial_matmul as ttm

        c = torch.empty((x[0].shape[0], x[1].shape[1]), dtype=torch.bfloat16, device="cuda")
        return lambda: ttm.matmul(x[0], x[1], c)
    eager = {"softmax": lambda a: torch.softmax(a, -1),
             "layernorm": lambda a, g, b: F.layer_norm(a, (a.shape[-1],), g, b, 1e-5),
             "gelu": lambda a: F.gelu(a, approximate="tanh"),
             "bias_relu": lambda a, b: torch.relu(a + b)}[name]
    f = torch.compile(eager) if peer == "torch_compile" else eager
    return lambda: f(*x)


def run_ours(w, target, sched, ref, ins):
    import torch

    k = asc.build(sched, w.tensors(), target)
    out_spec = arg_specs(w)[-1]
    out = torch.empty(out_spec.shape, dtype=getattr(torch, out_spec.dtype), device="cuda")
    out.fill_(float("nan"))
    args = [ins[a.name] for a in arg_specs(w) if not a.is_output] + [out]
    k(*args)
    torch.cuda.synchronize()
    ok, msg, rel = check(w, ref, out)
    return timer(lambda: k(*args)), ok, msg, rel, k.source_obj.launch


def tune_one(w, target, trials, refs, deadline, db):
    from autosched.measure.gpu_runner import GpuBuilder, GpuRunner

    runner = GpuRunner(reference=lambda inp, args: refs[inp.workload_key])
    builder = GpuBuilder(n_workers=max(1, (os.cpu_count() or 2) - 1))
    t0 = time.time()
    res = asc.tune(w, target, trials, searcher="genetic", cost_model="xgb", db=db, runner=runner,
                   builder=builder, batch_size=16, seed=0, progress=True,
                   should_stop=lambda: time.time() > deadline)
    if res.best_steps_json is None:
        return None, res, time.time() - t0
    s = Schedule(w.dag, [step_from_dict(x) for x in json.loads(res.best_steps_json)])
    return s, res, time.time() - t0


def seed_info(w, target, res) -> dict:
    """How the space's rule-derived seeds (measured first) did in a tuning run: how many, the best
    after them (curve point), and which seed the best kernel is, if it is one."""
    from autosched.space.registry import make_space
    from autosched.tuning.candidates import CandidateCache

    space = make_space(w, target)
    cands = CandidateCache(w, space, target)
    steps = [cands.get(space.space.index_of(v)).steps_json for v in space.seeds]
    n = len(steps)
    after = next((g for t, g in res.curve if t >= n), None) if n else None
    best = steps.index(res.best_steps_json) if res.best_steps_json in steps else None
    return {"seeds": n, "gflops_after_seeds": after, "best_is_seed": best}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "results"))
    ap.add_argument("--trials", type=int, default=32)
    ap.add_argument("--deadline-s", type=float, default=540.0)
    ap.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    ap.add_argument("--only", default="", help="comma-separated substrings of workload labels")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile peers")
    opts = ap.parse_args()
    t_start = time.time()
    deadline = t_start + opts.deadline_s
    out_dir = Path(opts.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    items = [it for it in suite(opts.quick) if not opts.only or any(o in it[0] for o in opts.only.split(","))]
    with ProcessPoolExecutor(min(len(items), os.cpu_count() or 2)) as pool:
        refs = dict(pool.map(compute_reference, [it[1].to_json() for it in items]))
    print(f"references computed in {time.time() - t_start:.1f} s", flush=True)
    import torch
    import triton

    info = {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "device": torch.cuda.get_device_name(0), "torch": torch.__version__, "triton": triton.__version__,
            "cuda": torch.version.cuda, "timing": "CUDA events, 256 MB L2 flush before each call, median of 25"}
    try:
        import cupy

        info["cupy"] = cupy.__version__
    except ImportError:
        pass
    rows: list[dict] = []
    ms = copy_ceiling_ms()
    rows.append({"workload": "device-to-device copy 8 GiB traffic", "impl": "torch copy_ (ceiling)", "ms": ms,
                 "gbps": 8 * 2 ** 30 / ms / 1e6, "ok": True})
    db = str(out_dir / "bench_gpu_tuning.db")
    curves = {}
    for label, w, flops, nbytes, ours, peers in items:
        ref = refs[w.key]
        ins = device_inputs(w, ref)

        def add(impl, ms, ok, rel, label=label, flops=flops, nbytes=nbytes, **kw):
            row = {"workload": label, "impl": impl, "ms": ms, "ok": ok, "rel_err": rel, **kw}
            if flops:
                row["tflops"] = flops / ms / 1e9
            if nbytes:
                row["gbps"] = nbytes / ms / 1e6
            rows.append(row)
            print(json.dumps(row), flush=True)

        for target, hand in ours:
            try:
                ms, ok, msg, rel, launch = run_ours(w, target, hand(Schedule(w.dag)), ref, ins)
                add(f"autosched {target} (hand schedule)", ms, ok, rel, note=msg[:200], launch=launch)
            except Exception as exc:  # noqa: BLE001  report, keep going
                add(f"autosched {target} (hand schedule)", float("nan"), False, None, note=repr(exc)[:300])
            if opts.trials > 0 and time.time() < deadline - 30:
                per = min(deadline, time.time() + max(60.0, (deadline - time.time()) / 3))
                try:
                    trials = opts.trials * (3 if "matmul" in label else 2 if "conv" in label else 1)
                    s, res, secs = tune_one(w, target, trials, refs, per, db)
                    curves[f"{label} [{target}]"] = res.curve
                    if s is not None:
                        ms, ok, msg, rel, launch = run_ours(w, target, s, ref, ins)
                        add(f"autosched {target} (tuned, {res.trials} trials)", ms, ok, rel, tune_s=secs,
                            errors=res.errors, note=msg[:200], launch=launch, **seed_info(w, target, res))
                except Exception as exc:  # noqa: BLE001
                    add(f"autosched {target} (tuned)", float("nan"), False, None, note=repr(exc)[:300])
        for peer in peers:
            if peer == "torch_compile" and opts.no_compile:
                continue
            try:
                fn = peer_fn(peer, w, ins)
                t0 = time.time()
                out = fn()
                torch.cuda.synchronize()
                first_s = time.time() - t0
                ok, msg, rel = check(w, ref, out)
                add(peer, timer(fn), ok, rel, first_call_s=first_s, note=msg[:200])
            except Exception as exc:  # noqa: BLE001
                add(peer, float("nan"), False, None, note=repr(exc)[:300])
        del ins
        torch.cuda.empty_cache()
        write(out_dir, info, rows, curves, t_start)  # after each workload: a timeout keeps what ran
    write(out_dir, info, rows, curves, t_start)


def write(out_dir: Path, info: dict, rows: list[dict], curves: dict, t_start: float) -> None:
    info["seconds"] = time.time() - t_start
    (out_dir / "bench_gpu.json").write_text(json.dumps({"info": info, "rows": rows, "curves": curves}, indent=1))
    lines = [f"# GPU benchmark ({info['date']}, {info['device']})", "",
             f"torch {info['torch']}, triton {info['triton']}, CUDA {info['cuda']}, cupy {info.get('cupy', '-')}; "
             f"{info['timing']}.", "", "| workload | implementation | ms | TFLOP/s | GB/s | check |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        tf = f"{r['tflops']:.1f}" if r.get("tflops") else ""
        gb = f"{r['gbps']:.0f}" if r.get("gbps") else ""
        chk = "ok" if r["ok"] else "FAIL"
        if r.get("rel_err") is not None:
            chk += f" ({r['rel_err']:.1e})"
        lines.append(f"| {r['workload']} | {r['impl']} | {r['ms']:.4f} | {tf} | {gb} | {chk} |")
    (out_dir / "bench_gpu.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
