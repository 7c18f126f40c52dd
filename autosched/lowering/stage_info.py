"""What lowering knows about one stage, and the small expression helpers it builds statements with.

Split from `lower.py` so that the lowerer's module holds only the walk over the attach tree; these
pieces are pure functions of a stage or an expression, testable without a whole schedule.
"""

from __future__ import annotations

from dataclasses import dataclass

from autosched.dtypes import promote
from autosched.lowering.ir import Buffer, Load
from autosched.schedule.bounds import Derived
from autosched.schedule.state import Stage
from autosched.te.expr import Binary, Const, Expr, Select, TensorRead, Var, substitute, transform, walk


@dataclass
class StageInfo:
    """What lowering knows about one stage."""

    stage: Stage
    region_min: list[Expr]
    region_ext: list[int]
    derived: Derived
    buffer: Buffer | None = None
    local: bool = False
    order: tuple[int, ...] | None = None
    """Storage order of a local buffer's dimensions (None: the op's axis order), see `vector_last_order`."""

    def stored(self, dims: tuple) -> tuple:
        """`dims` (one per op axis) in the buffer's storage order."""
        return dims if self.order is None else tuple(dims[d] for d in self.order)


def vector_last_order(st: Stage, derived: Derived) -> tuple[int, ...] | None:
    """The storage order putting last the dimension a local stage's vectorized loop runs along.

    Why: a register tile is vectorized along the axis whose vectors its loads serve. For a
    convolution that is the output channel (`conv.local[f, y, x]`, channels as lanes, each input value
    broadcast): 56-wide rows are not whole 16-float vectors, 16 channels are. In the op's axis order
    the tile's vectors would be strided (one lane per row of 14); stored channel-last they are whole
    vectors at constant offsets, which `codegen.register_tile` keeps in registers. A local buffer is
    private to the kernel, so its layout is free; the op's order stays wherever the vectorized
    dimension already is last, or no single dimension is vectorized."""
    vec = [lp for lp in st.leaf_loops if st.annotations.get(lp.name) == "vectorize" and lp.kind != "reduce"]
    n_axis = len(st.op.axis)
    if len(vec) != 1 or n_axis < 2:
        return None
    var = vec[0].var
    dims = [d for d, lp in enumerate(st.root_loops[:n_axis])
            if any(n is var for n in walk(derived.exprs[lp.name]))]
    if len(dims) != 1 or dims[0] == n_axis - 1:
        return None
    return tuple(d for d in range(n_axis) if d != dims[0]) + (dims[0],)


def combine_reduction(reducer, acc: Expr, value: Expr) -> Expr:
    c = reducer.combine
    if isinstance(c, Binary) and c.a is reducer.lhs and c.b is reducer.rhs:
        return Binary(c.op, acc, value, promote(acc.dtype, value.dtype))
    return retype_constants(substitute(c, {reducer.lhs: acc, reducer.rhs: value}))


def retype_constants(e: Expr) -> Expr:
    def fn(x: Expr) -> Expr | None:
        if isinstance(x, Binary) and x.dtype != "bool":
            a, b = x.a, x.b
            if isinstance(a, Const):
                a = Const(a.value, b.dtype)
            if isinstance(b, Const):
                b = Const(b.value, a.dtype)
            return Binary(x.op, a, b, promote(a.dtype, b.dtype))
        return None

    return transform(e, fn)


_BOUND_COMPARISONS = ("lt", "le", "gt", "ge")


def lift_reduction_guards(value: Expr, identity: Const, loop_vars: set[int]) -> tuple[Expr, list[Expr]]:
    """`value` without its outer `cond ? x : identity` selects whose conditions bound reduction loops
    (`loop_vars`: ids of their variables), and those conditions, to guard the update with instead.

    Why: rfactor over a split that does not divide its extent guards every term by such a select (the
    identity changes nothing), which keeps the whole loop guarded; as a guard of the update it becomes
    the inner loop's bound, and loop partitioning leaves the main iterations a guard-free body."""
    lifted: list[Expr] = []
    while isinstance(value, Select) and isinstance(value.f, Const) and value.f.value == identity.value:
        conds = conjuncts(value.cond)
        if not all(_bounds_loops(c, loop_vars) for c in conds):
            break
        lifted += conds
        value = value.t
    return value, lifted


def conjuncts(cond: Expr) -> list[Expr]:
    """The terms of a chain of `and`s."""
    if isinstance(cond, Binary) and cond.op == "and":
        return conjuncts(cond.a) + conjuncts(cond.b)
    return [cond]


def _bounds_loops(c: Expr, loop_vars: set[int]) -> bool:
    """An integer comparison of loop variables only, one of them in `loop_vars`."""
    if not (isinstance(c, Binary) and c.op in _BOUND_COMPARISONS and c.a.dtype.startswith("int")
            and c.b.dtype.startswith("int")):
        return False
    nodes = list(walk(c))
    return not any(isinstance(n, TensorRead | Load) for n in nodes) and \
        any(isinstance(n, Var) and id(n) in loop_vars for n in nodes)


def conjunction(preds: list[Expr]) -> Expr:
    out = preds[0]
    for p in preds[1:]:
        out = Binary("and", out, p, "bool")
    return out


def c_identifier(name: str) -> str:
    return name.replace(".", "_")
