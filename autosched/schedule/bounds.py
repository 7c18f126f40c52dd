"""Loop extents, root-axis expressions and guards derived from a stage's loop relations.

Extents of a stage's root loops are its region (the whole tensor for a root stage, the part a
consumer needs for a stage computed at a consumer's loop); splits and fuses derive the extents of
every other loop. A split that does not divide gives a tail, which is guarded.
"""

from __future__ import annotations

from dataclasses import dataclass

from autosched.schedule.state import Split, Stage
from autosched.te.expr import Binary, Const, Expr


@dataclass
class Derived:
    extents: dict[str, int]  # every loop of the stage by name
    exprs: dict[str, Expr]  # every loop's value in terms of leaf loop variables
    guards: list[Expr]  # conditions that must hold for an iteration to be real (imperfect splits)


def derive(st: Stage, root_extents: dict[str, int]) -> Derived:
    ext = dict(root_extents)
    for r in st.relations:
        if isinstance(r, Split):
            n = ext[r.parent.name]
            if r.factor is not None:
                inner = min(r.factor, n)
                ext[r.inner.name], ext[r.outer.name] = inner, -(-n // inner)
            else:
                outer = min(r.nparts, n)
                ext[r.outer.name], ext[r.inner.name] = outer, -(-n // outer)
        else:
            ext[r.fused.name] = ext[r.outer.name] * ext[r.inner.name]
    exprs: dict[str, Expr] = {lp.name: lp.var for lp in st.leaf_loops}
    guards: list[Expr] = []
    for r in reversed(st.relations):
        if isinstance(r, Split):
            outer, inner = exprs[r.outer.name], exprs[r.inner.name]
            n_in = ext[r.inner.name]
            parent = inner if ext[r.outer.name] == 1 else \
                Binary("add", Binary("mul", outer, Const(n_in, "int32"), "int32"), inner, "int32")
            if ext[r.outer.name] == 1:
                parent = inner
            exprs[r.parent.name] = parent
            if ext[r.outer.name] * n_in != ext[r.parent.name]:
                guards.append(Binary("lt", parent, Const(ext[r.parent.name], "int32"), "bool"))
        else:
            f = exprs[r.fused.name]
            n_in = ext[r.inner.name]
            exprs[r.outer.name] = Binary("floordiv", f, Const(n_in, "int32"), "int32") \
                if ext[r.outer.name] > 1 else Const(0, "int32")
            exprs[r.inner.name] = Binary("mod", f, Const(n_in, "int32"), "int32") \
                if ext[r.outer.name] > 1 else f
    return Derived(ext, exprs, guards)


def leaf_expressions(st: Stage, root_extents: dict[str, int]) -> tuple[dict[str, Expr], list[Expr]]:
    d = derive(st, root_extents)
    return d.exprs, d.guards
