"""IR passes of the GPU lowering that the schedule asks for with bindings and pragmas.

They are what a fast SIMT GEMM needs beyond tiling, each a general mechanism:

- `inject_vthreads`: a loop bound to `vthread` is a *virtual thread*: its iterations are
  independent like threads, so the loop is pushed inward past every statement (a shared fill, the
  reduction loop, the register tile's allocation) down to single statements, where it becomes an
  unrolled loop. Buffers it passes are expanded by its extent. A thread then owns several register
  tiles strided by `threads * inner` instead of one contiguous tile, so the threads of a warp read
  neighbouring shared-memory words (no bank conflicts) and the reads are 128-bit wide.
- `apply_smem_layouts`: the `smem_layout` pragma of a shared stage stores its dimensions indexed
  only by reduction loops first (A[m, k] tile stored as [k][m]: the reads of one k step are then
  contiguous in m), optionally padding the innermost dimension by 4 words so that the transposed
  fill does not hit one bank.
- `double_buffer`: the `double_buffer` pragma on the loop where shared stages are filled keeps two
  copies of each; iteration k reads copy k%2 while the next tile is loaded from global memory into
  registers (issued before the computation, stored after it), with one barrier per iteration.
"""

from __future__ import annotations

from autosched.lowering import arith
from autosched.lowering.ir import Allocate, Barrier, Buffer, For, IfThen, Load, Seq, Stmt, Store, seq
from autosched.lowering.visitors import fresh_vars, iter_expr, reindex, substitute_stmt, uses_var
from autosched.te.expr import Binary, Const, Expr, Var

# ---- expression and statement mapping --------------------------------------------------------


def _i(n: int) -> Const:
    return Const(n, "int32")


# ---- virtual threads -------------------------------------------------------------------------


def inject_vthreads(s: Stmt) -> Stmt:
    """Push every `vthread` loop inward to single statements (see the module docstring)."""
    if isinstance(s, Seq):
        return Seq([inject_vthreads(x) for x in s.stmts])
    if isinstance(s, For):
        body = inject_vthreads(s.body)
        if s.kind == "bound" and s.thread_tag == "vthread":
            n = arith.const_value(s.extent)
            if n is None:
                from autosched.schedule.state import ScheduleError

                raise ScheduleError(f"stage {s.stage!r}, loop {s.loop_name!r}: a vthread loop needs a constant "
                                    "extent (split evenly)")
            return _push(s.var, n, body, s, _dependent_buffers(body, s.var))
        return For(s.var, s.extent, s.kind, body, s.loop_name, s.stage, s.unroll, s.thread_tag)
    if isinstance(s, IfThen):
        return IfThen(s.cond, inject_vthreads(s.body))
    if isinstance(s, Allocate):
        return Allocate(s.buffer, inject_vthreads(s.body))
    return s


def _stores(s: Stmt):
    stack = [s]
    while stack:
        x = stack.pop()
        if isinstance(x, Store):
            yield x
        stack.extend(getattr(x, "stmts", []))
        if hasattr(x, "body"):
            stack.append(x.body)


def _store_uses(st: Store, v: Var, dep: set[int]) -> bool:
    """Whether the store depends on v: through its expressions or a buffer whose contents do."""
    if id(st.buffer) in dep:
        return True
    for e in (*st.indices, st.value):
        for x in iter_expr(e):
            if x is v or (isinstance(x, Load) and id(x.buffer) in dep):
                return True
    return False


def _dependent_buffers(s: Stmt, v: Var) -> set[int]:
    """Buffers whose contents depend on v (stored with v, or from such a buffer), to a fixed point."""
    dep: set[int] = set()
    stores = list(_stores(s))
    while True:
        new = {id(st.buffer) for st in stores if _store_uses(st, v, dep)}
        if new <= dep:
            return dep
        dep |= new


def _rmw(st: Store) -> bool:
    return any(isinstance(x, Load) and x.buffer is st.buffer for x in iter_expr(st.value))


def _push(v: Var, n: int, s: Stmt, orig: For, dep: set[int]) -> Stmt:
    """`for v in range(n): s` with the loop moved inward. A statement that does not depend on v (a
    shared fill of a tile every virtual thread reads) runs once, and a buffer is expanded by n only
    when what is stored in it depends on v."""
    if isinstance(s, Seq):
        return Seq([_push(v, n, x, orig, dep) for x in s.stmts])
    if isinstance(s, For) and s.kind != "vectorized" and not uses_var(s.extent, v):
        return For(s.var, s.extent, s.kind, _push(v, n, s.body, orig, dep), s.loop_name, s.stage, s.unroll,
                   s.thread_tag)
    if isinstance(s, IfThen) and not uses_var(s.cond, v):
        return IfThen(s.cond, _push(v, n, s.body, orig, dep))
    if isinstance(s, Allocate):
        b = s.buffer
        body = s.body
        if id(b) in dep:
            b.shape = (n,) + tuple(b.shape)
            body = reindex(body, b, lambda idx: (v,) + tuple(idx))
        return Allocate(b, _push(v, n, body, orig, dep))
    if not any(_store_uses(st, v, dep) or _rmw(st) for st in _stores(s)):
        return s  # the same values to the same places: once is enough
    return For(v, _i(n), "unrolled", s, orig.loop_name, orig.stage, n, "")


# ---- shared-memory layout --------------------------------------------------------------------


def apply_smem_layout(s: Stmt, buf: Buffer, perm: list[int], pad: int) -> Stmt:
    """Store `buf`'s dimension perm[0] outermost, ... and pad the innermost stored one by `pad`."""
    shape = [buf.shape[d] for d in perm]
    if pad:
        shape[-1] += pad
    buf.shape = tuple(shape)
    return reindex(s, buf, lambda idx: tuple(idx[d] for d in perm))


