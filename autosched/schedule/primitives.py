"""Applying steps to a schedule state; each illegal request raises `ScheduleError`."""

from __future__ import annotations

from autosched.schedule.bounds import derive
from autosched.schedule.state import Fuse, Loop, ScheduleError, Split, Stage, State, make_stage
from autosched.schedule.steps import (
    ANNOTATIONS,
    PRAGMAS,
    THREAD_TAGS,
    AnnotateStep,
    BindStep,
    CacheReadStep,
    CacheWriteStep,
    ComputeAtStep,
    ComputeInlineStep,
    ComputeRootStep,
    FuseStep,
    PragmaStep,
    ReorderStep,
    RfactorStep,
    SplitStep,
    Step,
    TileStep,
)
from autosched.te.expr import IterVar, Reduce, Select, TensorRead, Var, substitute, walk
from autosched.te.tensor import ComputeOp, Tensor

CACHE_SCOPES = ("global", "local", "shared")
CACHE_LAYOUTS = ("", "transposed", "outer_last")


class _Err(Exception):
    """Internal: message without the step prefix."""


def apply_step(state: State, step: Step, index: int) -> Tensor | None:
    """Apply `step` (the `index`-th of its schedule) to `state`.

    A step is all or nothing: if it is refused (a tile whose second split fails, say) the state is
    restored to what it was, so the state always equals the replay of the recorded steps."""
    fn = _APPLY.get(type(step))
    if fn is None:
        raise ScheduleError(f"step {index}: not a schedule step: {step!r}")
    snap = state.snapshot()
    try:
        return fn(state, step)
    except BaseException as exc:
        state.restore(snap)
        if not isinstance(exc, _Err):
            raise
        raise ScheduleError(f"step {index} ({step.kind}, {_where(step)}): {exc}") from None


def _where(step: Step) -> str:
    """The stage and loop(s) a step is about, for its error messages."""
    stage = getattr(step, "stage", None) or getattr(step, "tensor", "?")
    where = f"stage {stage!r}"
    if getattr(step, "loop", None):
        where += f", loop {step.loop!r}"
    elif isinstance(step, TileStep):
        where += f", loops {step.x!r}, {step.y!r}"
    elif isinstance(step, FuseStep | ReorderStep):
        where += f", loops {list(getattr(step, 'loops', None) or step.order)!r}"
    return where


def _stage(state: State, name: str) -> Stage:
    if not isinstance(name, str) or not state.has_stage(name):
        names = [s.name for s in state.stages]
        raise _Err(f"no stage named {name!r}; stages: {names}")
    return state.stage(name)


def _compute_stage(state: State, name: str) -> Stage:
    st = _stage(state, name)
    if st.is_placeholder:
        raise _Err(f"{name!r} is an input placeholder and has no loops to schedule")
    return st


def _leaf(st: Stage, name: str) -> Loop:
    try:
        return st.leaf(name)
    except KeyError:
        leaves = [lp.name for lp in st.leaf_loops]
        if any(lp.name == name for lp in st.all_loops()):
            raise _Err(f"loop {name!r} of stage {st.name!r} was already split or fused; "
                       f"current loops: {leaves}") from None
        raise _Err(f"stage {st.name!r} has no loop {name!r}; its loops: {leaves}") from None


def _positive_int(v: object, what: str) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
        raise _Err(f"{what} must be a positive integer, got {v!r}")
    return v


def _split(state: State, s: SplitStep) -> None:
    st = _compute_stage(state, s.stage)
    lp = _leaf(st, s.loop)
    if (s.factor is None) == (s.nparts is None):
        raise _Err("give exactly one of factor or nparts")
    if s.factor is not None:
        _positive_int(s.factor, "split factor")
    else:
        _positive_int(s.nparts, "split nparts")
    _check_unannotated(st, lp.name)
    outer = Loop(f"{lp.name}.outer", lp.kind, Var(f"{lp.name}.outer"))
    inner = Loop(f"{lp.name}.inner", lp.kind, Var(f"{lp.name}.inner"))
    st.relations.append(Split(lp, outer, inner, s.factor, s.nparts))
    k = st.leaf_loops.index(lp)
    st.leaf_loops[k:k + 1] = [outer, inner]


