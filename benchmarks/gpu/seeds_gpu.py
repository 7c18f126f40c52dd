"""The rule-derived seeds of the GPU spaces (space_gpu.SEEDS), each built, checked against the
numpy reference and timed like bench_gpu.py (CUDA events, cold L2, median of 25), next to the
hand schedule and the vendor library in the same process; optional extra configs of the same
space (knob values) are timed alongside. No tuning: this shows what the tuner's first batch holds.

    python benchmarks/gpu/seeds_gpu.py --out DIR [--quick] [--only matmul,conv]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_gpu import compute_reference, device_inputs, peer_fn, run_ours  # noqa: E402

from autosched.schedule.schedule import Schedule  # noqa: E402
from autosched.space import gpu_templates as gt  # noqa: E402
from autosched.space.registry import make_space  # noqa: E402
from autosched.workload import Workload  # noqa: E402

MM_EXTRA = [  # larger per-block tiles than the seeds: 128x256 and 256x128 with 256 threads of 8x16
    {"tile0": (2, 16, 4), "tile1": (4, 16, 4), "rk0": 16, "vector_fetch": 4, "smem_layout": 2, "double_buffer": 2,
     "group": 8},
    {"tile0": (2, 32, 4), "tile1": (4, 8, 4), "rk0": 16, "vector_fetch": 4, "smem_layout": 2, "double_buffer": 2,
     "group": 8},
    {"tile0": (2, 16, 4), "tile1": (4, 16, 4), "rk0": 8, "vector_fetch": 4, "smem_layout": 2, "double_buffer": 2,
     "group": 8},
]


def cases(quick: bool):
    n = 1024 if quick else 4096
    return [
        ("matmul", Workload.create("matmul", n, n, n, "float32"), "cuda",
         lambda s: gt.cuda_gemm(s, (16, 8), (4, 4), (16,), (2, 4), vector_fetch=4, smem_layout=2, double_buffer=2,
                                group=8), MM_EXTRA, "cublas_fp32"),
        ("conv", Workload.create("conv2d_nchw", 8 if quick else 32, 256, 14, 14, 256, 3, 3, 1, 1), "cuda",
         lambda s: gt.cuda_gemm(s, (1, 16, 2, 7), (1, 4, 7, 2), (4, 3, 3), smem_layout=2, double_buffer=2), [],
         "cudnn_fp32"),
        ("bf16", Workload.create("matmul", n, n, n, "bfloat16"), "triton",
         lambda s: gt.triton_gemm(s, 128, 256, 64, 8, 8, 3), [], "cublas_bf16"),
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/tmp/seeds_gpu")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="")
    opts = ap.parse_args()
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    items = [c for c in cases(opts.quick) if not opts.only or c[0] in opts.only.split(",")]
    t0 = time.time()
    with ProcessPoolExecutor(min(len(items), os.cpu_count() or 2)) as pool:
        refs = dict(pool.map(compute_reference, [c[1].to_json() for c in items]))
    print(f"references in {time.time() - t0:.1f} s", flush=True)
    import torch

    rows = []
    for name, w, target, hand, extra, peer in items:
        ref = refs[w.key]
        ins = device_inputs(w, ref)
        space = make_space(w, target)
        runs = [("hand", None, hand(Schedule(w.dag)))]
        runs += [(f"seed {k}", v, space.apply(space.space.index_of(v))) for k, v in enumerate(space.seeds)]
        runs += [(f"extra {k}", v, space.apply(space.space.index_of(v))) for k, v in enumerate(extra)
                 if space.space.valid(space.space.index_of(v))]
        for label, cfg, s in runs:
            row = {"case": name, "impl": label, "config": cfg}
            try:
                ms, ok, msg, rel, launch = run_ours(w, target, s, ref, ins)
                row.update(ms=ms, tflops=w.flops / ms / 1e9, ok=ok, rel_err=rel, launch=launch, note=msg[:120])
            except Exception as exc:  # noqa: BLE001  report, keep going
                row.update(ms=float("nan"), tflops=0.0, ok=False, note=repr(exc)[:300])
            rows.append(row)
            print(json.dumps(row), flush=True)
        try:
            from bench_gpu import check, timer

            fn = peer_fn(peer, w, ins)
            o = fn()
            torch.cuda.synchronize()
            ok, msg, rel = check(w, ref, o)
            ms = timer(fn)
            rows.append({"case": name, "impl": peer, "ms": ms, "tflops": w.flops / ms / 1e9, "ok": ok, "rel_err": rel})
        except Exception as exc:  # noqa: BLE001
            rows.append({"case": name, "impl": peer, "ms": float("nan"), "tflops": 0.0, "ok": False,
                         "note": repr(exc)[:300]})
        print(json.dumps(rows[-1]), flush=True)
        del ins
        torch.cuda.empty_cache()
        (out / "seeds_gpu.json").write_text(json.dumps({"device": torch.cuda.get_device_name(0), "rows": rows},
                                                       indent=1, default=str))
    print("\ncase   impl      ms       TFLOP/s  check   config")
    for r in rows:
        cfg = "" if not r.get("config") else " ".join(f"{k}={v}" for k, v in r["config"].items())
        print(f"{r['case']:6} {r['impl']:9} {r['ms']:8.4f} {r['tflops']:8.1f}  {'ok' if r['ok'] else 'FAIL':5}  {cfg}")


if __name__ == "__main__":
    main()
