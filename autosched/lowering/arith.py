"""Index arithmetic: canonical linear forms, simplification and interval bounds.

Lowering needs three things from index expressions: readable and cheap indices (`io*32 + ii -
io*32` is `ii`), the region of a producer that a consumer touches while some loops are fixed and
others run (bound inference for compute_at and caches), and whether a loop tail needs a guard.
Affine expressions cover nearly every real schedule; anything else is kept opaque and, when it
depends on a running loop, bounded conservatively by the caller.
"""

from __future__ import annotations

from dataclasses import dataclass

from autosched.lowering.ir import Load
from autosched.te.expr import Binary, Call, Cast, Const, Expr, Select, TensorRead, Var, children, rebuild, walk


def _key(e: Expr) -> tuple:
    """Structural key (variables by identity) for treating equal subterms as one term."""
    if isinstance(e, Const):
        return ("c", e.value, e.dtype)
    if isinstance(e, Var):
        return ("v", id(e))

    if isinstance(e, Load):
        return ("ld", id(e.buffer), tuple(_key(i) for i in e.indices))
    if isinstance(e, TensorRead):
        return ("rd", id(e.tensor), tuple(_key(i) for i in e.indices))
    tag = (type(e).__name__, getattr(e, "op", None) or getattr(e, "func", None), e.dtype)
    return tag + tuple(_key(c) for c in children(e))


@dataclass
class Linear:
    """sum(coeff * term) + const over integer terms (Vars or opaque subexpressions)."""

    terms: dict[tuple, tuple[int, Expr]]
    const: int

    def add(self, o: Linear, sign: int = 1) -> Linear:
        terms = dict(self.terms)
        for k, (c, t) in o.terms.items():
            old = terms.get(k, (0, t))[0]
            nc = old + sign * c
            if nc:
                terms[k] = (nc, t)
            else:
                terms.pop(k, None)
        return Linear(terms, self.const + sign * o.const)

    def scale(self, s: int) -> Linear:
        if s == 0:
            return Linear({}, 0)
        return Linear({k: (c * s, t) for k, (c, t) in self.terms.items()}, self.const * s)

    @property
    def is_const(self) -> bool:
        return not self.terms


def _is_int(e: Expr) -> bool:
    return e.dtype in ("int32", "int64")


