"""GPU lowering: a schedule with thread bindings becomes one kernel with a launch shape.

The generic `Lowerer` already emits bound loops as `For(kind="bound", thread_tag=...)`; this
module adds what only a GPU needs, in order:

1. *cooperative fetch*: a `shared` stage whose loops the schedule left unbound is fused and
   split over the block's threads (extra steps replayed on a copy of the schedule, so the user's
   schedule is untouched and the record stays the user's steps);
2. *bounds*: a `shared` stage is filled by the whole block, so the consumer's threadIdx loops are
   relaxed when its region is inferred (`fixed_loop_vars`); registers (`local`) stay per thread;
3. *launch shape*: grid and block from the bound extents (the largest per tag; smaller ones get a
   guard), checked against the device limits with a ScheduleError naming stage and loop;
4. *shared memory*: shared buffers are hoisted out of the nest into one dynamic allocation;
5. *barriers*: `__syncthreads()` where a shared buffer is read after a write (and at the end of a
   loop body that refills it), never under a thread-dependent condition.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from autosched.dtypes import dtype_bytes
from autosched.lowering import arith
from autosched.lowering import gpu_passes as passes
from autosched.lowering.ir import Allocate, Barrier, Buffer, For, IfThen, Load, LoweredFunc, Seq, Stmt, Store, seq
from autosched.lowering.loop_nest import Lowerer
from autosched.schedule.schedule import Schedule
from autosched.schedule.state import ScheduleError, Stage
from autosched.schedule.steps import PragmaStep
from autosched.target.gpu import H200, GpuLimits
from autosched.te.expr import Binary, IterVar, TensorRead, Var, walk
from autosched.te.tensor import Tensor

BLOCK_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
THREAD_TAGS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")




@dataclass
class GpuFunc:
    """A lowered kernel with its launch shape and its hoisted shared-memory buffers."""

    func: LoweredFunc
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared: list[tuple[Buffer, int]] = field(default_factory=list)  # (buffer, byte offset)
    shared_bytes: int = 0

    @property
    def threads(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]


class GpuLowerer(Lowerer):
    """Lowerer whose shared stages are sized for the whole thread block."""

    def fixed_loop_vars(self, st: Stage) -> set[int]:
        fixed = super().fixed_loop_vars(st)
        if st.scope != "shared":
            return fixed
        for sname, lp in self.enclosing(st.name):
            if self.stages[sname].bindings.get(lp.name, "").startswith("threadIdx"):
                fixed.discard(id(lp.var))
        return fixed

    def buffer_of(self, name: str) -> Buffer:
        buf = super().buffer_of(name)
        st = self.stages[name]
        if st.scope == "shared" and buf.scope == "local":
            buf.scope = "shared"
        elif st.scope == "shared" and buf.scope != "shared":
            raise ScheduleError(f"stage {name!r} is a shared-memory cache computed at root; compute it at a "
                                "block-level loop of its reader (compute_at) so one block fills it")
        return buf


# ---- 1. cooperative fetch -------------------------------------------------------------------


def block_threads(sched, args: Sequence[Tensor]) -> dict[str, int]:
    """threadIdx extents per tag, read off the root stages' bindings."""
    low = Lowerer(sched.state, list(args), "cuda", "probe")
    out: dict[str, int] = {}
    for st in sched.state.stages:
        if st.is_placeholder or st.attach == ("inline",):
            continue
        for lname, tag in st.bindings.items():
            if tag in THREAD_TAGS and st.attach == ("root",):
                ext = low.info_of(st.name).derived.extents[lname]
                out[tag] = max(out.get(tag, 1), ext)
    return out


FETCH_PRAGMAS = ("vector_fetch", "smem_layout")


def fetch_pragmas(sched) -> dict[str, dict[str, int]]:
    """{shared stage: {pragma: value}} for the pragmas that shape a cooperative fetch."""
    out: dict[str, dict[str, int]] = {}
    for st in sched.state.stages:
        for key, value in st.pragmas.items():
            name = key.split("@", 1)[0]
            if name in FETCH_PRAGMAS:
                out.setdefault(st.name, {})[name] = value
    return out


