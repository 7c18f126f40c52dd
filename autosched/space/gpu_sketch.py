"""Search spaces for the GPU targets: sketch rules by op class, knobs as template holes.

The op class comes from the DAG, as in the CPU sketch rules:
- *gemm* (a reduction with data reuse: matmul, batch_matmul, dense, conv2d): on cuda,
  multi-level tiling with thread binding, SSSRRSRS-like (block / virtual thread / thread / register
  levels per spatial axis, shared-memory stage and register levels per reduction axis) with
  cooperative fetch, and the knobs of lower_gpu's passes: 128-bit fetch, shared layout, double
  buffering, grouped block order; on triton, BLOCK_M/N/K, num_warps, num_stages and the GROUP_M program order;
- *rowwise* (an element-wise output fed by row reductions: softmax, layernorm): on triton, rows
  per program, the row chunk (whole row or a loop over chunks), warps, Welford fusion of a
  chunked mean/variance pair, and an evict-first hint on the output store; on cuda a correct
  one-thread-per-row fallback;
- *reduce* (a reduction output without reuse) and *elementwise* (gelu, bias+relu): blocked.
Validity predicates drop configs that break the device limits (threads per block, register
tile, shared memory for Triton's pipeline stages) before anything is built.

Each space also carries *seeds* (`TemplateSpace.seeds`): a handful of configurations derived by
rule from the workload's shapes and the device limits, which the tuner measures in its first
batch (see `space_gpu_seeds.gemm_seeds_cuda`, `gemm_seeds_triton`, `rowwise_seeds`, `elementwise_seeds`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from autosched.dtypes import DTYPE_BYTES
from autosched.space import gpu_templates as gt
from autosched.space.cpu_sketch import has_reuse
from autosched.space.gpu_axes import cuda_rk, cuda_trips, pow2_upto
from autosched.space.gpu_seeds import gemm_seeds_cuda
from autosched.space.knobs import Config
from autosched.space.template import TemplateSpace
from autosched.target.gpu import H200, SM_COUNT
from autosched.te.dag import ComputeDAG
from autosched.te.expr import BUILTIN_REDUCERS, Binary, Reducer
from autosched.workload import Workload


def op_class(dag: ComputeDAG) -> str:
    out = dag.outputs[0]
    if any(has_reuse(t.op) for t in dag.computes):
        return "gemm"
    if out.op.reduce_axis:
        return "reduce"
    if any(t.op.reduce_axis for t in dag.computes):
        return "rowwise"
    return "elementwise"


# ---- cuda --------------------------------------------------------------------------------------


def _cuda_gemm(dag: ComputeDAG):
    out = dag.outputs[0].op
    red = next(t.op for t in reversed(dag.computes) if t.op.reduce_axis)
    sp = [a.extent for a in out.axis]
    rk = [a.extent for a in red.reduce_axis]

    def tmpl(cfg, s, tensors) -> None:
        for d, n in enumerate(sp):
            cfg.define_knob(f"tile{d}", cuda_trips(n))
        for r, n in enumerate(rk):
            cfg.define_knob(f"rk{r}", cuda_rk(n))
        cfg.define_knob("vector_fetch", (1, 4))
        cfg.define_knob("smem_layout", (0, 1, 2))
        cfg.define_knob("double_buffer", (0, 1, 2))
        cfg.define_knob("group", (1, 8))
        tiles = [cfg[f"tile{d}"] for d in range(len(sp))]
        gt.cuda_gemm(s, [t for _, t, _ in tiles], [i for _, _, i in tiles], [cfg[f"rk{r}"] for r in range(len(rk))],
                     [v for v, _, _ in tiles], vector_fetch=cfg["vector_fetch"], smem_layout=cfg["smem_layout"],
                     double_buffer=cfg["double_buffer"], group=cfg["group"])

    def valid(values: dict) -> bool:
        threads = regs = 1
        for d in range(len(sp)):
            v, t, i = values[f"tile{d}"]
            threads, regs = threads * t, regs * i * v
        return 32 <= threads <= 1024 and regs <= 128

    return tmpl, valid


def _cuda_elementwise(dag: ComputeDAG):
    def tmpl(cfg, s, tensors) -> None:
        cfg.define_knob("threads", (128, 256, 512, 1024))
        cfg.define_knob("per_thread", (1, 2, 4, 8))
        gt.cuda_elementwise(s, cfg["threads"], cfg["per_thread"])

    return tmpl, None


def _cuda_rows(dag: ComputeDAG):
    def tmpl(cfg, s, tensors) -> None:
        cfg.define_knob("threads", (32, 64, 128, 256))
        gt.cuda_rows(s, cfg["threads"])

    return tmpl, None


# ---- triton ------------------------------------------------------------------------------------


def _gemm_mnk(dag: ComputeDAG):
    """(M, N, K, the reduction stage) of a gemm-like DAG: the output's last two axes, and the
    product of the reduction's axes."""
    out = dag.outputs[0].op
    red = next(t for t in reversed(dag.computes) if t.op.reduce_axis)
    k = 1
    for a in red.op.reduce_axis:
        k *= a.extent
    return out.axis[-2].extent, out.axis[-1].extent, k, red


