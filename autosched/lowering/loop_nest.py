"""Lowering: a schedule state becomes a loop-nest IR function.

Order of work: resolve the attach tree; expand inlined stages into their readers; infer the region
of every stage computed at another stage's loop (the union of what its consumers read there, with
the loops inside the attach point relaxed); derive loop extents and tail guards; then emit each
stage's nest, placing reduction initialisation just outside the outermost reduction loop.
"""

from __future__ import annotations

from collections.abc import Sequence

from autosched.lowering import arith
from autosched.lowering.ir import Allocate, Buffer, For, IfThen, Load, LoweredFunc, Stmt, Store, seq
from autosched.lowering.loop_partition import partition_loops
from autosched.lowering.loop_passes import apply_pragmas, check_parallel_nesting, walk_stmts
from autosched.lowering.select_partition import partition_selects
from autosched.lowering.stage_info import (
    StageInfo,
    c_identifier,
    combine_reduction,
    conjunction,
    lift_reduction_guards,
    vector_last_order,
)
from autosched.schedule.bounds import derive
from autosched.schedule.state import Loop, ScheduleError, Stage, State
from autosched.target.vector import lanes
from autosched.te.expr import (
    Binary,
    Const,
    Expr,
    IterVar,
    Reduce,
    TensorRead,
    Var,
    check_name,
    substitute,
    transform,
    walk,
)
from autosched.te.tensor import ComputeOp, Tensor

_KIND = {"parallel": "parallel", "vectorize": "vectorized", "unroll": "unrolled"}