def _check_unannotated(st: Stage, name: str) -> None:
    """Annotations, bindings and pragmas name a loop, so that loop must not be split or fused away."""
    how = None
    if name in st.annotations:
        how = f"annotated {st.annotations[name]!r}"
    elif name in st.bindings:
        how = f"bound to {st.bindings[name]!r}"
    elif any(k.split("@", 1)[1] == name for k in st.pragmas):
        how = "given a pragma"
    if how is not None:
        raise _Err(f"loop {name!r} is {how}; transform loops before annotating them")


def _fuse(state: State, s: FuseStep) -> None:
    st = _compute_stage(state, s.stage)
    if len(s.loops) < 2:
        raise _Err("fuse needs at least two loops")
    loops = [_leaf(st, n) for n in s.loops]
    if len({id(lp) for lp in loops}) != len(loops):
        raise _Err(f"fuse got a loop twice: {list(s.loops)}")
    pos = [st.leaf_loops.index(lp) for lp in loops]
    if pos != list(range(pos[0], pos[0] + len(pos))):
        raise _Err(f"fuse needs adjacent loops in outer-to-inner order; {list(s.loops)} are at positions {pos}")
    kinds = {lp.kind for lp in loops}
    if len(kinds) != 1:
        raise _Err("cannot fuse a spatial loop with a reduction loop")
    for lp in loops:
        _check_unannotated(st, lp.name)
    cur = loops[0]
    for nxt in loops[1:]:
        name = f"{cur.name}.{nxt.name}.fused"
        fused = Loop(name, cur.kind, Var(name))
        st.relations.append(Fuse(cur, nxt, fused))
        k = st.leaf_loops.index(cur)
        st.leaf_loops[k:k + 2] = [fused]
        cur = fused


def _reorder(state: State, s: ReorderStep) -> None:
    st = _compute_stage(state, s.stage)
    if len(set(s.order)) != len(s.order):
        raise _Err(f"reorder names a loop twice: {list(s.order)} (a cyclic order)")
    loops = [_leaf(st, n) for n in s.order]
    positions = sorted(st.leaf_loops.index(lp) for lp in loops)
    for p, lp in zip(positions, loops):
        st.leaf_loops[p] = lp


def _tile(state: State, s: TileStep) -> None:
    _split(state, SplitStep(s.stage, s.x, factor=s.x_factor))
    _split(state, SplitStep(s.stage, s.y, factor=s.y_factor))
    _reorder(state, ReorderStep(s.stage, (f"{s.x}.outer", f"{s.y}.outer", f"{s.x}.inner", f"{s.y}.inner")))


def _annotate(state: State, s: AnnotateStep) -> None:
    st = _compute_stage(state, s.stage)
    lp = _leaf(st, s.loop)
    if s.annotation not in ANNOTATIONS:
        raise _Err(f"unknown annotation {s.annotation!r}; use one of {ANNOTATIONS}")
    if s.annotation in ("parallel", "vectorize") and lp.kind == "reduce":
        raise _Err(f"cannot {s.annotation} reduction loop {lp.name!r}: its iterations update the same "
                   "output (rfactor it, or annotate a spatial loop)")
    if lp.name in st.bindings:
        raise _Err(f"loop {lp.name!r} is bound to {st.bindings[lp.name]!r}")
    st.annotations[lp.name] = s.annotation