def add_cooperative_fetch(sched, args: Sequence[Tensor]):
    """A copy of `sched` where every unbound shared stage is spread over the block's threads; with a
    `vector_fetch` pragma of width w its innermost loop is split by w and vectorized first (each thread
    then moves w contiguous elements: one 128-bit access for w=4 float32 when aligned)."""
    todo = [st for st in sched.state.stages if st.scope == "shared" and st.attach[0] == "at"
            and not st.bindings and not st.annotations and not st.is_placeholder]
    if not todo:
        return sched
    threads = block_threads(sched, args)
    if not threads:
        return sched
    prag = fetch_pragmas(sched)
    names = {st.name for st in todo}
    s = Schedule(sched.dag, [x for x in sched.steps
                             if not (isinstance(x, PragmaStep) and x.stage in names and x.key in FETCH_PRAGMAS)])
    probe = GpuLowerer(s.state, list(args), "cuda", "probe") if prag else None
    for st in todo:
        h = s[st.name]
        leaves = [lp.name for lp in s.state.stage(st.name).leaf_loops if lp.kind == "spatial"]
        width = prag.get(st.name, {}).get("vector_fetch", 1)
        vec = None
        if width > 1 and probe is not None:
            ext = probe.info_of(st.name).derived.extents[leaves[-1]]
            if ext % width == 0 and ext > width:
                leaves[-1], vec = h.split(leaves[-1], factor=width)
        f = h.fuse(*leaves) if len(leaves) > 1 else leaves[0]
        total = threads.get("threadIdx.x", 1) * threads.get("threadIdx.y", 1) * threads.get("threadIdx.z", 1)
        outer, inner = h.split(f, factor=total)
        for tag in ("threadIdx.z", "threadIdx.y"):
            n = threads.get(tag, 1)
            if n > 1:
                total //= n
                hi, inner = h.split(inner, factor=total)
                h.bind(hi, tag)
        h.bind(inner, "threadIdx.x")
        h.unroll(outer)
        if vec is not None:
            h.vectorize(vec)
    return s


def smem_layouts(low: Lowerer, prag: dict[str, dict[str, int]]) -> list[tuple[Buffer, list[int], int]]:
    """(buffer, stored dimension order, pad) of the shared stages with an `smem_layout` pragma:
    1 stores the dimensions that the readers index by reduction axes only first, 2 also pads the
    innermost stored dimension by 4 elements (one 16-byte access) against bank conflicts."""
    out = []
    for name, p in prag.items():
        mode = p.get("smem_layout", 0)
        info = low.info.get(name)
        if not mode or info is None or info.buffer is None:
            continue
        ndim = len(info.buffer.shape)
        red_only = [True] * ndim
        for q in low.readers(name):
            raxes = {id(a) for a in q.op.reduce_axis}
            for node in walk(low.body_of(q)):
                if isinstance(node, TensorRead) and node.tensor.name == name:
                    for d, ie in enumerate(node.indices):
                        ivs = [n for n in walk(ie) if isinstance(n, IterVar)]
                        if not ivs or any(id(n) not in raxes for n in ivs):
                            red_only[d] = False
        perm = [d for d in range(ndim) if red_only[d]] + [d for d in range(ndim) if not red_only[d]]
        out.append((info.buffer, perm, 4 if mode >= 2 else 0))
    return out


# ---- 3-5. launch shape, shared memory, barriers ----------------------------------------------


def _const_extent(f: For, where: str, outer: Sequence[For] = ()) -> int:
    """The launch extent of a bound loop: its extent, or the bound of a tail-clipped one."""
    n = arith.const_value(f.extent)
    if n is None:
        ranges = {}
        for o in outer:
            c = arith.const_value(o.extent)
            if c is not None:
                ranges[id(o.var)] = c
        rng = arith.numeric_range(f.extent, ranges)
        if rng is None:
            raise ScheduleError(f"{where}: bound loop has a non-constant extent; split it evenly")
        n = rng[1]
    return max(int(n), 1)


