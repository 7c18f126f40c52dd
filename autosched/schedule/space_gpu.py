"""Search spaces for the GPU targets: sketch rules by op class, knobs as template holes.

The op class comes from the DAG, as in the CPU sketch rules:
- *gemm* (a reduction with data reuse: matmul, batch_matmul, dense, conv2d): on cuda,
  multi-level tiling with thread binding, SSSRRSRS-like (block / virtual thread / thread / register
  levels per spatial axis, shared-memory stage and register levels per reduction axis) with
  cooperative fetch, and the knobs of lower_gpu's passes: 128-bit fetch, shared layout, double
  buffering, grouped block order; on triton, BLOCK_M/N/K, num_warps, num_stages and the GROUP_M program order;
- *rowwise* (an element-wise output fed by row reductions: softmax, layernorm): on triton, rows
  per program, the row chunk (whole row or a loop over chunks), warps, and Welford fusion of a
  chunked mean/variance pair; on cuda a correct
  one-thread-per-row fallback;
- *reduce* (a reduction output without reuse) and *elementwise* (gelu, bias+relu): blocked.
Validity predicates drop configs that break the device limits (threads per block, register
tile, shared memory for Triton's pipeline stages) before anything is built.
"""

from __future__ import annotations

from collections.abc import Callable

from autosched.schedule import gpu_templates as gt
from autosched.schedule.knobs import Config
from autosched.schedule.space import has_reuse
from autosched.schedule.template import TemplateSpace
from autosched.te.dag import ComputeDAG
from autosched.workload import Workload

SMEM_BYTES = 227 * 1024
_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}


def op_class(dag: ComputeDAG) -> str:
    out = dag.outputs[0]
    if any(has_reuse(t.op) for t in dag.computes):
        return "gemm"
    if out.op.reduce_axis:
        return "reduce"
    if any(t.op.reduce_axis for t in dag.computes):
        return "rowwise"
    return "elementwise"


def _divides(n: int, choices) -> list[int]:
    return [c for c in choices if n % c == 0] or [1]


def _pow2_upto(n: int, choices) -> list[int]:
    return [c for c in choices if c <= max(n, min(choices))] or [min(choices)]


# ---- cuda --------------------------------------------------------------------------------------


def _cuda_gemm(dag: ComputeDAG):
    out = dag.outputs[0].op
    red = next(t.op for t in reversed(dag.computes) if t.op.reduce_axis)
    sp = [a.extent for a in out.axis]
    rk = [a.extent for a in red.reduce_axis]

    def tmpl(cfg, s, tensors) -> None:
        for d, n in enumerate(sp):
            # (virtual threads, threads, inner): a thread owns v register tiles of i, t*i apart
            trip = [(v, t, i) for v in (1, 2, 4) for t in (1, 2, 4, 8, 16, 32) for i in (1, 2, 4, 8)
                    if n % (v * t * i) == 0 and (v == 1 or i >= 2)]
            cfg.define_knob(f"tile{d}", trip or [(1, 1, 1)])
        for r, n in enumerate(rk):
            cfg.define_knob(f"rk{r}", sorted(set(_divides(n, (1, 2, 4, 8, 16, 32)) + ([n] if n <= 32 else []))))
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


def _triton_gemm(dag: ComputeDAG):
    out = dag.outputs[0].op
    red = next(t for t in reversed(dag.computes) if t.op.reduce_axis)
    m, n = out.axis[-2].extent, out.axis[-1].extent
    k = 1
    for a in red.op.reduce_axis:
        k *= a.extent
    nbytes = max(_BYTES.get(t.dtype, 4) for t in red.op.input_tensors())

    def tmpl(cfg, s, tensors) -> None:
        cfg.define_knob("bm", _pow2_upto(m, (32, 64, 128, 256)))
        cfg.define_knob("bn", _pow2_upto(n, (32, 64, 128, 256)))
        cfg.define_knob("bk", _pow2_upto(k, (16, 32, 64, 128)))
        cfg.define_knob("group_m", (1, 8))
        cfg.define_knob("num_warps", (4, 8))
        cfg.define_knob("num_stages", (2, 3, 4, 5))
        gt.triton_gemm(s, cfg["bm"], cfg["bn"], cfg["bk"], cfg["group_m"], cfg["num_warps"], cfg["num_stages"])

    def valid(v: dict) -> bool:
        smem = v["num_stages"] * (v["bm"] * v["bk"] + v["bk"] * v["bn"]) * nbytes
        acc_regs = v["bm"] * v["bn"] // (32 * v["num_warps"])
        return smem <= SMEM_BYTES and acc_regs <= 256

    return tmpl, valid


def _triton_rowwise(dag: ComputeDAG):
    n = dag.outputs[0].op.axis[-1].extent

    def tmpl(cfg, s, tensors) -> None:
        cfg.define_knob("rows", (1, 2, 4))
        cfg.define_knob("block_n", tuple(c for c in (0, 512, 1024, 2048) if c < n))
        cfg.define_knob("num_warps", (4, 8, 16))
        cfg.define_knob("welford", (0, 1))
        gt.triton_rowwise(s, cfg["rows"], cfg["block_n"] or None, cfg["num_warps"])
        if cfg["welford"]:
            welford(s)

    def valid(v: dict) -> bool:
        cols = v["block_n"] or n
        # welford only changes chunked kernels (block_n > 0): drop the duplicates of the others
        return v["rows"] * cols <= 16384 and not (v["welford"] and not v["block_n"])

    return tmpl, valid


def welford(s) -> None:
    """Pragma `welford` on the output's program loop: a chunked mean/variance pair is walked in one
    Welford pass, then the output pass (see codegen/triton_welford.py); other kernels ignore it."""
    out = s.dag.outputs[0].name
    stage = next(st for st in s.state.stages if st.name == out)
    loop = next(lname for lname, tag in stage.bindings.items() if tag == "blockIdx.x")
    s[out].pragma(loop, "welford", 1)


def _triton_elementwise(dag: ComputeDAG):
    def tmpl(cfg, s, tensors) -> None:
        cfg.define_knob("block", (512, 1024, 2048, 4096, 8192))
        cfg.define_knob("num_warps", (4, 8, 16))
        gt.triton_elementwise(s, cfg["block"], cfg["num_warps"])

    return tmpl, None


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


def gpu_space(workload: Workload, kind: str) -> TemplateSpace:
    """The search space of `workload` on GPU target `kind` ("cuda" or "triton")."""
    dag = workload.dag
    tmpl, valid = RULES[(kind, op_class(dag))](dag)
    space = TemplateSpace(dag, tmpl, workload.args_order)
    if valid is not None:
        cs = space.space

        def is_valid(config: Config) -> bool:
            return valid(cs.values(config))

        space.space = cs.with_validity(is_valid)
    return space