def _bind(state: State, s: BindStep) -> None:
    st = _compute_stage(state, s.stage)
    lp = _leaf(st, s.loop)
    if s.thread not in THREAD_TAGS:
        raise _Err(f"unknown thread tag {s.thread!r}; use one of {THREAD_TAGS}")
    if lp.kind == "reduce" and not s.thread.startswith("threadIdx"):
        raise _Err(f"cannot bind reduction loop {lp.name!r} to {s.thread!r}")
    if lp.name in st.annotations:
        raise _Err(f"loop {lp.name!r} is already annotated {st.annotations[lp.name]!r}")
    st.bindings[lp.name] = s.thread


def _pragma(state: State, s: PragmaStep) -> None:
    st = _compute_stage(state, s.stage)
    _leaf(st, s.loop)
    if s.key not in PRAGMAS:
        raise _Err(f"unknown pragma {s.key!r}; known: {PRAGMAS}")
    if not isinstance(s.value, int) or s.value < 0:
        raise _Err(f"pragma {s.key} needs a non-negative integer, got {s.value!r}")
    st.pragmas[f"{s.key}@{s.loop}"] = s.value


def _fresh_name(state: State, base: str) -> str:
    name, k = base, 1
    while state.has_stage(name):
        k += 1
        name = f"{base}{k}"
    return name


def _cache_read(state: State, s: CacheReadStep) -> Tensor:
    src = _stage(state, s.tensor)
    if src.attach == ("inline",):
        raise _Err(f"cannot cache_read {s.tensor!r}: it is inlined")
    if s.scope not in CACHE_SCOPES:
        raise _Err(f"unknown scope {s.scope!r}; use one of {CACHE_SCOPES}")
    if not s.readers:
        raise _Err("cache_read needs at least one reader stage")
    readers = [_compute_stage(state, r) for r in s.readers]
    for r in readers:
        if not any(t.name == s.tensor for t in r.op.input_tensors()):
            raise _Err(f"stage {r.name!r} does not read {s.tensor!r}")
    if s.layout not in CACHE_LAYOUTS:
        raise _Err(f"unknown cache_read layout {s.layout!r}; use one of {CACHE_LAYOUTS}")
    t = state.tensors[s.tensor]
    permute, source_index = _LAYOUTS.get(s.layout, (None, None))
    if permute is not None and len(t.shape) < 2:
        raise _Err(f"cannot cache_read {s.tensor!r} with layout {s.layout!r}: it has {len(t.shape)} axis, "
                   "not two or more")
    name = _fresh_name(state, f"{s.tensor}.{s.scope}")
    shape = permute(tuple(t.shape)) if permute else tuple(t.shape)
    axes = tuple(IterVar(f"ax{d}", n, "spatial") for d, n in enumerate(shape))
    op = ComputeOp(name, axes, TensorRead(t, source_index(axes) if source_index else axes), t.dtype)
    new_t = Tensor(op, shape, t.dtype)
    st = make_stage(name, op, s.scope)
    state.insert_after(s.tensor, st, new_t)
    for r in readers:
        state.replace_reads(r, s.tensor, new_t, permute)
    return new_t


def _swap_last_two(xs: tuple) -> tuple:
    return (*xs[:-2], xs[-1], xs[-2])


def _outer_last(xs: tuple) -> tuple:
    return (*xs[1:], xs[0])


def _outer_first(xs: tuple) -> tuple:
    return (xs[-1], *xs[:-1])


_LAYOUTS = {"transposed": (_swap_last_two, _swap_last_two), "outer_last": (_outer_last, _outer_first)}
"""layout -> (the copy's axes from the tensor's, the tensor's indices from the copy's axes). "transposed"
swaps the last two axes (nn.Linear's [N, K] weight packed K-major); "outer_last" moves the first axis
last (a convolution's [K, C, R, S] kernel packed with its output channels innermost, the lanes of a
channel-vectorized register tile)."""