class _Finisher:
    def __init__(self, limits: GpuLimits) -> None:
        self.limits = limits
        self.extents: dict[str, int] = {}
        self.shared: list[Buffer] = []

    # pass A: launch extents and nesting rules
    def scan(self, s: Stmt, outer: list[For]) -> None:
        if isinstance(s, Seq):
            for x in s.stmts:
                self.scan(x, outer)
        elif isinstance(s, For):
            where = f"stage {s.stage!r}, loop {s.loop_name!r}"
            if s.kind == "parallel":
                raise ScheduleError(f"{where}: 'parallel' is a CPU annotation; on a GPU bind the loop to "
                                    "blockIdx/threadIdx instead")
            if s.kind == "bound" and s.thread_tag in BLOCK_TAGS + THREAD_TAGS:
                n = _const_extent(s, where, outer)
                if s.thread_tag in BLOCK_TAGS and any(o.kind != "bound" or o.thread_tag not in BLOCK_TAGS
                                                      for o in outer):
                    raise ScheduleError(f"{where}: bound to {s.thread_tag} inside a loop that is not a blockIdx "
                                        "loop; block indices must be the outermost loops of the kernel")
                if any(o.kind == "bound" and o.thread_tag == s.thread_tag and o.stage == s.stage for o in outer):
                    raise ScheduleError(f"{where}: {s.thread_tag} is bound twice in one loop nest")
                self.extents[s.thread_tag] = max(self.extents.get(s.thread_tag, 1), n)
            self.scan(s.body, outer + [s])
        elif isinstance(s, IfThen):
            self.scan(s.body, outer)
        elif isinstance(s, Allocate):
            if s.buffer.scope == "global":
                raise ScheduleError(f"stage {s.buffer.stage!r} is computed at root but is not a kernel "
                                    "argument: on a GPU one schedule is one kernel, so inline it or compute "
                                    "it at a loop of its reader")
            self.scan(s.body, outer)

    def shape(self) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        grid = tuple(self.extents.get(t, 1) for t in BLOCK_TAGS)
        block = tuple(self.extents.get(t, 1) for t in THREAD_TAGS)
        lim = self.limits
        threads = block[0] * block[1] * block[2]
        if threads > lim.max_threads_per_block:
            raise ScheduleError(f"block of {block[0]}x{block[1]}x{block[2]} = {threads} threads exceeds the "
                                f"{lim.max_threads_per_block} threads per block of {lim.name}")
        for tags, dims, mx in ((THREAD_TAGS, block, lim.max_block), (BLOCK_TAGS, grid, lim.max_grid)):
            for t, n, m in zip(tags, dims, mx):
                if n > m:
                    raise ScheduleError(f"{t} extent {n} exceeds the limit {m} of {lim.name}")
        return grid, block  # type: ignore[return-value]

    # pass B: guards for short bound loops, hoisting shared buffers, local-size check
    def rewrite(self, s: Stmt) -> Stmt:
        if isinstance(s, Seq):
            return seq([self.rewrite(x) for x in s.stmts])
        if isinstance(s, For):
            body = self.rewrite(s.body)
            if s.kind == "bound" and s.thread_tag in self.extents:
                n = arith.const_value(s.extent)
                if n is None or n < self.extents[s.thread_tag]:
                    body = IfThen(Binary("lt", s.var, s.extent, "bool"), body)
            return For(s.var, s.extent, s.kind, body, s.loop_name, s.stage, s.unroll, s.thread_tag)
        if isinstance(s, IfThen):
            return IfThen(s.cond, self.rewrite(s.body))
        if isinstance(s, Allocate):
            b = s.buffer
            if b.scope == "shared":
                self.shared.append(b)
                return self.rewrite(s.body)
            nbytes = b.size * dtype_bytes(b.dtype)
            if nbytes > self.limits.max_local_bytes:
                raise ScheduleError(f"stage {b.stage!r}: register tile of {nbytes} bytes per thread exceeds "
                                    f"{self.limits.max_local_bytes}; use smaller inner tiles")
            return Allocate(b, self.rewrite(s.body))
        return s


def _shared_access(s: Stmt) -> tuple[set[int], set[int]]:
    """(read, written) shared buffers anywhere in `s`, by id."""
    reads: set[int] = set()
    writes: set[int] = set()
    stack = [s]
    while stack:
        x = stack.pop()
        if isinstance(x, Seq):
            stack.extend(x.stmts)
        elif isinstance(x, For | Allocate):
            stack.append(x.body)
        elif isinstance(x, IfThen):
            _loads(x.cond, reads)
            stack.append(x.body)
        elif isinstance(x, Store):
            if x.buffer.scope == "shared":
                writes.add(id(x.buffer))
            _loads(x.value, reads)
            for i in x.indices:
                _loads(i, reads)
    return reads, writes


def _loads(e, out: set[int]) -> None:
    for n in walk(e):
        if isinstance(n, Load) and n.buffer.scope == "shared":
            out.add(id(n.buffer))


def _has_barrier(s: Stmt) -> bool:
    if isinstance(s, Barrier):
        return True
    if isinstance(s, Seq):
        return any(_has_barrier(x) for x in s.stmts)
    return hasattr(s, "body") and _has_barrier(s.body)


