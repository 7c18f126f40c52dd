"""Access analysis on the loop-nest IR: flattened indices, strides and invariance of expressions in a
loop variable. The C renderer decides vector code with it and the cost model counts accesses with it."""

from __future__ import annotations

from autosched.lowering import arith
from autosched.lowering.ir import Load
from autosched.te.expr import Binary, Const, Expr, Var, children, walk


def stride_of(index: Expr, var: Var) -> int | None:
    """Coefficient of `var` in a flattened index, None when the index is not affine in it."""
    lin = arith.to_linear(arith.simplify(index))
    coeff = 0
    for c, term in lin.terms.values():
        if term is var:
            coeff = c
        elif any(n is var for n in walk(term)):
            return None
    return coeff


def flat(buf, indices) -> Expr:
    out: Expr = Const(0, "int32")
    for d, idx in enumerate(indices):
        stride = 1
        for n in buf.shape[d + 1:]:
            stride *= n
        out = Binary("add", out, Binary("mul", idx, Const(stride, "int32"), "int32"), "int32")
    return arith.simplify(out)


def invariant(e: Expr, var: Var) -> bool:
    """Whether `e` does not depend on `var` at all (then it is one scalar, broadcast to the lanes)."""
    if isinstance(e, Var):
        return e is not var
    if isinstance(e, Load):
        return all(invariant(i, var) for i in e.indices)
    return all(invariant(c, var) for c in children(e))
