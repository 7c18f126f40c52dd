"""Schedule variants side by side on the device, one call: each built, checked against a float64
torch reference, timed like bench_gpu.py (CUDA events, cold L2, median of 25), next to the peer.

Used to see which knobs of the cuda GEMM template (virtual threads, vector fetch, shared layout,
double buffering, tile shapes) and of the Triton row-wise template matter before a tuning run.

    python benchmarks/gpu/variants_gpu.py --out DIR [--only matmul,conv,layernorm] [--deadline-s 500]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import autosched as asc  # noqa: E402
from autosched.schedule.schedule import Schedule  # noqa: E402
from autosched.space import gpu_templates as gt  # noqa: E402
from autosched.workload import Workload  # noqa: E402

MM = [  # (threads, inner, rk, vthreads, vector_fetch, smem_layout, double_buffer, group)
    ((16, 8), (4, 4), (16,), (2, 4), 4, 2, 1, 8),
    ((16, 8), (4, 4), (16,), (2, 4), 4, 2, 2, 8),
    ((16, 16), (4, 4), (16,), (2, 2), 4, 2, 1, 8),
    ((16, 8), (4, 4), (8,), (2, 4), 4, 2, 1, 8),
    ((8, 16), (4, 4), (16,), (4, 2), 4, 2, 1, 8),
]
CONV = [  # n, k, y, x axes
    ((1, 16, 2, 7), (1, 4, 7, 2), (4, 3, 3), (1, 1, 1, 1), 1, 2, 1),
    ((1, 16, 2, 7), (1, 4, 7, 2), (4, 3, 3), (1, 1, 1, 1), 1, 2, 2),
]
LN = [(1, 0, 8), (1, 0, 16), (1, 0, 4), (2, 0, 8), (2, 0, 16), (4, 0, 16), (1, 2048, 8), (1, 1024, 4)]


def layernorm_experiments(w, x, g, be, ref, nb, rec, rel_err, out, bg) -> None:
    """Edits of the generated Triton source (experiments only, to learn what the codegen should emit),
    and inductor's own kernel for the same op, printed."""
    import importlib.util

    import torch
    import torch.nn.functional as F
    from torch._inductor.utils import run_and_get_code

    n = x.shape[1]
    _, codes = run_and_get_code(torch.compile(lambda a, g, b: F.layer_norm(a, (n,), g, b, 1e-5)), x, g, be)
    (out / "inductor_layernorm.py").write_text("\n\n".join(codes))
    keep = [ln for code in codes for ln in code.splitlines()
            if any(k in ln for k in ("def triton", "tl.", "BLOCK", "num_warps", "grid(", "reduction_hint"))]
    print("INDUCTOR KERNEL LINES:\n" + "\n".join(ln[:220] for ln in keep[:70]))
    for rows, nw in ((1, 8), (4, 16)):
        src, _ = asc.render(gt.triton_rowwise(Schedule(w.dag), rows, None, nw), w.tensors(), "triton")
        edits = {"base": lambda c: c,
                 "evict": lambda c: "\n".join(
                     ln[:-1] + ', eviction_policy="evict_first")' if "tl.load(X_ptr" in ln else
                     ln[:-1] + ', eviction_policy="evict_last")' if ("tl.load(gamma" in ln or "tl.load(beta" in ln)
                     else ln[:-1] + ', eviction_policy="evict_first")' if "tl.store(" in ln else ln
                     for ln in c.splitlines())}
        for name, ed in edits.items():
            code = ed(src.code)
            path = out / f"ln_{name}_{rows}_{nw}.py"
            path.write_text(code)
            spec = importlib.util.spec_from_file_location(f"ln_{name}_{rows}_{nw}", path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            kern = getattr(mod, src.entry)
            o = torch.empty_like(x)
            grid = tuple(src.launch["grid"])

            def call(kern=kern, o=o, grid=grid, launch=src.launch):
                kern[grid](x, g, be, o, num_warps=launch["num_warps"], num_stages=launch["num_stages"])

            try:
                call()
                torch.cuda.synchronize()
                rec("layernorm", f"experiment {name} rows{rows} w{nw}", bg.timer(call), 0, nb, rel_err(o, ref))
            except Exception as exc:  # noqa: BLE001
                rec("layernorm", f"experiment {name}", float("nan"), note=repr(exc)[:300])


def main() -> None:
    import bench_gpu as bg
    import torch
    import torch.nn.functional as F

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/tmp/variants")
    ap.add_argument("--only", default="matmul,conv,layernorm")
    ap.add_argument("--deadline-s", type=float, default=500)
    opts = ap.parse_args()
    deadline = time.time() + opts.deadline_s
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    rows: list[dict] = []

    def rec(work, impl, ms, flops=0, nbytes=0, rel=None, note=""):
        r = {"workload": work, "impl": impl, "ms": ms, "rel_err": rel, "note": note}
        if flops:
            r["tflops"] = flops / ms / 1e9
        if nbytes:
            r["gbps"] = nbytes / ms / 1e6
        rows.append(r)
        print(json.dumps(r), flush=True)
        (out / "variants.json").write_text(json.dumps(rows, indent=1))

    def rel_err(got, ref):
        return float((got.double() - ref).norm() / ref.norm())

    def ours(work, w, sched_fn, label, ins, ref, flops=0, nbytes=0):
        if time.time() > deadline:
            return
        try:
            t0 = time.time()
            k = asc.build(sched_fn(Schedule(w.dag)), w.tensors(), label[0])
            o = torch.full(tuple(w.dag.outputs[0].shape), float("nan"), device="cuda")
            k(*ins, o)
            torch.cuda.synchronize()
            rel = rel_err(o, ref)
            rec(work, label[1], bg.timer(lambda: k(*ins, o)), flops, nbytes, rel,
                f"build {time.time() - t0:.1f}s {k.source_obj.launch}")
        except Exception as exc:  # noqa: BLE001
            rec(work, label[1], float("nan"), note=repr(exc)[:300])

    only = opts.only.split(",")
    if "matmul" in only:
        n = 4096
        w = Workload.create("matmul", n, n, n, "float32")
        a, b = torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")
        ref = a.double() @ b.double()
        fl = 2 * n ** 3
        rec("matmul", "cublas", bg.timer(lambda: a @ b), fl, rel=rel_err(a @ b, ref))
        for cfg in MM:
            t, i, rk, v, vf, sl, db, gr = cfg
            ours("matmul", w, lambda s, t=t, i=i, rk=rk, v=v, vf=vf, sl=sl, db=db, gr=gr: gt.cuda_gemm(
                s, t, i, rk, v, vector_fetch=vf, smem_layout=sl, double_buffer=db, group=gr), ("cuda", str(cfg)),
                (a, b), ref, fl)
        del a, b, ref
    if "conv" in only:
        w = Workload.create("conv2d_nchw", 32, 256, 14, 14, 256, 3, 3, 1, 1)
        x, wt = torch.randn(32, 256, 14, 14, device="cuda"), torch.randn(256, 256, 3, 3, device="cuda")
        ref = F.conv2d(x.double(), wt.double(), padding=1)
        fl = w.flops
        rec("conv", "cudnn", bg.timer(lambda: F.conv2d(x, wt, padding=1)), fl,
            rel=rel_err(F.conv2d(x, wt, padding=1), ref))
        for cfg in CONV:
            t, i, rk, v, vf, sl, db = cfg
            ours("conv", w, lambda s, t=t, i=i, rk=rk, v=v, vf=vf, sl=sl, db=db: gt.cuda_gemm(
                s, t, i, rk, v, vector_fetch=vf, smem_layout=sl, double_buffer=db), ("cuda", str(cfg)), (x, wt),
                ref, fl)
    if "layernorm" in only:
        m, n = 16384, 4096
        w = Workload.create("layernorm", m, n)
        x = torch.randn(m, n, device="cuda")
        g, be = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
        ref = F.layer_norm(x.double(), (n,), g.double(), be.double(), 1e-5)
        nb = 2 * m * n * 4
        f = torch.compile(lambda a, g, b: F.layer_norm(a, (n,), g, b, 1e-5))
        rec("layernorm", "torch_compile", bg.timer(lambda: f(x, g, be)), 0, nb, rel_err(f(x, g, be), ref))
        for cfg in LN:
            r, bn, nw = cfg
            ours("layernorm", w, lambda s, r=r, bn=bn, nw=nw: gt.triton_rowwise(s, r, bn or None, nw),
                 ("triton", str(cfg)), (x, g, be), ref, 0, nb)
        rec("layernorm", "torch_compile (again)", bg.timer(lambda: f(x, g, be)), 0, nb)
        layernorm_experiments(w, x, g, be, ref, nb, rec, rel_err, out, bg)
    print("\n| workload | impl | ms | TFLOP/s | GB/s | rel err |")
    for r in rows:
        print(f"| {r['workload']} | {r['impl']} | {r['ms']:.4f} | {r.get('tflops', 0):.1f} | {r.get('gbps', 0):.0f} | "
              f"{r['rel_err'] if r['rel_err'] is None else format(r['rel_err'], '.1e')} |")


if __name__ == "__main__":
    main()
