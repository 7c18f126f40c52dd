"""GPU schedules with explicit parameters: the building blocks of the GPU search spaces, and
worked examples of the primitives on the cuda and triton targets.

`cuda_gemm` is the classic SIMT SGEMM generalized to any reduction with reuse: each spatial
axis is split into (block, thread, inner) levels, blocks and threads fused onto blockIdx.x and
threadIdx.x, the reduction accumulates into a register tile per thread (`cache_write` "local",
or the element-wise consumer's producer), and every re-used input is staged through shared
memory, BK reduction steps at a time, filled cooperatively by the whole block.
`triton_gemm` is the tile-level version Triton takes: program ids over (M, N) blocks in GROUP_M
order and `tl.dot` over BLOCK_K; `triton_rowwise` and `triton_elementwise` cover row reductions
(softmax, layernorm) and element-wise ops.
"""

from __future__ import annotations

from collections.abc import Sequence

from autosched.schedule.schedule import Schedule
from autosched.te.tensor import PlaceholderOp
from autosched.workload import Workload


def _out_and_red(s: Schedule) -> tuple[str, str]:
    out = s.dag.outputs[0].name
    red = next(t.name for t in reversed(s.dag.computes) if t.op.reduce_axis)
    return out, red


def cuda_gemm(s: Schedule, threads: Sequence[int], inner: Sequence[int], rk: Sequence[int],
              vthreads: Sequence[int] | None = None, vector_fetch: int = 1, smem_layout: int = 0,
              double_buffer: int = 0, group: int = 1) -> Schedule:
    """Multi-level tiling for the cuda target: `vthreads[d]` x `threads[d]` x `inner[d]` per block
    along spatial axis d, `rk[r]` reduction steps per shared-memory stage along reduce axis r.

    A thread owns vthreads[d] register tiles of inner[d] elements, `threads[d] * inner[d]` apart
    (virtual threads: conflict-free, 128-bit shared reads); `vector_fetch`, `smem_layout` and
    `double_buffer` are the pragmas of lower_gpu (fetch width, reduction-major / padded shared
    layout, shared stages double-buffered with a register prefetch of the next tile); `group` > 1
    orders the blocks in groups of `group` along the first axis (L2 reuse of the other operand)."""
    out, red = _out_and_red(s)
    local = s.cache_write(red, "local").name if red == out else red
    shared = []
    for t in s[local].op.input_tensors():
        if isinstance(t.op, PlaceholderOp) or t.op.reduce_axis == ():
            shared.append(s.cache_read(t.name, "shared", [local]).name)
            if not isinstance(t.op, PlaceholderOp):
                s[t.name].compute_inline()
    for t in s.dag.computes:
        st = s.state.stage(t.name)
        if t.name not in (out, red) and st.attach == ("root",) and not t.op.reduce_axis:
            s[t.name].compute_inline()
    axes = [a.name for a in s[out].op.axis]
    vthreads = list(vthreads) if vthreads is not None else [1] * len(axes)
    blocks, vth, thr, inn = [], [], [], []
    for ax, nv, nt, ni in zip(axes, vthreads, threads, inner):
        b, rest = s[out].split(ax, factor=nv * nt * ni)
        if nv > 1:
            v, rest = s[out].split(rest, factor=nt * ni)
            vth.append(v)
        t, i = s[out].split(rest, factor=ni)
        blocks.append(b)
        thr.append(t)
        inn.append(i)
    order = list(blocks)
    nb0 = -(-s[out].op.axis[0].extent // (vthreads[0] * threads[0] * inner[0]))
    if group > 1 and len(blocks) > 1 and nb0 % group == 0 and nb0 > group:
        go, gi = s[out].split(blocks[0], factor=group)
        order = [go, *blocks[1:], gi]
    s[out].reorder(*order, *vth, *thr, *inn)
    bx = s[out].fuse(*order) if len(order) > 1 else order[0]
    tx = s[out].fuse(*thr) if len(thr) > 1 else thr[0]
    s[out].bind(bx, "blockIdx.x")
    for v in vth:
        s[out].bind(v, "vthread")
    s[out].bind(tx, "threadIdx.x")
    for i in inn:
        s[out].unroll(i)
    s[local].compute_at(s[out], tx)
    lop = s[local].op
    r_out, r_in = [], []
    for ax, f in zip(lop.reduce_axis, rk):
        o, i = s[local].split(ax.name, factor=f)
        r_out.append(o)
        r_in.append(i)
    sp = [a.name for a in lop.axis]
    s[local].reorder(*r_out, *r_in, *sp)
    for x in r_in + sp:
        s[local].unroll(x)
    for name in shared:
        s[name].compute_at(s[local], r_out[0])  # one fill per step of the outermost reduction
        lp = s.state.stage(name).leaf_loops[0].name
        if vector_fetch > 1:
            s[name].pragma(lp, "vector_fetch", vector_fetch)
        if smem_layout:
            s[name].pragma(lp, "smem_layout", smem_layout)
    if double_buffer:
        s[local].pragma(r_out[0], "double_buffer", double_buffer)
    return s


def cuda_matmul(M: int, N: int, K: int, bm: int = 128, bn: int = 128, bk: int = 8, tm: int = 8, tn: int = 8,
                dtype: str = "float32", vthread: int = 1, **opts) -> tuple[Schedule, list]:
    """SGEMM for C = A @ B ([M, K] x [K, N]): (bm x bn) per block, (tm x tn) registers per thread
    (as `vthread` x `vthread` tiles of tm/vthread x tn/vthread with `vthread` > 1)."""
    w = Workload.create("matmul", M, N, K, dtype)
    v = vthread
    s = cuda_gemm(Schedule(w.dag), (bm // tm, bn // tn), (tm // v, tn // v), (bk,), (v, v), **opts)
    return s, w.tensors()


def cuda_elementwise(s: Schedule, threads: int = 256, per_thread: int = 4) -> Schedule:
    """All axes fused, `threads` per block, `per_thread` elements per thread (coalesced)."""
    out = s.dag.outputs[0].name
    for t in s.dag.computes:
        if t.name != out and not t.op.reduce_axis:
            s[t.name].compute_inline()
    axes = [a.name for a in s[out].op.axis]
    f = s[out].fuse(*axes) if len(axes) > 1 else axes[0]
    b, rest = s[out].split(f, factor=threads * per_thread)
    e, t = s[out].split(rest, factor=threads)
    s[out].bind(b, "blockIdx.x")
    s[out].bind(t, "threadIdx.x")
    s[out].unroll(e)
    return s


def cuda_rows(s: Schedule, threads: int = 128) -> Schedule:
    """Fallback for row reductions on cuda: one thread per output row (leading axes fused), its
    row reductions computed at that thread's loop. Correct for any such DAG, not fast."""
    out = s.dag.outputs[0].name
    for t in s.dag.computes:
        if t.name != out and not t.op.reduce_axis:
            s[t.name].compute_inline()
    axes = [a.name for a in s[out].op.axis]
    lead = axes[:-1] if len(axes) > 1 and not s[out].op.reduce_axis else axes
    f = s[out].fuse(*lead) if len(lead) > 1 else lead[0]
    b, t = s[out].split(f, factor=threads)
    s[out].bind(b, "blockIdx.x")
    s[out].bind(t, "threadIdx.x")
    for r in s.dag.computes:
        if r.name != out and r.op.reduce_axis:
            s[r.name].compute_at(s[out], t)
    return s


def triton_gemm(s: Schedule, bm: int = 128, bn: int = 128, bk: int = 64, group_m: int = 8, num_warps: int = 8,
                num_stages: int = 3) -> Schedule:
    """Any matmul-like DAG (matmul, batch_matmul, dense+bias+relu): the last two output axes are
    (M, N) tiles, leading axes are programs along blockIdx.y, the reduction is `tl.dot` over
    BLOCK_K, and an element-wise epilogue runs on the accumulator tile."""
    out, red = _out_and_red(s)
    for t in s.dag.computes:
        if t.name not in (out, red):
            s[t.name].compute_inline()
    axes = [a.name for a in s[out].op.axis]
    io, ii = s[out].split(axes[-2], factor=bm)
    jo, ji = s[out].split(axes[-1], factor=bn)
    s[out].reorder(*axes[:-2], io, jo, ii, ji)
    f = s[out].fuse(io, jo)
    s[out].bind(f, "blockIdx.x")
    if len(axes) > 2:
        b = s[out].fuse(*axes[:-2]) if len(axes) > 3 else axes[0]
        s[out].bind(b, "blockIdx.y")
    s[out].vectorize(ii)
    s[out].vectorize(ji)
    if red != out:
        s[red].compute_at(s[out], f)
    rax = [a.name for a in s[red].op.reduce_axis]
    k = s[red].fuse(*rax) if len(rax) > 1 else rax[0]
    s[red].split(k, factor=bk)
    s[out].pragma(f, "num_warps", num_warps)
    s[out].pragma(f, "num_stages", num_stages)
    if group_m > 1:
        s[out].pragma(f, "swizzle", group_m)
    return s


def triton_matmul(M: int, N: int, K: int, bm: int = 128, bn: int = 128, bk: int = 64, group_m: int = 8,
                  num_warps: int = 8, num_stages: int = 3, dtype: str = "bfloat16") -> tuple[Schedule, list]:
    """The Triton tutorial's matmul, as a schedule."""
    w = Workload.create("matmul", M, N, K, dtype)
    return triton_gemm(Schedule(w.dag), bm, bn, bk, group_m, num_warps, num_stages), w.tensors()


def triton_rowwise(s: Schedule, rows: int = 1, block_n: int | None = None, num_warps: int = 8) -> Schedule:
    """Row-wise fused kernel (softmax, layernorm): `rows` rows per program, the row reductions
    computed at the program's loop on the same tile (the row is loaded once). With `block_n`
    below the row length the row is walked in chunks (more passes, bounded registers)."""
    out = s.dag.outputs[0].name
    for t in s.dag.computes:
        if t.name != out and not t.op.reduce_axis:
            s[t.name].compute_inline()
    axes = [a.name for a in s[out].op.axis]
    io, ii = s[out].split(axes[0], factor=rows)
    s[out].bind(io, "blockIdx.x")
    s[out].vectorize(ii)
    n = s[out].op.axis[-1].extent
    chunked = block_n is not None and block_n < n
    if chunked:
        _, ji = s[out].split(axes[-1], factor=block_n)
        s[out].vectorize(ji)
    else:
        s[out].vectorize(axes[-1])
    for t in s.dag.computes:
        if t.name != out and t.op.reduce_axis:
            s[t.name].compute_at(s[out], io)
            if chunked:
                s[t.name].split(t.op.reduce_axis[0].name, factor=block_n)
    s[out].pragma(io, "num_warps", num_warps)
    return s


def triton_elementwise(s: Schedule, block: int = 1024, num_warps: int = 4) -> Schedule:
    """Element-wise kernel: all axes fused, `block` elements per program."""
    out = s.dag.outputs[0].name
    for t in s.dag.computes:
        if t.name != out:
            s[t.name].compute_inline()
    axes = [a.name for a in s[out].op.axis]
    f = s[out].fuse(*axes) if len(axes) > 1 else axes[0]
    o, i = s[out].split(f, factor=block)
    s[out].bind(o, "blockIdx.x")
    s[out].vectorize(i)
    s[out].pragma(o, "num_warps", num_warps)
    return s


def triton_reduce(s: Schedule, rows: int = 4, block_k: int = 1024, num_warps: int = 4) -> Schedule:
    """A reduction output without reuse (sum over axes): `rows` outputs per program, reduced in
    `block_k` chunks."""
    out = s.dag.outputs[0].name
    for t in s.dag.computes:
        if t.name != out:
            s[t.name].compute_inline()
    axes = [a.name for a in s[out].op.axis]
    f = s[out].fuse(*axes) if len(axes) > 1 else axes[0]
    o, i = s[out].split(f, factor=rows)
    s[out].bind(o, "blockIdx.x")
    s[out].vectorize(i)
    rax = [a.name for a in s[out].op.reduce_axis]
    k = s[out].fuse(*rax) if len(rax) > 1 else rax[0]
    s[out].split(k, factor=block_k)
    s[out].pragma(o, "num_warps", num_warps)
    return s