# ---- double buffering ------------------------------------------------------------------------


def _is_barrier(s: Stmt) -> bool:
    return isinstance(s, Barrier)


def _writes(s: Stmt) -> set[int]:
    out: set[int] = set()
    stack = [s]
    while stack:
        x = stack.pop()
        if isinstance(x, Store):
            out.add(id(x.buffer))
        stack.extend(getattr(x, "stmts", []))
        if hasattr(x, "body"):
            stack.append(x.body)
    return out


def _split_fill(s: Stmt, reg: Buffer, counter: list[int], loops: list[tuple[Var, int]],
                sel: Expr, per_thread: bool = True) -> tuple[Stmt, Stmt]:
    """(load part, store part) of a shared fill nest: global values go to registers `reg` first."""
    if isinstance(s, Seq):
        parts = [_split_fill(x, reg, counter, loops, sel, per_thread) for x in s.stmts]
        return Seq([p[0] for p in parts]), Seq([p[1] for p in parts])
    if isinstance(s, For):
        n = arith.const_value(s.extent)
        if s.kind == "bound" and per_thread:
            a, b = _split_fill(s.body, reg, counter, loops, sel, per_thread)
        else:
            if n is None:
                raise _NoPipeline
            a, b = _split_fill(s.body, reg, counter, loops + [(s.var, n)], sel, per_thread)
        return (For(s.var, s.extent, s.kind, a, s.loop_name, s.stage, s.unroll, s.thread_tag),
                For(s.var, s.extent, s.kind, b, s.loop_name, s.stage, s.unroll, s.thread_tag))
    if isinstance(s, IfThen):
        a, b = _split_fill(s.body, reg, counter, loops, sel, per_thread)
        return IfThen(s.cond, a), IfThen(s.cond, b)
    if isinstance(s, Store) and s.buffer.scope == "shared":
        flat: Expr = _i(counter[0])
        size = 1
        for var, n in reversed(loops):
            flat = Binary("add", flat, Binary("mul", var, _i(size), "int32"), "int32")
            size *= n
        counter[0] += size
        idx = (arith.simplify(flat),)
        return Store(reg, idx, s.value), Store(s.buffer, (sel,) + tuple(s.indices), Load(reg, idx))
    raise _NoPipeline


class _NoPipeline(Exception):
    pass


def double_buffer(s: Stmt, loops: dict[tuple[str, str], int], shared: list[Buffer], per_thread: bool = True) -> Stmt:
    """Pipeline the loops named (stage, loop) in `loops` whose body is `fill; barrier; compute; barrier`.
    `per_thread=False` sizes the register stage for all threads (CPU emulation: thread loops are loops)."""
    if isinstance(s, Seq):
        return Seq([double_buffer(x, loops, shared, per_thread) for x in s.stmts])
    if isinstance(s, IfThen):
        return IfThen(s.cond, double_buffer(s.body, loops, shared, per_thread))
    if isinstance(s, Allocate):
        return Allocate(s.buffer, double_buffer(s.body, loops, shared, per_thread))
    if not isinstance(s, For):
        return s
    body = double_buffer(s.body, loops, shared, per_thread)
    here = For(s.var, s.extent, s.kind, body, s.loop_name, s.stage, s.unroll, s.thread_tag)
    if (s.stage, s.loop_name) not in loops:
        return here
    n = arith.const_value(s.extent)
    stmts = body.stmts if isinstance(body, Seq) else [body]
    bars = [k for k, x in enumerate(stmts) if _is_barrier(x)]
    if n is None or n < 2 or len(bars) != 2 or bars[1] != len(stmts) - 1:
        return here
    fill, compute = stmts[:bars[0]], stmts[bars[0] + 1:bars[1]]
    bufs = [b for b in shared if any(id(b) in _writes(x) for x in fill)]
    if not bufs or any(_writes(x) & {id(b) for b in bufs} for x in compute):
        return here
    k = s.var
    cur = Binary("mod", k, _i(2), "int32")
    nxt = Binary("mod", Binary("add", k, _i(1), "int32"), _i(2), "int32")
    fill_stmt = seq(fill)
    k_next = Binary("add", k, _i(1), "int32")
    try:
        counter = [0]
        dtype = bufs[0].dtype
        if any(b.dtype != dtype for b in bufs):
            return here
        reg = Buffer(f"{bufs[0].name}_prefetch", (1,), dtype, "local", bufs[0].stage)
        nxt_fill = substitute_stmt(fresh_vars(fill_stmt), {k: k_next})
        load_part, store_part = _split_fill(nxt_fill, reg, counter, [], nxt, per_thread)
    except _NoPipeline:
        return here
    reg.shape = (counter[0],)
    for b in bufs:
        b.shape = (2,) + tuple(b.shape)
    sel_cur = lambda idx: (cur,) + tuple(idx)  # noqa: E731
    compute_stmt = seq(compute)
    prologue = substitute_stmt(fill_stmt, {k: _i(0)})
    for b in bufs:
        compute_stmt = reindex(compute_stmt, b, sel_cur)
        prologue = reindex(prologue, b, lambda idx: (_i(0),) + tuple(idx))
    has_next = Binary("lt", k_next, _i(n), "bool")
    load_next = IfThen(has_next, load_part)
    store_next = IfThen(has_next, store_part)
    loop_body = Allocate(reg, seq([load_next, compute_stmt, store_next, Barrier()]))
    # double_buffer=2: unrolled by two, the copy index k%2 is a constant in each half
    unroll = 2 if s.kind == "serial" and loops[(s.stage, s.loop_name)] >= 2 else s.unroll
    loop = For(k, s.extent, s.kind, loop_body, s.loop_name, s.stage, unroll, s.thread_tag)
    return seq([prologue, Barrier(), loop])