def _cache_write(state: State, s: CacheWriteStep) -> Tensor:
    st = _compute_stage(state, s.tensor)
    if s.scope not in CACHE_SCOPES:
        raise _Err(f"unknown scope {s.scope!r}; use one of {CACHE_SCOPES}")
    if st.is_transformed() or st.attach != ("root",):
        raise _Err(f"cache_write of {s.tensor!r} must come before any transform of that stage")
    op = st.op
    name = _fresh_name(state, f"{s.tensor}.{s.scope}")
    cache_op = ComputeOp(name, op.axis, op.body, op.dtype, op.tag)
    cache_t = Tensor(cache_op, op.shape, op.dtype)
    cache_st = make_stage(name, cache_op, s.scope)
    new_axes = tuple(IterVar(a.name, a.extent, "spatial") for a in op.axis)
    copy_op = ComputeOp(op.name, new_axes, TensorRead(cache_t, new_axes), op.dtype, op.tag)
    old_ids = set(st.axis_ids)
    new_st = make_stage(op.name, copy_op, st.scope, extra_axis_ids=old_ids)
    new_st.is_output = st.is_output
    idx = state.stages.index(st)
    state.stages[idx:idx + 1] = [cache_st, new_st]
    state.tensors[name] = cache_t
    state.tensors[op.name] = Tensor(copy_op, copy_op.shape, copy_op.dtype)
    return cache_t


def _compute_at(state: State, s: ComputeAtStep) -> None:
    st = _compute_stage(state, s.stage)
    target = _compute_stage(state, s.target)
    if st is target:
        raise _Err("a stage cannot be computed at its own loop")
    if st.is_output:
        raise _Err(f"{st.name!r} is an output of the DAG; outputs are computed at root")
    if target.attach == ("inline",):
        raise _Err(f"target stage {target.name!r} is inlined")
    _leaf(target, s.loop)
    cur = target
    while cur.attach[0] == "at":  # the target's own placement must not lead back to this stage
        if cur.attach[1] == st.name:
            raise _Err(f"compute_at would form a cycle: {cur.name!r} is computed at {st.name!r}")
        cur = state.stage(cur.attach[1])
    st.attach = ("at", target.name, s.loop)


def _compute_inline(state: State, s: ComputeInlineStep) -> None:
    st = _compute_stage(state, s.stage)
    if st.is_output:
        raise _Err(f"{st.name!r} is an output of the DAG and cannot be inlined")
    if st.has_reduce:
        raise _Err(f"{st.name!r} is a reduction and cannot be inlined")
    for other in state.stages:
        if other.attach[:2] == ("at", st.name):
            raise _Err(f"stage {other.name!r} is computed at {st.name!r}; move it first")
    st.attach = ("inline",)


def _compute_root(state: State, s: ComputeRootStep) -> None:
    st = _compute_stage(state, s.stage)
    st.attach = ("root",)


