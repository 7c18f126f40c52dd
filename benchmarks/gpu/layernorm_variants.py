"""Layernorm 16384x4096 fp32 on the triton target: kernel STRUCTURES side by side with torch.compile,
in one process, timed like bench_gpu.py (CUDA events, cold L2, median of 25), each checked against
a float64 reference. Experiments written by hand to learn which structure the code generator
should emit before changing it (triton_plan/triton_gen); the codegen's own kernel is the baseline.

- ours: `gpu_templates.triton_rowwise` (ROWS rows per program, the row kept in registers).
- grid: a persistent grid of NPROG programs looping over blocks of ROWS rows with
  `tl.range(..., num_stages=S)` (Triton may prefetch the next block while this one reduces);
  gamma/beta loaded once per program instead of once per block.
- welford: inductor's structure: one row per program, pass 1 Welford over BLOCK chunks
  (evict_last), pass 2 re-reads the row (from L2, evict_first) to normalize; two DRAM-sized
  passes in instructions, one in DRAM traffic.

    python benchmarks/gpu/layernorm_variants.py --out DIR          # on the GPU
    TRITON_INTERPRET=1 python benchmarks/gpu/layernorm_variants.py --check   # CPU, small, no timing
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

EPS = 1e-5


@triton.jit
def ln_grid(X, G, B, Y, NBLK, NPROG, N: tl.constexpr, ROWS: tl.constexpr, STAGES: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, N)
    gam = tl.load(G + cols)[None, :]
    bet = tl.load(B + cols)[None, :]
    for blk in tl.range(pid, NBLK, NPROG, num_stages=STAGES):
        rows = blk * ROWS + tl.arange(0, ROWS)
        offs = rows[:, None] * N + cols[None, :]
        x = tl.load(X + offs)
        mean = tl.sum(x, axis=1, keep_dims=True) * (1.0 / N)
        d = x - mean
        var = tl.sum(d * d, axis=1, keep_dims=True) * (1.0 / N)
        tl.store(Y + offs, d * tl.rsqrt(var + 1e-5) * gam + bet)


@triton.jit
def ln_welford(X, G, B, Y, N: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    base = X + row * N
    mean_l = tl.zeros((BLOCK,), tl.float32)
    m2_l = tl.zeros((BLOCK,), tl.float32)
    for k in range(N // BLOCK):
        x = tl.load(base + k * BLOCK + cols, eviction_policy="evict_last")
        delta = x - mean_l
        mean_l += delta / (k + 1.0)
        m2_l += delta * (x - mean_l)
    # Chan's combination of BLOCK lanes of equal count N/BLOCK
    mean = tl.sum(mean_l, axis=0) / BLOCK
    dm = mean_l - mean
    m2 = tl.sum(m2_l, axis=0) + (N // BLOCK) * tl.sum(dm * dm, axis=0)
    rstd = tl.rsqrt(m2 / N + 1e-5)
    for k in range(N // BLOCK):
        x = tl.load(base + k * BLOCK + cols, eviction_policy="evict_first")
        g = tl.load(G + k * BLOCK + cols, eviction_policy="evict_last")
        b = tl.load(B + k * BLOCK + cols, eviction_policy="evict_last")
        tl.store(Y + row * N + k * BLOCK + cols, (x - mean) * rstd * g + b)


# the first device call measured all of these; the second keeps the best of each structure
GRID_ALL = ((1, 8, 8, 1), (1, 8, 8, 2), (1, 8, 8, 3), (1, 4, 16, 2), (1, 16, 4, 2), (2, 8, 4, 2), (2, 16, 4, 2),
            (4, 16, 2, 2), (4, 16, 2, 1), (1, 8, 4, 2), (1, 8, 16, 2), (2, 8, 8, 2))
WELFORD_ALL = ((1024, 4), (1024, 8), (2048, 8), (2048, 16), (4096, 16), (512, 4))
GRID_BEST, WELFORD_BEST = ((1, 4, 16, 2),), ((2048, 16), (4096, 16))
# the codegen's Welford pragma (space_gpu.welford): (rows, block_n, num_warps)
CODEGEN_WELFORD = ((1, 2048, 16), (1, 2048, 8), (1, 1024, 8), (1, 1024, 16), (2, 2048, 16), (1, 512, 8))


def variants(m: int, n: int, sms: int, grid=GRID_ALL, welford=WELFORD_ALL) -> list[tuple[str, object]]:
    """(label, launch(x, g, b, o)) for every hand-written structure and knob setting measured."""
    out = []
    for rows, nw, per_sm, stages in grid:
        nblk = m // rows
        nprog = min(nblk, sms * per_sm)

        def go(x, g, b, o, rows=rows, nw=nw, nprog=nprog, stages=stages, nblk=nblk):
            ln_grid[(nprog,)](x, g, b, o, nblk, nprog, N=n, ROWS=rows, STAGES=stages, num_warps=nw)

        out.append((f"grid rows{rows} w{nw} prog{nprog} st{stages}", go))
    for block, nw in welford:
        if block > n:
            continue

        def go(x, g, b, o, block=block, nw=nw):
            ln_welford[(m,)](x, g, b, o, N=n, BLOCK=block, num_warps=nw)

        out.append((f"welford block{block} w{nw}", go))
    return out


def check_interpreted() -> None:
    """TRITON_INTERPRET=1: every variant on a small problem on CPU tensors, against float64."""
    import torch
    import torch.nn.functional as F

    m, n = 64, 2048
    x = torch.randn(m, n) * 3 + 1.5
    g, b = torch.randn(n), torch.randn(n)
    ref = F.layer_norm(x.double(), (n,), g.double(), b.double(), EPS)
    for label, go in variants(m, n, 4):
        o = torch.full_like(x, float("nan"))
        go(x, g, b, o)
        err = float((o.double() - ref).norm() / ref.norm())
        print(f"{label:40s} rel err {err:.1e}")
        assert err < 1e-5, label


def main() -> None:
    import bench_gpu as bg
    import torch
    import torch.nn.functional as F

    import autosched as asc
    from autosched.schedule import gpu_templates as gt
    from autosched.schedule.schedule import Schedule
    from autosched.workload import Workload

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/tmp/ln_variants")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--deadline-s", type=float, default=240)
    ap.add_argument("--all", action="store_true", help="every hand variant, not the best of each structure")
    opts = ap.parse_args()
    if opts.check:
        check_interpreted()
        return
    deadline = time.time() + opts.deadline_s
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    m, n = 16384, 4096
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    x = torch.randn(m, n, device="cuda")
    g, be = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    ref = F.layer_norm(x.double(), (n,), g.double(), be.double(), EPS)
    nb = 2 * m * n * 4
    rows: list[dict] = []

    def rec(impl: str, fn, o) -> None:
        try:
            o.fill_(float("nan"))
            fn()
            torch.cuda.synchronize()
            err = float((o.double() - ref).norm() / ref.norm())
            ms = bg.timer(fn) if err < 1e-5 else float("nan")
        except Exception as exc:  # noqa: BLE001  a failing variant is a row
            err, ms, impl = float("nan"), float("nan"), f"{impl} FAILED {repr(exc)[:200]}"
        r = {"impl": impl, "ms": ms, "gbps": nb / ms / 1e6 if ms == ms else 0.0, "rel_err": err}
        rows.append(r)
        print(json.dumps(r), flush=True)
        (out / "layernorm_variants.json").write_text(json.dumps(rows, indent=1))

    def peer(impl: str, fn, err: float) -> None:
        ms = bg.timer(fn)
        rows.append({"impl": impl, "ms": ms, "gbps": nb / ms / 1e6, "rel_err": err})
        print(json.dumps(rows[-1]), flush=True)

    copy_dst = torch.empty_like(x)
    peer("copy (the same bytes: ceiling at this size)", lambda: copy_dst.copy_(x), 0.0)
    f = torch.compile(lambda a, g, b: F.layer_norm(a, (n,), g, b, EPS))
    err_c = float((f(x, g, be).double() - ref).norm() / ref.norm())
    peer("torch_compile", lambda: f(x, g, be), err_c)
    o = torch.empty_like(x)
    w = Workload.create("layernorm", m, n)
    from autosched.schedule.space_gpu import welford

    for r_, nw in ((4, 16), (1, 8)):
        k = asc.build(gt.triton_rowwise(Schedule(w.dag), r_, None, nw), w.tensors(), "triton")
        rec(f"ours codegen rows{r_} w{nw}", lambda k=k: k(x, g, be, o), o)
    for r_, bn, nw in CODEGEN_WELFORD:
        s = gt.triton_rowwise(Schedule(w.dag), r_, bn, nw)
        welford(s)
        k = asc.build(s, w.tensors(), "triton")
        rec(f"ours codegen welford rows{r_} block{bn} w{nw}", lambda k=k: k(x, g, be, o), o)
    k = asc.build(gt.triton_rowwise(Schedule(w.dag), 1, 2048, 16), w.tensors(), "triton")
    rec("ours codegen chunked 3-pass rows1 block2048 w16", lambda k=k: k(x, g, be, o), o)
    hand = variants(m, n, sms) if opts.all else variants(m, n, sms, GRID_BEST, WELFORD_BEST)
    for label, go in hand:
        if time.time() > deadline:
            break
        rec(label, lambda go=go: go(x, g, be, o), o)
    peer("torch_compile (again)", lambda: f(x, g, be), err_c)
    (out / "layernorm_variants.json").write_text(json.dumps(rows, indent=1))
    print("\n| impl | ms | GB/s | rel err |")
    for r in rows:
        print(f"| {r['impl']} | {r['ms']:.4f} | {r['gbps']:.0f} | {r['rel_err']:.1e} |")


if __name__ == "__main__":
    main()