def to_linear(e: Expr) -> Linear:
    """Linear form of an integer expression; non-affine parts become opaque terms."""
    if isinstance(e, Const) and _is_int(e):
        return Linear({}, int(e.value))
    if isinstance(e, Binary) and _is_int(e):
        if e.op == "add":
            return to_linear(e.a).add(to_linear(e.b))
        if e.op == "sub":
            return to_linear(e.a).add(to_linear(e.b), -1)
        if e.op == "mul":
            la, lb = to_linear(e.a), to_linear(e.b)
            if la.is_const:
                return lb.scale(la.const)
            if lb.is_const:
                return la.scale(lb.const)
    if isinstance(e, Binary) and e.op in ("floordiv", "mod") and _is_int(e):
        e = rebuild(e, [simplify(e.a), simplify(e.b)])
        la, lb = to_linear(e.a), to_linear(e.b)
        if la.is_const and lb.is_const and lb.const != 0:
            return Linear({}, la.const // lb.const if e.op == "floordiv" else la.const % lb.const)
    return Linear({_key(e): (1, e)}, 0)


def from_linear(lin: Linear, dtype: str = "int32") -> Expr:
    out: Expr | None = None
    pos = [(c, t) for c, t in lin.terms.values() if c > 0]
    neg = [(c, t) for c, t in lin.terms.values() if c < 0]
    if not pos and neg and lin.const > 0:  # `17 - i*4`, not `0 - i*4 + 17`
        out, lin = Const(lin.const, dtype), Linear(lin.terms, 0)
    for c, t in pos + neg:
        term = t if abs(c) == 1 else Binary("mul", t, Const(abs(c), dtype), dtype)
        if out is None:
            out = term if c > 0 else Binary("sub", Const(0, dtype), term, dtype)
        else:
            out = Binary("add" if c > 0 else "sub", out, term, dtype)
    if out is None:
        return Const(lin.const, dtype)
    if lin.const > 0:
        out = Binary("add", out, Const(lin.const, dtype), dtype)
    elif lin.const < 0:
        out = Binary("sub", out, Const(-lin.const, dtype), dtype)
    return out


def simplify(e: Expr) -> Expr:
    """Constant folding, linear canonicalization of integer arithmetic, trivial div/mod removal."""
    if isinstance(e, Const | Var):
        return e
    if isinstance(e, Binary) and _is_int(e) and e.op in ("add", "sub", "mul"):
        lin = to_linear(e)
        lin = Linear({k: (c, _simplify_opaque(t)) for k, (c, t) in lin.terms.items()}, lin.const)
        return from_linear(lin, e.dtype)
    kids = [simplify(k) for k in children(e)]
    e2 = rebuild(e, kids) if kids else e
    if isinstance(e2, Binary) and _is_int(e2):
        la, lb = to_linear(e2.a), to_linear(e2.b)
        if e2.op in ("floordiv", "mod") and lb.is_const and lb.const == 1:
            return e2.a if e2.op == "floordiv" else Const(0, e2.dtype)
        if la.is_const and lb.is_const:
            return Const(_fold(e2.op, la.const, lb.const), e2.dtype)
        if e2.op in ("min", "max") and la.add(lb, -1).is_const:
            d = la.add(lb, -1).const
            return (e2.a if d <= 0 else e2.b) if e2.op == "min" else (e2.a if d >= 0 else e2.b)
    if isinstance(e2, Binary) and e2.dtype == "bool" and _is_int(e2.a) and _is_int(e2.b) and \
            e2.op in ("lt", "le", "gt", "ge", "eq", "ne"):
        d = to_linear(e2.a).add(to_linear(e2.b), -1)
        if d.is_const:
            v = {"lt": d.const < 0, "le": d.const <= 0, "gt": d.const > 0, "ge": d.const >= 0,
                 "eq": d.const == 0, "ne": d.const != 0}[e2.op]
            return Const(v, "bool")
    if isinstance(e2, Cast) and isinstance(e2.value, Const) and _is_int(e2) and _is_int(e2.value):
        return Const(int(e2.value.value), e2.dtype)
    return e2


def _simplify_opaque(t: Expr) -> Expr:
    if isinstance(t, Var):
        return t
    kids = [simplify(k) for k in children(t)]
    return rebuild(t, kids) if kids else t


def _fold(op: str, a: int, b: int) -> int:
    if op == "floordiv":
        return a // b if b else 0
    if op == "mod":
        return a % b if b else 0
    return {"add": a + b, "sub": a - b, "mul": a * b, "min": min(a, b), "max": max(a, b)}.get(op, 0)


def const_value(e: Expr) -> int | None:
    lin = to_linear(simplify(e))
    return lin.const if lin.is_const else None


def interval(e: Expr, relaxed: dict[int, int]) -> tuple[Expr, Expr] | None:
    """[lo, hi] of integer `e` when each variable id in `relaxed` runs over [0, extent-1]; other
    variables stay symbolic. None when no sound bound is found."""
    if isinstance(e, Const):
        return e, e
    if isinstance(e, Var):
        if id(e) in relaxed:
            return Const(0, e.dtype), Const(relaxed[id(e)] - 1, e.dtype)
        return e, e
    if not _depends(e, relaxed):
        return e, e
    if isinstance(e, Binary) and _is_int(e):
        op = e.op
        if op in ("add", "sub"):
            a, b = interval(e.a, relaxed), interval(e.b, relaxed)
            if a is None or b is None:
                return None
            if op == "add":
                return _b("add", a[0], b[0]), _b("add", a[1], b[1])
            return _b("sub", a[0], b[1]), _b("sub", a[1], b[0])
        if op == "mul":
            cb = const_value(e.b)
            ca = const_value(e.a)
            if cb is None and ca is not None:
                return interval(Binary("mul", e.b, e.a, e.dtype), relaxed)
            if cb is None:
                return None
            a = interval(e.a, relaxed)
            if a is None:
                return None
            lo, hi = _b("mul", a[0], Const(cb, e.dtype)), _b("mul", a[1], Const(cb, e.dtype))
            return (lo, hi) if cb >= 0 else (hi, lo)
        if op == "floordiv":
            cb = const_value(e.b)
            a = interval(e.a, relaxed)
            if cb is None or cb <= 0 or a is None:
                return None
            return _b("floordiv", a[0], Const(cb, e.dtype)), _b("floordiv", a[1], Const(cb, e.dtype))
        if op == "mod":
            cb = const_value(e.b)
            if cb is None or cb <= 0:
                return None
            return Const(0, e.dtype), Const(cb - 1, e.dtype)
        if op in ("min", "max"):
            a, b = interval(e.a, relaxed), interval(e.b, relaxed)
            if a is None or b is None:
                return None
            return _b(op, a[0], b[0]), _b(op, a[1], b[1])
    return None


def _b(op: str, a: Expr, b: Expr) -> Expr:
    return simplify(Binary(op, a, b, "int64" if "int64" in (a.dtype, b.dtype) else "int32"))


def _depends(e: Expr, relaxed: dict[int, int]) -> bool:
    return any(isinstance(n, Var) and id(n) in relaxed for n in walk(e))


def numeric_range(e: Expr, ranges: dict[int, int]) -> tuple[int, int] | None:
    """Numeric [lo, hi] when every variable in `e` is in `ranges` (id -> extent)."""
    iv = interval(e, ranges)
    if iv is None:
        return None
    lo, hi = const_value(iv[0]), const_value(iv[1])
    if lo is None or hi is None:
        return None
    return lo, hi


def uses_only(e: Expr, var_ids: set[int]) -> bool:
    return all(id(n) in var_ids for n in walk(e) if isinstance(n, Var))


def union_bounds(los: list, his: list) -> tuple[Expr | None, Expr | None]:
    """The union [min lo, max hi] of intervals whose ends differ by constants; (None, None) if unknown."""
    if not los or any(x is None for x in los):
        return None, None
    lo, hi = los[0], his[0]
    for a, b in zip(los[1:], his[1:]):
        d = const_value(Binary("sub", a, lo, "int32"))
        if d is None:
            return None, None
        lo = a if d < 0 else lo
        d = const_value(Binary("sub", b, hi, "int32"))
        if d is None:
            return None, None
        hi = b if d > 0 else hi
    return lo, hi


def as_loop_bound(g: Expr, var: Var) -> Expr | None:
    """`var + rest < n` with coefficient 1 on `var` becomes the loop bound `n - rest`."""
    if not (isinstance(g, Binary) and g.op == "lt"):
        return None
    lin = to_linear(simplify(Binary("sub", g.a, g.b, "int32")))
    key = ("v", id(var))
    if key not in lin.terms or lin.terms[key][0] != 1:
        return None
    rest = Linear({k: v for k, v in lin.terms.items() if k != key}, lin.const)
    if any(isinstance(n, Var) and n is var for _, t in rest.terms.values() for n in walk(t)):
        return None
    return simplify(Binary("sub", Const(0, "int32"), from_linear(rest), "int32"))


__all__ = ["Linear", "to_linear", "from_linear", "simplify", "interval", "numeric_range", "const_value",
           "uses_only", "union_bounds", "as_loop_bound", "Call", "Select"]