def _rfactor(state: State, s: RfactorStep) -> Tensor:
    st = _compute_stage(state, s.stage)
    if not st.has_reduce:
        raise _Err(f"{st.name!r} has no reduction to factor")
    lp = _leaf(st, s.loop)
    if lp.kind != "reduce":
        raise _Err(f"loop {lp.name!r} is not a reduction loop")
    nsp = len(st.op.axis)
    _check_rfactor_order(st, nsp)
    if not 0 <= s.factor_axis <= nsp:
        raise _Err(f"factor_axis {s.factor_axis} out of range [0, {nsp}]")
    red_leaves = [x for x in st.leaf_loops if x.kind == "reduce"]
    op = st.op
    body = op.body
    assert isinstance(body, Reduce)
    roots = st.root_loops[nsp:]
    root_ext = {x.name: ax.extent for x, ax in zip(st.root_loops[:nsp], op.axis)}
    root_ext.update({x.name: ax.extent for x, ax in zip(roots, op.reduce_axis)})
    derived = derive(st, root_ext)  # the stage is at root, so every extent is known now
    ext, exprs, guards = derived.extents, derived.exprs, derived.guards
    taken = {ax.name for ax in op.axis}
    new_spatial = IterVar(_fresh_axis_name(lp.name, taken), ext[lp.name], "spatial")
    others = [IterVar(_fresh_axis_name(x.name, taken), ext[x.name], "reduce") for x in red_leaves if x is not lp]
    var_of = {id(x.var): (new_spatial if x is lp else others[[y for y in red_leaves if y is not lp].index(x)])
              for x in red_leaves}
    mapping = {ax: substitute(exprs[root.name], {v: var_of[id(v)] for v in _vars_of(exprs[root.name])})
               for ax, root in zip(op.reduce_axis, roots)}
    src = substitute(body.source, mapping)
    for g in guards:
        cond = substitute(g, {v: var_of[id(v)] for v in _vars_of(g)})
        src = Select(cond, src, body.reducer.identity(src.dtype), src.dtype)
    rf_axes = list(op.axis)
    rf_axes.insert(s.factor_axis, new_spatial)
    name = _fresh_name(state, f"{st.name}.rf")
    if others:
        rf_body = Reduce(body.reducer, src, tuple(others))
    else:
        rf_body = src
    rf_op = ComputeOp(name, tuple(rf_axes), rf_body, op.dtype, op.tag)
    rf_t = Tensor(rf_op, rf_op.shape, rf_op.dtype)
    rf_st = make_stage(name, rf_op, "global")
    red = IterVar(new_spatial.name, new_spatial.extent, "reduce")
    idx = list(op.axis)
    idx.insert(s.factor_axis, red)
    new_op = ComputeOp(op.name, op.axis, Reduce(body.reducer, TensorRead(rf_t, tuple(idx)), (red,)), op.dtype, op.tag)
    new_st = make_stage(op.name, new_op, st.scope, extra_axis_ids=set(st.axis_ids))
    new_st.is_output = st.is_output
    k = state.stages.index(st)
    state.stages[k:k + 1] = [rf_st, new_st]
    state.tensors[name] = rf_t
    state.tensors[op.name] = Tensor(new_op, new_op.shape, new_op.dtype)
    return rf_t


def _check_rfactor_order(st: Stage, nsp: int) -> None:
    """rfactor rebuilds the stage from its axes, keeping only the splits and fuses of its reduction
    loops; anything else done to the stage before would be dropped silently, so it is refused."""
    marks = list(st.annotations) + list(st.bindings) + [k.split("@", 1)[1] for k in st.pragmas]
    if marks:
        raise _Err(f"rfactor must come before annotating the stage's loops (loop {marks[0]!r} is annotated)")
    if any(r.parent.kind == "spatial" for r in st.relations if isinstance(r, Split)) or \
            any(r.outer.kind == "spatial" for r in st.relations if isinstance(r, Fuse)):
        raise _Err("rfactor must come before splitting or fusing the stage's spatial loops")
    if st.leaf_loops[:nsp] != st.root_loops[:nsp]:
        raise _Err("rfactor must come before reordering the stage's spatial loops")
    if st.attach != ("root",):
        raise _Err("rfactor must come before compute_at or compute_inline of the stage")


def _fresh_axis_name(loop: str, taken: set[str]) -> str:
    """An axis name for loop `k.inner` (`k_inner`) that no other axis of the new op has (loops are
    looked up by name, so two axes of one stage must never share one)."""
    base = loop.replace(".", "_")
    name, k = base, 1
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    taken.add(name)
    return name


def _vars_of(e) -> list[Var]:
    return [n for n in walk(e) if isinstance(n, Var)]


_APPLY = {
    SplitStep: _split, FuseStep: _fuse, ReorderStep: _reorder, TileStep: _tile, AnnotateStep: _annotate,
    BindStep: _bind, PragmaStep: _pragma, CacheReadStep: _cache_read, CacheWriteStep: _cache_write,
    ComputeAtStep: _compute_at, ComputeInlineStep: _compute_inline, ComputeRootStep: _compute_root,
    RfactorStep: _rfactor,
}