def insert_barriers(s: Stmt, thread_vars: set[int]) -> Stmt:
    """Barriers between a shared write and a later read (RAW) or a read and a later write (WAR)."""
    if isinstance(s, Seq):
        out: list[Stmt] = []
        pend_r: set[int] = set()
        pend_w: set[int] = set()
        for x in s.stmts:
            x = insert_barriers(x, thread_vars)
            r, w = _shared_access(x)
            if (r & pend_w) or (w & pend_r) or (w & pend_w):
                out.append(Barrier())
                pend_r, pend_w = set(), set()
            out.append(x)
            pend_r |= r
            pend_w |= w
        return Seq(out)
    if isinstance(s, For):
        body = insert_barriers(s.body, thread_vars)
        r, w = _shared_access(body)
        if w and (r & w) and s.kind != "bound":  # next iteration refills what this one still reads
            body = seq([body, Barrier()])
        return For(s.var, s.extent, s.kind, body, s.loop_name, s.stage, s.unroll, s.thread_tag)
    if isinstance(s, IfThen):
        body = insert_barriers(s.body, thread_vars)
        if _has_barrier(body) and any(isinstance(n, Var) and id(n) in thread_vars for n in walk(s.cond)):
            raise ScheduleError("a shared-memory stage is synchronized under a thread-dependent condition "
                                "(an uneven split of a threadIdx loop around it); split the thread loops evenly")
        return IfThen(s.cond, body)
    if isinstance(s, Allocate):
        return Allocate(s.buffer, insert_barriers(s.body, thread_vars))
    return s


def _thread_vars(s: Stmt, out: set[int]) -> set[int]:
    if isinstance(s, Seq):
        for x in s.stmts:
            _thread_vars(x, out)
    elif hasattr(s, "body"):
        if isinstance(s, For) and s.kind == "bound" and s.thread_tag in THREAD_TAGS:
            out.add(id(s.var))
        _thread_vars(s.body, out)
    return out


def finish_gpu(func: LoweredFunc, limits: GpuLimits = H200,
               pipelined: dict[tuple[str, str], int] | None = None, emulate: bool = False) -> GpuFunc:
    """Launch shape, guards, hoisted shared memory and barriers for a lowered kernel; the loops named
    (stage, loop) in `pipelined` get double-buffered shared stages (value 2: the loop unrolled by two)."""
    fin = _Finisher(limits)
    fin.scan(func.body, [])
    grid, block = fin.shape()
    body = fin.rewrite(func.body)
    body = insert_barriers(body, _thread_vars(body, set()))
    if pipelined:
        body = passes.double_buffer(body, pipelined, fin.shared, per_thread=not emulate)
    offsets, off = [], 0
    for b in fin.shared:
        off = -(-off // 16) * 16
        offsets.append((b, off))
        off += b.size * dtype_bytes(b.dtype)
    if off > limits.max_shared_bytes:
        names = ", ".join(f"{b.name} ({b.size * dtype_bytes(b.dtype)} B)" for b in fin.shared)
        raise ScheduleError(f"shared memory of {off} bytes per block ({names}) exceeds the "
                            f"{limits.max_shared_bytes} bytes of {limits.name}; use smaller tiles")
    for b in func.params:
        if b.size >= 2 ** 31:
            raise ScheduleError(f"tensor {b.name!r} has {b.size} elements: 32-bit indexing overflows")
    out = LoweredFunc(func.name, func.params, body, func.uses_math)
    return GpuFunc(out, grid, block, offsets, off)


def lower_gpu(sched, args: Sequence[Tensor], name: str = "default_function",
              limits: GpuLimits = H200, emulate: bool = False) -> GpuFunc:
    """Lower a schedule for a CUDA GPU: one kernel, its launch shape and its shared memory.
    `emulate` keeps the nest runnable with thread loops as plain loops (tests on the CPU)."""
    roots = [st.name for st in sched.state.stages if not st.is_placeholder and st.attach == ("root",)]
    if len(roots) > 1:
        raise ScheduleError(f"stages {roots} are all computed at root; on a GPU one schedule is one kernel, "
                            "so inline all but the output or compute them at a loop of their reader")
    prag = fetch_pragmas(sched)
    sched = add_cooperative_fetch(sched, args)
    low = GpuLowerer(sched.state, list(args), "cuda", name)
    func = low.run()
    body = func.body
    for buf, perm, pad in smem_layouts(low, prag):
        body = passes.apply_smem_layout(body, buf, perm, pad)
    body = passes.inject_vthreads(body)
    func = LoweredFunc(func.name, func.params, body, func.uses_math)
    pipelined = {(st.name, key.split("@", 1)[1]): v for st in sched.state.stages
                 for key, v in st.pragmas.items() if key.startswith("double_buffer@") and v}
    return finish_gpu(func, limits, pipelined, emulate)
