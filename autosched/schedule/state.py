"""Schedule state: stages with their loops, loop relations, annotations and attach points.

The state is what replaying a schedule's steps on a DAG produces. Loops are named (`i.outer`),
never positional, so a step recorded on one run replays identically on another.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from autosched.te.dag import ComputeDAG
from autosched.te.expr import IterVar, Reduce, TensorRead, Var, transform
from autosched.te.tensor import ComputeOp, PlaceholderOp, Tensor


class ScheduleError(ValueError):
    """A schedule step that cannot be applied; the message names the step, stage and loop."""


@dataclass(eq=False)
class Loop:
    name: str
    kind: str  # "spatial" | "reduce"
    var: Var


@dataclass(eq=False)
class Split:
    parent: Loop
    outer: Loop
    inner: Loop
    factor: int | None
    nparts: int | None


@dataclass(eq=False)
class Fuse:
    outer: Loop
    inner: Loop
    fused: Loop


@dataclass(eq=False)
class Stage:
    """One operation of the (possibly rewritten) DAG and how its loop nest is transformed."""

    name: str
    op: ComputeOp | PlaceholderOp
    scope: str = "global"
    root_loops: list[Loop] = field(default_factory=list)
    leaf_loops: list[Loop] = field(default_factory=list)
    relations: list[Split | Fuse] = field(default_factory=list)
    annotations: dict[str, str] = field(default_factory=dict)  # loop name -> parallel/vectorize/unroll
    bindings: dict[str, str] = field(default_factory=dict)  # loop name -> thread tag
    attach: tuple = ("root",)  # ("root",) | ("inline",) | ("at", stage_name, loop_name)
    pragmas: dict[str, int] = field(default_factory=dict)
    axis_ids: set[int] = field(default_factory=set)  # te IterVars that name this stage's root loops
    is_output: bool = False

    @property
    def is_placeholder(self) -> bool:
        return isinstance(self.op, PlaceholderOp)

    @property
    def has_reduce(self) -> bool:
        return isinstance(self.op, ComputeOp) and isinstance(self.op.body, Reduce)

    def loop(self, name: str) -> Loop:
        for lp in self.all_loops():
            if lp.name == name:
                return lp
        raise KeyError(name)

    def leaf(self, name: str) -> Loop:
        for lp in self.leaf_loops:
            if lp.name == name:
                return lp
        raise KeyError(name)

    def all_loops(self) -> list[Loop]:
        out = list(self.root_loops)
        for r in self.relations:
            out.extend([r.outer, r.inner] if isinstance(r, Split) else [r.fused])
        return out

    def is_transformed(self) -> bool:
        return bool(self.relations or self.annotations or self.bindings or self.pragmas) or \
            [lp.name for lp in self.leaf_loops] != [lp.name for lp in self.root_loops]


def make_stage(name: str, op: ComputeOp | PlaceholderOp, scope: str = "global",
               extra_axis_ids: set[int] | None = None) -> Stage:
    st = Stage(name, op, scope)
    if isinstance(op, ComputeOp):
        for ax in list(op.axis) + list(op.reduce_axis):
            if any(lp.name == ax.name for lp in st.root_loops):
                raise ScheduleError(f"stage {name!r} has two axes named {ax.name!r}; steps name loops, so the "
                                    "axes of one compute need distinct names")
            st.root_loops.append(Loop(ax.name, ax.kind, Var(ax.name)))
            st.axis_ids.add(id(ax))
    st.leaf_loops = list(st.root_loops)
    if extra_axis_ids:
        st.axis_ids |= extra_axis_ids
    return st


class State:
    """All stages in a valid topological order, keyed by name."""

    def __init__(self, dag: ComputeDAG) -> None:
        self.dag = dag
        self.stages: list[Stage] = []
        self.tensors: dict[str, Tensor] = {}
        outputs = {t.name for t in dag.outputs}
        for t in dag.tensors:
            st = make_stage(t.name, t.op)
            st.is_output = t.name in outputs
            self.stages.append(st)
            self.tensors[t.name] = t

    def snapshot(self) -> tuple:
        """Everything a step may change, to `restore` when the step is refused halfway."""
        per_stage = [(st, st.op, st.scope, list(st.leaf_loops), list(st.relations), dict(st.annotations),
                      dict(st.bindings), st.attach, dict(st.pragmas), set(st.axis_ids), st.is_output)
                     for st in self.stages]
        return list(self.stages), dict(self.tensors), per_stage

    def restore(self, snap: tuple) -> None:
        stages, tensors, per_stage = snap
        self.stages[:] = stages
        self.tensors.clear()
        self.tensors.update(tensors)
        for st, op, scope, leaves, rels, ann, binds, attach, prag, ids, is_out in per_stage:
            st.op, st.scope, st.attach, st.is_output = op, scope, attach, is_out
            st.leaf_loops[:] = leaves
            st.relations[:] = rels
            st.annotations.clear()
            st.annotations.update(ann)
            st.bindings.clear()
            st.bindings.update(binds)
            st.pragmas.clear()
            st.pragmas.update(prag)
            st.axis_ids.clear()
            st.axis_ids.update(ids)

    def stage(self, name: str) -> Stage:
        for st in self.stages:
            if st.name == name:
                return st
        raise KeyError(name)

    def has_stage(self, name: str) -> bool:
        return any(st.name == name for st in self.stages)

    def consumers(self, name: str) -> list[Stage]:
        out = []
        for st in self.stages:
            if isinstance(st.op, ComputeOp) and any(t.name == name for t in st.op.input_tensors()):
                out.append(st)
        return out

    def insert_after(self, anchor: str, stage: Stage, tensor: Tensor) -> None:
        idx = next(k for k, st in enumerate(self.stages) if st.name == anchor)
        self.stages.insert(idx + 1, stage)
        self.tensors[stage.name] = tensor

    def replace_reads(self, stage: Stage, old: str, new: Tensor,
                      indices: Callable[[tuple], tuple] | None = None) -> None:
        """Rewrite `stage`'s body so reads of tensor `old` read `new`, at the same indices or at
        `indices(old indices)` (a copy in another layout)."""
        op = stage.op
        assert isinstance(op, ComputeOp)

        def fn(e):
            if isinstance(e, TensorRead) and e.tensor.name == old:
                return TensorRead(new, tuple(indices(tuple(e.indices))) if indices else e.indices)
            return None

        body = op.body
        if isinstance(body, Reduce):
            body = Reduce(body.reducer, transform(body.source, fn), body.axes)
        else:
            body = transform(body, fn)
        new_op = ComputeOp(op.name, op.axis, body, op.dtype, op.tag)
        new_op.reduce_axis = op.reduce_axis
        stage.op = new_op
        self.tensors[stage.name] = Tensor(new_op, new_op.shape, new_op.dtype)


def is_itervar(x: object) -> bool:
    return isinstance(x, IterVar)