def _triton_gemm(dag: ComputeDAG):
    m, n, k, red = _gemm_mnk(dag)
    nbytes = max(DTYPE_BYTES.get(t.dtype, 4) for t in red.op.input_tensors())

    def tmpl(cfg, s, tensors) -> None:
        cfg.define_knob("bm", pow2_upto(m, (32, 64, 128, 256)))
        cfg.define_knob("bn", pow2_upto(n, (32, 64, 128, 256)))
        cfg.define_knob("bk", pow2_upto(k, (16, 32, 64, 128)))
        cfg.define_knob("group_m", (1, 8))
        cfg.define_knob("num_warps", (4, 8))
        cfg.define_knob("num_stages", (2, 3, 4, 5))
        gt.triton_gemm(s, cfg["bm"], cfg["bn"], cfg["bk"], cfg["group_m"], cfg["num_warps"], cfg["num_stages"])

    def valid(v: dict) -> bool:
        smem = v["num_stages"] * (v["bm"] * v["bk"] + v["bk"] * v["bn"]) * nbytes
        acc_regs = v["bm"] * v["bn"] // (32 * v["num_warps"])
        return smem <= H200.max_shared_bytes and acc_regs <= 256

    return tmpl, valid


TRITON_GEMM_CONFIGS = ((128, 256, 64, 8, 3), (256, 128, 64, 8, 3), (128, 128, 64, 8, 4), (64, 256, 32, 4, 4),
                       (128, 128, 32, 4, 4), (128, 64, 32, 4, 4), (64, 128, 32, 4, 4), (64, 64, 32, 4, 5))
"""(BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages): the Hopper configs of Triton's matmul
autotune lists (the tutorial's and inductor's), largest tiles first; GROUP_M 8."""


