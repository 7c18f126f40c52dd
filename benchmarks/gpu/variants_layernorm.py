"""Layernorm (and softmax) 16384x4096 fp32 on the H200: hand-written Triton STRUCTURES and cache
hints side by side with torch.compile and a copy of the same bytes, in ONE process, to learn which
knob the triton rowwise lowering should get before changing it. Every variant is checked against
a float64 numpy reference (output poisoned with NaN first) and timed like bench_gpu.py (CUDA
events, 256 MB L2 flush before each call, median of 25), in ROUNDS interleaved rounds: the
reported figure is the median of the round medians, the spread is max/min of them.

Structures (X read once unless said):
- rows:    ROWS rows per program, grid M/ROWS, the rows held in registers (the codegen's structure).
- persist: a persistent grid of SMs*PER_SM programs, each looping over blocks of ROWS rows, the
           row in registers, gamma/beta loaded once per program.
- welford: one row per program, Welford over BLOCK chunks (evict_last), the output loop re-reads
           the row from L2 (inductor's structure, the codegen's `welford` pragma).
Hints: LD / ST = eviction policy of the X load / the Y store ("" none, "evict_first", "evict_last");
LDC / STC = cache modifier (".cg" load at L2 only, ".cs" streaming store).

    python benchmarks/gpu/variants_layernorm.py --out DIR                     # on the GPU
    TRITON_INTERPRET=1 python benchmarks/gpu/variants_layernorm.py --check   # CPU, small, no timing
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

EPS = 1e-5


@triton.jit
def _ln_tile(x, gam, bet, N: tl.constexpr):
    mean = tl.sum(x, axis=1, keep_dims=True) * (1.0 / N)
    d = x - mean
    var = tl.sum(d * d, axis=1, keep_dims=True) * (1.0 / N)
    return d * tl.rsqrt(var + 1e-5) * gam + bet


@triton.jit
def ln_rows(X, G, B, Y, N: tl.constexpr, ROWS: tl.constexpr, LD: tl.constexpr, ST: tl.constexpr,
            LDC: tl.constexpr, STC: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, N)
    offs = rows[:, None] * N + cols[None, :]
    x = tl.load(X + offs, eviction_policy=LD, cache_modifier=LDC)
    gam = tl.load(G + cols)[None, :]
    bet = tl.load(B + cols)[None, :]
    tl.store(Y + offs, _ln_tile(x, gam, bet, N), eviction_policy=ST, cache_modifier=STC)


@triton.jit
def ln_persist(X, G, B, Y, NBLK, NPROG, N: tl.constexpr, ROWS: tl.constexpr, LD: tl.constexpr,
               ST: tl.constexpr, LDC: tl.constexpr, STC: tl.constexpr):
    cols = tl.arange(0, N)
    gam = tl.load(G + cols)[None, :]
    bet = tl.load(B + cols)[None, :]
    for blk in range(tl.program_id(0), NBLK, NPROG):
        rows = blk * ROWS + tl.arange(0, ROWS)
        offs = rows[:, None] * N + cols[None, :]
        x = tl.load(X + offs, eviction_policy=LD, cache_modifier=LDC)
        tl.store(Y + offs, _ln_tile(x, gam, bet, N), eviction_policy=ST, cache_modifier=STC)


@triton.jit
def ln_welford(X, G, B, Y, N: tl.constexpr, BLOCK: tl.constexpr, ST: tl.constexpr, STC: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    base = X + row * N
    mean_l = tl.zeros((BLOCK,), tl.float32)
    m2_l = tl.zeros((BLOCK,), tl.float32)
    for k in range(N // BLOCK):
        x = tl.load(base + k * BLOCK + cols, eviction_policy="evict_last")
        delta = x - mean_l
        mean_l += delta / (k + 1.0)
        m2_l += delta * (x - mean_l)
    mean = tl.sum(mean_l, axis=0) / BLOCK
    dm = mean_l - mean
    m2 = tl.sum(m2_l, axis=0) + (N // BLOCK) * tl.sum(dm * dm, axis=0)
    rstd = tl.rsqrt(m2 / N + 1e-5)
    for k in range(N // BLOCK):
        x = tl.load(base + k * BLOCK + cols, eviction_policy="evict_first")
        g = tl.load(G + k * BLOCK + cols)
        b = tl.load(B + k * BLOCK + cols)
        tl.store(Y + row * N + k * BLOCK + cols, (x - mean) * rstd * g + b, eviction_policy=ST, cache_modifier=STC)


@triton.jit
def sm_rows(X, Y, N: tl.constexpr, ROWS: tl.constexpr, ST: tl.constexpr, STC: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    offs = rows[:, None] * N + tl.arange(0, N)[None, :]
    x = tl.load(X + offs)
    e = tl.exp(x - tl.max(x, axis=1, keep_dims=True))
    tl.store(Y + offs, e * (1.0 / tl.sum(e, axis=1, keep_dims=True)), eviction_policy=ST, cache_modifier=STC)


@triton.jit
def copy_k(X, Y, BLOCK: tl.constexpr, STC: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Y + offs, tl.load(X + offs), cache_modifier=STC)


HINTS = {"none": ("", "", "", ""), "st_ef": ("", "evict_first", "", ""), "st_cs": ("", "", "", ".cs"),
         "ld_ef+st_cs": ("evict_first", "", "", ".cs"), "ld_cg+st_cs": ("", "", ".cg", ".cs"),
         "ld_ef+st_ef": ("evict_first", "evict_first", "", "")}


def ln_variants(m: int, n: int, sms: int, full: bool = True) -> list[tuple[str, Callable]]:
    """(label, launch(x, g, b, y)) for every layernorm variant."""
    out: list[tuple[str, Callable]] = []
    hint_sets = list(HINTS) if full else ["none", "st_cs"]
    for rows, nw in ((1, 4), (1, 8), (1, 16), (2, 8), (2, 16), (4, 16)):
        for h in hint_sets if (rows, nw) in ((1, 8), (1, 16), (2, 16)) else ["none", "st_cs"]:
            ld, st, ldc, stc = HINTS[h]

            def go(x, g, b, y, rows=rows, nw=nw, ld=ld, st=st, ldc=ldc, stc=stc):
                ln_rows[(m // rows,)](x, g, b, y, N=n, ROWS=rows, LD=ld, ST=st, LDC=ldc, STC=stc, num_warps=nw)

            out.append((f"rows r{rows} w{nw} {h}", go))
    for rows, nw, per_sm, stages in ((1, 8, 4, 1), (1, 8, 8, 1), (1, 4, 8, 1), (1, 4, 16, 1), (1, 16, 2, 1),
                                     (1, 16, 4, 1), (2, 16, 2, 1), (1, 8, 8, 3), (1, 4, 16, 3)):
        nblk = m // rows
        nprog = min(nblk, sms * per_sm)
        for h in ("none", "st_cs", "ld_ef+st_cs") if full else ("none",):
            ld, st, ldc, stc = HINTS[h]

            def go(x, g, b, y, rows=rows, nw=nw, nprog=nprog, nblk=nblk, stages=stages, ld=ld, st=st, ldc=ldc,
                   stc=stc):
                ln_persist[(nprog,)](x, g, b, y, nblk, nprog, N=n, ROWS=rows, LD=ld, ST=st, LDC=ldc, STC=stc,
                                     num_warps=nw, num_stages=stages)

            out.append((f"persist r{rows} w{nw} x{per_sm}/SM st{stages} {h}", go))
    for block, nw in ((2048, 4), (2048, 8), (2048, 16), (1024, 4)):
        if block > n:
            continue
        for h in ("none", "st_ef", "st_cs"):
            _, st, _, stc = HINTS[h]

            def go(x, g, b, y, block=block, nw=nw, st=st, stc=stc):
                ln_welford[(m,)](x, g, b, y, N=n, BLOCK=block, ST=st, STC=stc, num_warps=nw)

            out.append((f"welford b{block} w{nw} {h}", go))
    # second call (after the first had the Welford kernels with the store hint best): warps, chunk and
    # pipelining around that winner, and the row in registers at 32 warps
    for block, nw, stages in ((2048, 16, 1), (2048, 16, 2), (2048, 32, 3), (4096, 16, 3), (4096, 32, 3),
                              (1024, 16, 3), (1024, 8, 3)):
        if block > n:
            continue

        def go(x, g, b, y, block=block, nw=nw, stages=stages):
            ln_welford[(m,)](x, g, b, y, N=n, BLOCK=block, ST="evict_first", STC="", num_warps=nw, num_stages=stages)

        out.append((f"welford b{block} w{nw} st{stages} st_ef (call 2)", go))
    out.append(("rows r1 w32 none (call 2)",
                lambda x, g, b, y: ln_rows[(m,)](x, g, b, y, N=n, ROWS=1, LD="", ST="", LDC="", STC="", num_warps=32)))
    return out


def sm_variants(m: int, n: int) -> list[tuple[str, Callable]]:
    out = []
    for rows, nw in ((1, 8), (1, 16), (2, 16)):
        for h in ("none", "st_ef", "st_cs"):
            _, st, _, stc = HINTS[h]

            def go(x, y, rows=rows, nw=nw, st=st, stc=stc):
                sm_rows[(m // rows,)](x, y, N=n, ROWS=rows, ST=st, STC=stc, num_warps=nw)

            out.append((f"softmax rows r{rows} w{nw} {h}", go))
    return out


def ln_ref(x: np.ndarray, g: np.ndarray, b: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    mu = x.mean(axis=1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=1, keepdims=True)
    return (x - mu) / np.sqrt(var + EPS) * g.astype(np.float64) + b.astype(np.float64)


def sm_ref(x: np.ndarray) -> np.ndarray:
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def rel_err(y, ref: np.ndarray) -> float:
    h = y.cpu().numpy().astype(np.float64)
    return float(np.linalg.norm(h - ref) / np.linalg.norm(ref)) if np.isfinite(h).all() else float("nan")


def check_interpreted() -> None:
    """TRITON_INTERPRET=1: every variant on a small problem on CPU tensors, against float64 numpy."""
    import torch

    m, n = 32, 1024
    rng = np.random.default_rng(1)
    xn = (rng.standard_normal((m, n)) * 3 + 1.5).astype(np.float32)
    gn, bn = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    x, g, b = torch.from_numpy(xn), torch.from_numpy(gn), torch.from_numpy(bn)
    ref = ln_ref(xn, gn, bn)
    labels = {}
    for label, go in ln_variants(m, n, 2, full=False):
        key = label.rsplit(" ", 1)[0]
        if key in labels:  # hints change no result: one of each structure keeps the check short
            continue
        y = torch.full_like(x, float("nan"))
        go(x, g, b, y)
        labels[key] = rel_err(y, ref)
        print(f"{label:45s} rel err {labels[key]:.1e}")
        assert labels[key] < 1e-5, label
    sref = sm_ref(xn)
    for label, go in sm_variants(m, n)[::3]:
        y = torch.full_like(x, float("nan"))
        go(x, y)
        print(f"{label:45s} rel err {rel_err(y, sref):.1e}")
        assert rel_err(y, sref) < 1e-5, label


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/tmp/variants_layernorm")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--deadline-s", type=float, default=300)
    ap.add_argument("--filter", default="", help="comma-separated substrings: only the variants whose label has one "
                    "(copies, torch.compile and the codegen kernels are always measured)")
    opts = ap.parse_args()
    if opts.check:
        check_interpreted()
        return
    import bench_gpu as bg
    import torch
    import torch.nn.functional as F

    import autosched as asc
    from autosched.schedule.schedule import Schedule
    from autosched.space import gpu_templates as gt
    from autosched.space.gpu_sketch import store_evict, welford
    from autosched.workload import Workload

    t0 = time.time()
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    m, n = 16384, 4096
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rng = np.random.default_rng(0)
    xn = (rng.standard_normal((m, n)) * 3 + 1.5).astype(np.float32)
    gn, bn = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    refs = {"ln": ln_ref(xn, gn, bn), "sm": sm_ref(xn)}
    x, g, b = (torch.from_numpy(a).cuda() for a in (xn, gn, bn))
    y = torch.empty_like(x)
    nb = 2 * m * n * 4
    cases: list[tuple[str, str, Callable, Callable]] = []  # (label, ref key, run-and-return-output, timed fn)

    def ours(label: str, fn: Callable, ref: str = "ln") -> None:
        cases.append((label, ref, lambda: (y.fill_(float("nan")), fn(), y)[2], fn))

    cdst = torch.empty_like(x)
    cases.append(("copy torch copy_ (same bytes)", "", lambda: None, lambda: cdst.copy_(x)))
    for stc in ("", ".cs"):
        cases.append((f"copy triton b4096 w8 {stc or 'none'}", "", lambda: None,
                      lambda stc=stc: copy_k[(m * n // 4096,)](x, cdst, BLOCK=4096, STC=stc, num_warps=8)))
    f_ln = torch.compile(lambda a, g, b: F.layer_norm(a, (n,), g, b, EPS))
    f_sm = torch.compile(lambda a: torch.softmax(a, -1))
    cases.append(("torch_compile layernorm", "ln", lambda: f_ln(x, g, b), lambda: f_ln(x, g, b)))
    w = Workload.create("layernorm", m, n)
    keep = lambda label: not opts.filter or any(f in label for f in opts.filter.split(","))  # noqa: E731
    for r_, bn_, nw, wf, ev in ((1, None, 8, 0, 0), (4, None, 16, 0, 0), (1, 2048, 4, 1, 0), (1, 2048, 8, 1, 0),
                                (1, 2048, 16, 1, 0), (1, 2048, 16, 1, 1), (1, 2048, 8, 1, 1), (1, 2048, 4, 1, 1)):
        s = gt.triton_rowwise(Schedule(w.dag), r_, bn_, nw)
        if wf:
            welford(s)
        if ev:
            store_evict(s)
        k = asc.build(s, w.tensors(), "triton")
        ours(f"codegen rows{r_} block{bn_} w{nw}{' welford' if wf else ''}{' store_evict' if ev else ''}",
             lambda k=k: k(x, g, b, y))
    for label, go in ln_variants(m, n, sms):
        if keep(label):
            ours(label, lambda go=go: go(x, g, b, y))
    cases.append(("torch_compile layernorm (again)", "ln", lambda: f_ln(x, g, b), lambda: f_ln(x, g, b)))
    cases.append(("torch_compile softmax", "sm", lambda: f_sm(x), lambda: f_sm(x)))
    for label, go in sm_variants(m, n):
        if keep(label):
            ours(label, lambda go=go: go(x, y), "sm")
    results: dict[str, dict] = {}
    live = []
    for label, ref, run, fn in cases:  # build + check
        try:
            o = run()
            torch.cuda.synchronize()
            err = rel_err(o, refs[ref]) if ref else 0.0
            results[label] = {"impl": label, "rel_err": err, "ms_rounds": []}
            if err < 1e-5:
                live.append((label, fn))
            else:
                results[label]["note"] = "WRONG"
        except Exception as exc:  # noqa: BLE001  a failing variant is a row
            results[label] = {"impl": label, "rel_err": float("nan"), "ms_rounds": [], "note": repr(exc)[:300]}
        print(json.dumps(results[label]), flush=True)
    print(f"built and checked {len(cases)} in {time.time() - t0:.0f} s", flush=True)
    for rnd in range(opts.rounds):
        if time.time() - t0 > opts.deadline_s:
            break
        for label, fn in (live if rnd % 2 == 0 else live[::-1]):
            results[label]["ms_rounds"].append(bg.timer(fn))
    rows = []
    for r in results.values():
        ms = r["ms_rounds"]
        r["ms"] = float(np.median(ms)) if ms else float("nan")
        r["gbps"] = nb / r["ms"] / 1e6 if ms else 0.0
        r["spread"] = max(ms) / min(ms) - 1 if ms else 0.0
        rows.append(r)
    info = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "triton": triton.__version__,
            "sms": sms, "rounds": opts.rounds, "seconds": time.time() - t0}
    (out / "variants_layernorm.json").write_text(json.dumps({"info": info, "rows": rows}, indent=1))
    comp = {k: results[k]["ms"] for k in ("torch_compile layernorm", "torch_compile softmax")}
    print(f"\n{info}\n| impl | ms | GB/s | vs compile | spread | rel err |")
    for r in sorted(rows, key=lambda r: (r["impl"].startswith("softmax") or "softmax" in r["impl"], -r["gbps"])):
        c = comp["torch_compile softmax" if "softmax" in r["impl"] else "torch_compile layernorm"]
        print(f"| {r['impl']} | {r['ms']:.4f} | {r['gbps']:.0f} | {c / r['ms']:.3f} | {r['spread']:.1%} | "
              f"{r['rel_err']:.1e} |")


if __name__ == "__main__":
    main()