class Lowerer:
    def __init__(self, state: State, args: Sequence[Tensor], target_kind: str, name: str) -> None:
        self.state = state
        self.target_kind = target_kind
        try:
            self.name = check_name(name, "kernel name")
        except ValueError as exc:
            raise ScheduleError(str(exc)) from None
        self.stages = {st.name: st for st in state.stages}
        self.order = [st.name for st in state.stages]
        self.args = self._check_args(args)
        self.info: dict[str, StageInfo] = {}
        self._busy: set[str] = set()
        self.children: dict[tuple[str, str], list[str]] = {}
        self._check_attach()

    # ---- validation ---------------------------------------------------------------------------
    def _check_args(self, args: Sequence[Tensor]) -> list[str]:
        names = []
        for t in args:
            if not isinstance(t, Tensor):
                raise ScheduleError(f"build arguments must be tensors, got {type(t).__name__}")
            if t.name not in self.stages:
                raise ScheduleError(f"argument {t.name!r} is not a tensor of this schedule's DAG")
            if t.name in names:
                raise ScheduleError(f"argument {t.name!r} appears twice")
            st = self.stages[t.name]
            if st.attach != ("root",):
                how = "inlined" if st.attach[0] == "inline" else "computed at another stage"
                raise ScheduleError(f"argument {t.name!r} is {how}; kernel arguments must be computed at root")
            names.append(t.name)
        for st in self.state.stages:
            if st.is_output and st.name not in names:
                raise ScheduleError(f"output {st.name!r} is not in the argument list {names}")
        return names

    def _check_attach(self) -> None:
        for st in self.state.stages:
            if st.bindings and self.target_kind == "cpu":
                loop, tag = next(iter(st.bindings.items()))
                raise ScheduleError(f"stage {st.name!r}, loop {loop!r}: bind to {tag!r} is not supported on "
                                    "target cpu (thread binding is for GPU targets; use parallel)")
            if st.attach[0] == "at":
                _, tname, lname = st.attach
                if tname not in self.stages:
                    raise ScheduleError(f"compute_at: stage {st.name!r} is computed at loop {lname!r} of unknown stage "
                                        f"{tname!r}")
                target = self.stages[tname]
                if target.attach == ("inline",):
                    raise ScheduleError(f"compute_at: stage {st.name!r} is computed at {tname!r} loop {lname!r}, but "
                                        f"{tname!r} is inlined")
                if lname not in [lp.name for lp in target.leaf_loops]:
                    raise ScheduleError(f"compute_at: stage {st.name!r} is computed at loop {lname!r} of {tname!r}, "
                                        f"which is no longer a loop of it (split/fused later?); loops: "
                                        f"{[lp.name for lp in target.leaf_loops]}")
                self.children.setdefault((tname, lname), []).append(st.name)
        for st in self.state.stages:  # cycles in the attach tree
            seen, cur = set(), st
            while cur.attach[0] == "at":
                if cur.name in seen:
                    raise ScheduleError(f"compute_at forms a cycle through stage {st.name!r} (computed at "
                                        f"{st.attach[1]!r} loop {st.attach[2]!r})")
                seen.add(cur.name)
                cur = self.stages[cur.attach[1]]

    # ---- attach chains ------------------------------------------------------------------------
    def enclosing(self, name: str) -> list[tuple[str, Loop]]:
        """Loops (stage, loop) around the point where stage `name`'s nest is emitted, outermost first."""
        st = self.stages[name]
        if st.attach[0] != "at":
            return []
        tname, lname = st.attach[1], st.attach[2]
        target = self.stages[tname]
        k = [lp.name for lp in target.leaf_loops].index(lname)
        return self.enclosing(tname) + [(tname, lp) for lp in target.leaf_loops[: k + 1]]

    # ---- inlining -----------------------------------------------------------------------------
    def expand(self, e: Expr) -> Expr:
        """Replace reads of inlined stages by their bodies."""

        def fn(x: Expr) -> Expr | None:
            if isinstance(x, TensorRead):
                st = self.stages.get(x.tensor.name)
                if st is not None and st.attach == ("inline",):
                    op = st.op
                    return self.expand(substitute(op.body, dict(zip(op.axis, x.indices))))
            return None

        return transform(e, fn)

    def body_of(self, st: Stage) -> Expr:
        body = st.op.body
        return self.expand(body.source if isinstance(body, Reduce) else body)

    def readers(self, name: str) -> list[Stage]:
        out = []
        for st in self.state.stages:
            if st.is_placeholder or st.attach == ("inline",):
                continue
            if any(isinstance(n, TensorRead) and n.tensor.name == name for n in walk(self.body_of(st))):
                out.append(st)
        return out

    # ---- bounds -------------------------------------------------------------------------------
    def info_of(self, name: str) -> StageInfo:
        if name in self.info:
            return self.info[name]
        if name in self._busy:
            raise ScheduleError(f"compute_at: cannot infer the bounds of stage {name!r}: its placement at "
                                f"{self.stages[name].attach[1:]!r} (stage, loop) depends on itself")
        self._busy.add(name)
        st = self.stages[name]
        shape = list(st.op.shape)
        if st.attach[0] == "at":
            mins, exts = self._infer_region(st, shape)
        else:
            mins, exts = [Const(0, "int32") for _ in shape], shape
        roots = {lp.name: e for lp, e in zip(st.root_loops, exts)}
        for lp, ax in zip(st.root_loops[len(shape):], st.op.reduce_axis):
            roots[lp.name] = ax.extent
        inf = StageInfo(st, mins, list(exts), derive(st, roots), local=st.attach[0] == "at")
        if inf.local and self.target_kind == "cpu":
            inf.order = vector_last_order(st, inf.derived)
        self.info[name] = inf
        self._busy.discard(name)
        return inf

    def coords(self, inf: StageInfo) -> dict[IterVar, Expr]:
        """The op's axes as expressions of the stage's loops (global tensor coordinates)."""
        st, op = inf.stage, inf.stage.op
        out: dict[IterVar, Expr] = {}
        for d, (ax, lp) in enumerate(zip(op.axis, st.root_loops)):
            out[ax] = arith.simplify(Binary("add", inf.region_min[d], inf.derived.exprs[lp.name], "int32"))
        for ax, lp in zip(op.reduce_axis, st.root_loops[len(op.axis):]):
            out[ax] = inf.derived.exprs[lp.name]
        return out

    def _infer_region(self, st: Stage, shape: list[int]) -> tuple[list[Expr], list[int]]:
        tname, lname = st.attach[1], st.attach[2]
        fixed = self.fixed_loop_vars(st)
        relaxed: dict[int, int] = {}
        los: list[list[Expr]] = [[] for _ in shape]
        his: list[list[Expr]] = [[] for _ in shape]
        readers = self.readers(st.name)
        if not readers:
            raise ScheduleError(f"compute_at: stage {st.name!r} is computed at {tname!r} loop {lname!r} but nothing "
                                "reads it")
        for q in readers:
            self._check_inside(st, q, tname, lname)
            qi = self.info_of(q.name)
            for chain_st, lp in [(q.name, x) for x in q.leaf_loops] + self.enclosing(q.name):
                ext = self.info_of(chain_st).derived.extents[lp.name]
                if id(lp.var) not in fixed:
                    relaxed[id(lp.var)] = ext
            coords = self.coords(qi)
            for node in walk(self.body_of(q)):
                if isinstance(node, TensorRead) and node.tensor.name == st.name:
                    for d, ie in enumerate(node.indices):
                        iv = arith.interval(arith.simplify(substitute(ie, coords)), relaxed)
                        if iv is None:
                            los[d].append(None)
                            continue
                        los[d].append(iv[0])
                        his[d].append(iv[1])
        mins, exts = [], []
        for d, n in enumerate(shape):
            lo, hi = arith.union_bounds(los[d], his[d])
            ext = None if lo is None else arith.const_value(Binary("add", Binary("sub", hi, lo, "int32"),
                                                                     Const(1, "int32"), "int32"))
            if ext is None or ext >= n:
                mins.append(Const(0, "int32"))
                exts.append(n)
            else:
                mins.append(lo)
                exts.append(max(1, ext))
        return mins, exts

    def fixed_loop_vars(self, st: Stage) -> set[int]:
        """Loops around `st`'s attach point whose value is fixed while `st`'s region is computed (the
        rest are relaxed over their extent). GPU lowering overrides this: a shared-memory stage is
        filled by the whole thread block, so loops bound to threadIdx are relaxed for it."""
        return {id(lp.var) for _, lp in self.enclosing(st.name)}

    def _check_inside(self, st: Stage, q: Stage, tname: str, lname: str) -> None:
        if q.name == tname:
            return
        target = self.stages[tname]
        pos = [lp.name for lp in target.leaf_loops].index(lname)
        for chain_st, lp in self.enclosing(q.name):
            if chain_st == tname and [x.name for x in target.leaf_loops].index(lp.name) >= pos:
                return
        raise ScheduleError(f"compute_at: stage {st.name!r} is computed at {tname!r} loop {lname!r}, but its reader "
                            f"{q.name!r} is not computed inside that loop")

    # ---- buffers and reads --------------------------------------------------------------------
    def buffer_of(self, name: str) -> Buffer:
        st = self.stages[name]
        inf = self.info_of(name) if not st.is_placeholder else None
        if inf is not None and inf.buffer is not None:
            return inf.buffer
        cname = self._unique_name(c_identifier(name))
        if name in self.args:
            buf = Buffer(cname, tuple(st.op.shape), st.op.dtype, "param", name)
        elif st.is_placeholder:
            raise ScheduleError(f"input {name!r} is read by the kernel but is not in the argument list {self.args}")
        elif inf.local:
            shape = inf.stored(tuple(inf.region_ext))
            if self.target_kind == "cpu" and "vectorize" in st.annotations.values():
                shape = whole_vector_rows(shape, st.op.dtype)
            buf = Buffer(cname, shape, st.op.dtype, "local", name)
        else:
            buf = Buffer(cname, tuple(st.op.shape), st.op.dtype, "global", name)
        if inf is not None:
            inf.buffer = buf
        else:
            self._param_bufs[name] = buf
        return buf

    _param_bufs: dict[str, Buffer]
    _buf_names: set[str]

    def _unique_name(self, base: str) -> str:
        """Stage `A.local` and a user's tensor `A_local` must not share a buffer name."""
        name, k = base, 1
        while name in self._buf_names:
            k += 1
            name = f"{base}_{k}"
        self._buf_names.add(name)
        return name

    def lower_reads(self, e: Expr) -> Expr:
        def fn(x: Expr) -> Expr | None:
            if isinstance(x, TensorRead):
                name = x.tensor.name
                st = self.stages[name]
                if st.is_placeholder:
                    buf = self._param_bufs.get(name) or self.buffer_of(name)
                    return Load(buf, tuple(arith.simplify(i) for i in x.indices))
                inf = self.info_of(name)
                buf = self.buffer_of(name)
                idx = tuple(arith.simplify(Binary("sub", i, m, "int32")) if inf.local else arith.simplify(i)
                            for i, m in zip(x.indices, inf.region_min))
                return Load(buf, inf.stored(idx))
            return None

        return transform(e, fn)

    # ---- emission -----------------------------------------------------------------------------
    def emit_stage(self, name: str) -> Stmt:
        st = self.stages[name]
        inf = self.info_of(name)
        op = st.op
        assert isinstance(op, ComputeOp)
        buf = self.buffer_of(name)
        coords = self.coords(inf)
        value = self.lower_reads(arith.simplify(substitute(self.body_of(st), coords)))
        if inf.local:
            store_idx = inf.stored(tuple(arith.simplify(inf.derived.exprs[lp.name])
                                         for lp in st.root_loops[: len(op.axis)]))
        else:
            store_idx = tuple(coords[ax] for ax in op.axis)
        guards = list(inf.derived.guards)
        if inf.local:
            guards += self._bound_guards(st, inf, coords)
        reducer = op.body.reducer if isinstance(op.body, Reduce) else None
        if reducer is not None and self.target_kind == "cpu":  # rfactor's guards bound the loops instead
            value, lifted = lift_reduction_guards(value, reducer.identity(op.dtype),
                                                  {id(lp.var) for lp in st.leaf_loops if lp.kind == "reduce"})
            guards += lifted
        if reducer is not None:
            value = combine_reduction(reducer, Load(buf, store_idx), value)
        main = Store(buf, store_idx, value)
        init = Store(buf, store_idx, reducer.identity(op.dtype)) if reducer is not None else None
        leaves = st.leaf_loops
        first_red = next((k for k, lp in enumerate(leaves) if lp.kind == "reduce"), None)
        outer_vars = {id(lp.var) for _, lp in self.enclosing(name)}

        def build(p: int, preds: list[Expr], is_init: bool) -> list[Stmt]:
            out: list[Stmt] = []
            if not is_init and init is not None and p == first_red:
                spatial_preds = [g for g in preds if not any(isinstance(n, Var) and id(n) in red_vars
                                                                for n in walk(g))]
                out.extend(build(p, spatial_preds, True))
            loops = leaves
            while p < len(loops) and is_init and loops[p].kind == "reduce":
                p += 1
            if p == len(loops):
                body: Stmt = init if is_init else main
                if preds:
                    body = IfThen(conjunction(preds), body)
                out.append(body)
                return out
            lp = loops[p]
            defined = outer_vars | {id(x.var) for x in loops[: p + 1]}
            ready = [g for g in preds if arith.uses_only(g, defined)]
            rest = [g for g in preds if g not in ready]
            extent: Expr = Const(inf.derived.extents[lp.name], "int32")
            guards_here = []
            for g in ready:
                bound = arith.as_loop_bound(g, lp.var)
                if bound is not None:
                    extent = arith.simplify(Binary("min", extent, bound, "int32"))
                else:
                    guards_here.append(g)
            inner: list[Stmt] = []
            if not is_init:
                for child in self.children.get((name, lp.name), []):
                    inner.append(("alloc", child))
            inner_stmts = build(p + 1, rest, is_init)
            body = seq(inner_stmts)
            for item in reversed(inner):
                child = item[1]
                body = Allocate(self.buffer_of(child), seq([self.emit_stage(child), body]))
            if guards_here:
                body = IfThen(conjunction(guards_here), body)
            kind = _KIND.get(st.annotations.get(lp.name, ""), "serial")
            if is_init and kind == "parallel":
                kind = "serial"
            if kind == "vectorized" and any(isinstance(n, Allocate) for n in walk_stmts(body)):
                raise ScheduleError(f"stage {name!r}, loop {lp.name!r}: cannot vectorize a loop that contains "
                                    "another stage's computation (compute_at inside it)")
            tag = st.bindings.get(lp.name, "")
            if tag:  # a GPU thread/block index: the target's renderer decides how it becomes no loop
                kind = "bound"
            out.append(For(lp.var, extent, kind, body, lp.name, name, thread_tag=tag))
            return out

        red_vars = {id(lp.var) for lp in leaves if lp.kind == "reduce"}
        stmt = seq(build(0, guards, False))
        return apply_pragmas(st, stmt)

    def _bound_guards(self, st: Stage, inf: StageInfo, coords: dict[IterVar, Expr]) -> list[Expr]:
        """Guards keeping a region that overhangs the tensor inside it."""
        out = []
        ranges = {}
        for sname, lp in self.enclosing(st.name):
            ranges[id(lp.var)] = self.info_of(sname).derived.extents[lp.name]
        for d, ax in enumerate(st.op.axis):
            rng = arith.numeric_range(inf.region_min[d], ranges)
            n = st.op.shape[d]
            if rng is None or rng[0] < 0:
                out.append(Binary("ge", coords[ax], Const(0, "int32"), "bool"))
            if rng is None or rng[1] + inf.region_ext[d] > n:
                out.append(Binary("lt", coords[ax], Const(n, "int32"), "bool"))
        return out

    def run(self) -> LoweredFunc:
        self._param_bufs = {}
        self._buf_names = set()
        params = [self.buffer_of(n) for n in self.args]
        body: list[Stmt] = []
        temps: list[Buffer] = []
        for name in self.order:
            st = self.stages[name]
            if st.is_placeholder or st.attach != ("root",):
                continue
            body.append(self.emit_stage(name))
            buf = self.buffer_of(name)
            if buf.scope == "global":
                temps.append(buf)
        stmt = seq(body)
        for buf in reversed(temps):
            stmt = Allocate(buf, stmt)
        check_parallel_nesting(stmt, None)
        if self.target_kind == "cpu":
            stmt = partition_selects(partition_loops(stmt))
        return LoweredFunc(self.name, params, stmt)


def whole_vector_rows(shape: tuple, dtype: str) -> tuple:
    """A CPU tile's stack buffer with its last dimension rounded up to whole vectors: a partial last
    vector of the tile is then computed at full width in registers, its extra lanes dead
    (`codegen.vector_c`), instead of masked on the stack."""
    w = lanes(dtype)
    if not shape or not w or not isinstance(shape[-1], int) or shape[-1] <= 1 or shape[-1] % w == 0:
        return shape
    return (*shape[:-1], -(-shape[-1] // w) * w)


def lower_state(state: State, args: Sequence[Tensor], target_kind: str = "cpu",
                name: str = "default_function") -> LoweredFunc:
    return Lowerer(state, args, target_kind, name).run()