def gemm_seeds_triton(dag: ComputeDAG) -> list[dict[str, Any]]:
    """Seeds of the triton gemm space: TRITON_GEMM_CONFIGS with each block clamped to the problem
    (the smallest power of two >= M, N, K, as the knobs have it); configs whose grid fills the
    device come first. The space's validity predicate (shared memory of the stages, accumulator
    registers) drops what does not fit, e.g. the large tiles for fp32 operands."""
    m, n, k, _ = _gemm_mnk(dag)
    out = dag.outputs[0].op
    batch = 1
    for a in out.axis[:-2]:
        batch *= a.extent

    def clamp(x: int, ext: int, choices) -> int:
        return min(x, max(pow2_upto(ext, choices)))

    seeds: list[tuple[bool, dict]] = []
    for bm, bn, bk, warps, stages in TRITON_GEMM_CONFIGS:
        cfg = {"bm": clamp(bm, m, (32, 64, 128, 256)), "bn": clamp(bn, n, (32, 64, 128, 256)),
               "bk": clamp(bk, k, (16, 32, 64, 128)), "group_m": 8, "num_warps": warps, "num_stages": stages}
        programs = batch * -(-m // cfg["bm"]) * -(-n // cfg["bn"])
        if all(cfg != c for _, c in seeds):
            seeds.append((programs >= SM_COUNT, cfg))
    return [c for full, c in seeds if full] + [c for full, c in seeds if not full]


def _triton_rowwise(dag: ComputeDAG):
    n = dag.outputs[0].op.axis[-1].extent

    def tmpl(cfg, s, tensors) -> None:
        cfg.define_knob("rows", (1, 2, 4))
        cfg.define_knob("block_n", tuple(c for c in (0, 512, 1024, 2048) if c < n))
        cfg.define_knob("num_warps", (4, 8, 16))
        cfg.define_knob("welford", (0, 1))
        cfg.define_knob("store_evict", (0, 1))
        gt.triton_rowwise(s, cfg["rows"], cfg["block_n"] or None, cfg["num_warps"])
        if cfg["welford"]:
            welford(s)
        if cfg["store_evict"]:
            store_evict(s)

    def valid(v: dict) -> bool:
        cols = v["block_n"] or n
        # welford only changes chunked kernels (block_n > 0): drop the duplicates of the others
        return v["rows"] * cols <= 16384 and not (v["welford"] and not v["block_n"])

    return tmpl, valid


def rowwise_seeds(dag: ComputeDAG) -> list[dict[str, Any]]:
    """Seeds of the triton rowwise space: the row walked in the largest chunk of at most half the
    row that divides it, with Welford fusion (two passes over the row, the second from L2) and the
    output stored `evict_first`, 16 then 8 warps, and 16 warps without the store hint; then the row
    held in registers, one row and the most rows per program that fit (16 values per thread: warps =
    rows x n / 512, 4 to 16), stores without the hint: the hint helps the Welford kernels and costs
    the row-in-registers ones (see docs/decisions/triton-rowwise-seeds.md). The Welford seeds only where the
    row reductions can be a mean/variance pair (two sums or more; softmax's max and sum are not:
    its chunked kernels read the row three times)."""
    n = dag.outputs[0].op.axis[-1].extent
    seeds = []
    chunks = [c for c in (512, 1024, 2048) if 2 * c <= n and n % c == 0]
    sums = sum(1 for t in dag.computes if t.op.reduce_axis and adds(t.op.body.reducer))
    if chunks and sums >= 2:
        seeds += [{"rows": 1, "block_n": max(chunks), "num_warps": w, "welford": 1, "store_evict": e}
                  for w, e in ((16, 1), (8, 1), (16, 0))]
    for rows in sorted({1, max(r for r in (1, 2, 4) if r * n <= 16384 or r == 1)}):
        warps = max(w for w in (4, 8, 16) if w == 4 or w * 512 <= rows * n)
        seeds.append({"rows": rows, "block_n": 0, "num_warps": warps, "welford": 0, "store_evict": 0})
    return seeds


def adds(r: Reducer) -> bool:
    """Whether reducer `r` is a sum: `te.sum`, or one declared to combine x + y from 0, whatever its name
    (a reducer named "sum" that multiplies is not one)."""
    if r is BUILTIN_REDUCERS["sum"]:
        return True
    c = r.combine
    try:
        zero = r.identity("float32").value == 0
    except ValueError:
        return False
    return zero and isinstance(c, Binary) and c.op == "add" and {id(c.a), id(c.b)} == {id(r.lhs), id(r.rhs)}


def welford(s) -> None:
    """Pragma `welford` on the output's program loop: a chunked mean/variance pair is walked in one
    Welford pass, then the output pass (see codegen/triton_welford.py); other kernels ignore it."""
    out = s.dag.outputs[0].name
    stage = next(st for st in s.state.stages if st.name == out)
    loop = next(lname for lname, tag in stage.bindings.items() if tag == "blockIdx.x")
    s[out].pragma(loop, "welford", 1)


def store_evict(s) -> None:
    """Pragma `store_evict` on the output's program loop: the output is stored with
    `eviction_policy="evict_first"` (written once, never read again by the kernel)."""
    out = s.dag.outputs[0].name
    stage = next(st for st in s.state.stages if st.name == out)
    loop = next(lname for lname, tag in stage.bindings.items() if tag == "blockIdx.x")
    s[out].pragma(loop, "store_evict", 1)


def _triton_elementwise(dag: ComputeDAG):
    def tmpl(cfg, s, tensors) -> None:
        cfg.define_knob("block", (512, 1024, 2048, 4096, 8192))
        cfg.define_knob("num_warps", (4, 8, 16))
        gt.triton_elementwise(s, cfg["block"], cfg["num_warps"])

    return tmpl, None


def elementwise_seeds_triton(dag: ComputeDAG) -> list[dict[str, Any]]:
    """16 values per thread (four 128-bit accesses) at 4, 8 and 16 warps."""
    return [{"block": w * 32 * 16, "num_warps": w} for w in (8, 4, 16)]


def elementwise_seeds_cuda(dag: ComputeDAG) -> list[dict[str, Any]]:
    """256 threads x 4 values (a coalesced 4 KB per block), and 128 x 8, 512 x 4."""
    return [{"threads": 256, "per_thread": 4}, {"threads": 128, "per_thread": 8}, {"threads": 512, "per_thread": 4}]


def _triton_reduce(dag: ComputeDAG):
    def tmpl(cfg, s, tensors) -> None:
        cfg.define_knob("rows", (1, 4, 16))
        cfg.define_knob("block_k", (256, 1024, 4096))
        cfg.define_knob("num_warps", (4, 8))
        gt.triton_reduce(s, cfg["rows"], cfg["block_k"], cfg["num_warps"])

    return tmpl, None


RULES: dict[tuple[str, str], Callable] = {
    ("cuda", "gemm"): _cuda_gemm, ("cuda", "elementwise"): _cuda_elementwise, ("cuda", "rowwise"): _cuda_rows,
    ("cuda", "reduce"): _cuda_rows, ("triton", "gemm"): _triton_gemm, ("triton", "rowwise"): _triton_rowwise,
    ("triton", "elementwise"): _triton_elementwise, ("triton", "reduce"): _triton_reduce,
}


SEEDS: dict[tuple[str, str], Callable[[ComputeDAG], list[dict[str, Any]]]] = {
    ("cuda", "gemm"): gemm_seeds_cuda, ("triton", "gemm"): gemm_seeds_triton, ("triton", "rowwise"): rowwise_seeds,
    ("triton", "elementwise"): elementwise_seeds_triton, ("cuda", "elementwise"): elementwise_seeds_cuda,
}
MAX_SEEDS = 8


def gpu_space(workload: Workload, kind: str) -> TemplateSpace:
    """The search space of `workload` on GPU target `kind` ("cuda" or "triton"), with its seeds."""
    dag = workload.dag
    cls = op_class(dag)
    tmpl, valid = RULES[(kind, cls)](dag)
    space = TemplateSpace(dag, tmpl, workload.args_order)
    if valid is not None:
        cs = space.space

        def is_valid(config: Config) -> bool:
            return valid(cs.values(config))

        space.space = cs.with_validity(is_valid)
    rule = SEEDS.get((kind, cls))
    if rule is not None:
        space.seeds = tuple(valid_seeds(space, rule(dag))[:MAX_SEEDS])
    return space


def valid_seeds(space: TemplateSpace, seeds: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The seeds that are configs of the space and pass its validity predicate, without repeats."""
    out: list[dict[str, Any]] = []
    for v in seeds:
        try:
            c = space.space.index_of(v)
        except ValueError:
            continue
        if space.space.valid(c) and space.space.values(c) not in out:
            out.append(space.space.values(c))
    return out
