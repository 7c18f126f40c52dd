"""Numeric ranges of integer index expressions, and what a condition tells about them.

The read-bounds check (`autosched.te.read_bounds`) asks: over every value of a compute's axes,
where can this index land? Expressions are first put in affine form (`2*i + r - 1`), whose range
is exact for independent variables; anything else (`//`, `%`, `min`, products of variables, a
value read from a tensor) is an opaque term bounded by interval arithmetic on its tree.

A guard narrows ranges: `facts` maps a normalized affine combination of terms (a lone variable
is the common case) to bounds proven by an enclosing condition, so inside
`if_then_else(i >= 1, A[i - 1], 0)` the read sees i in [1, n-1]. Conditions become a short list
of alternatives (a disjunction of conjunctions of comparisons); a comparison that is not between
integers, or a condition too large to split, narrows nothing, which is always sound.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import gcd

from autosched.te.expr import Binary, Call, Cast, Const, Expr, Select, TensorRead, Var, children

Range = tuple[int, int]
Bound = tuple[int | None, int | None]  # a fact: None is an open end
Facts = dict[tuple, Bound]

INT_LIMITS: dict[str, Range] = {"int32": (-(2 ** 31), 2 ** 31 - 1), "int64": (-(2 ** 63), 2 ** 63 - 1)}
MAX_ALTERNATIVES = 64
_NEGATE = {"lt": "ge", "ge": "lt", "le": "gt", "gt": "le", "eq": "ne", "ne": "eq"}


class Infeasible(Exception):
    """The facts contradict each other: no iteration reaches this point, so nothing there can fail."""


class IndexOverflow(ValueError):
    """An integer sub-expression can leave its dtype's range (C would wrap or worse)."""

    def __init__(self, term: Expr, rng: Range) -> None:
        super().__init__(term.dtype)
        self.term, self.range = term, rng


def is_int(e: Expr) -> bool:
    return e.dtype in INT_LIMITS


def key(e: Expr) -> tuple:
    """Structural identity of a term: equal subtrees (variables by identity) are one term."""
    if isinstance(e, Const):
        return ("c", e.value, e.dtype)
    if isinstance(e, Var):
        return ("v", id(e))
    if isinstance(e, TensorRead):
        return ("rd", id(e.tensor)) + tuple(key(i) for i in e.indices)
    tag = (type(e).__name__, getattr(e, "op", None) or getattr(e, "func", None), e.dtype)
    return tag + tuple(key(c) for c in children(e))


@dataclass(frozen=True)
class Affine:
    """sum(coeff * term) + const; terms by `key`, each with one representative expression."""

    terms: dict[tuple, tuple[int, Expr]]
    const: int

    def plus(self, o: Affine, sign: int = 1) -> Affine:
        terms = dict(self.terms)
        for k, (c, t) in o.terms.items():
            nc = terms.get(k, (0, t))[0] + sign * c
            if nc:
                terms[k] = (nc, t)
            else:
                terms.pop(k, None)
        return Affine(terms, self.const + sign * o.const)

    def scale(self, s: int) -> Affine:
        if s == 0:
            return Affine({}, 0)
        return Affine({k: (c * s, t) for k, (c, t) in self.terms.items()}, self.const * s)


def affine(e: Expr) -> Affine:
    """Affine form of an integer expression; non-affine parts become opaque terms."""
    if isinstance(e, Const) and is_int(e):
        return Affine({}, int(e.value))
    if isinstance(e, Binary) and is_int(e) and e.op in ("add", "sub", "mul"):
        a, b = affine(e.a), affine(e.b)
        if e.op != "mul":
            return a.plus(b, 1 if e.op == "add" else -1)
        if not a.terms:
            return b.scale(a.const)
        if not b.terms:
            return a.scale(b.const)
    if isinstance(e, Call) and e.func == "neg" and is_int(e):
        return affine(e.args[0]).scale(-1)
    return Affine({key(e): (1, e)}, 0)


def normalized(terms: dict[tuple, tuple[int, Expr]]) -> tuple[tuple, int]:
    """(fact key, m): the combination equals m * (the normalized combination the key names)."""
    items = sorted(((repr(k), c) for k, (c, _) in terms.items()))
    g = 0
    for _, c in items:
        g = gcd(g, c)
    m = g if items[0][1] > 0 else -g
    return ("lin",) + tuple((k, c // m) for k, c in items), m


def _scaled(r: Range, m: int) -> Range:
    return (r[0] * m, r[1] * m) if m >= 0 else (r[1] * m, r[0] * m)


def _meet(r: Range, b: Bound | None) -> Range:
    if b is None:
        return r
    lo = r[0] if b[0] is None else max(r[0], b[0])
    hi = r[1] if b[1] is None else min(r[1], b[1])
    if lo > hi:
        raise Infeasible
    return lo, hi


def _fact_range(lin: Affine, facts: Facts, natural: Range) -> Range:
    """`natural` narrowed by what a guard proved about the same combination of terms."""
    k, m = normalized(lin.terms)
    b = facts.get(k)
    if b is None:
        return natural
    lo, hi = b
    if m < 0:
        lo, hi = (None if hi is None else hi * m), (None if lo is None else lo * m)
    else:
        lo, hi = (None if lo is None else lo * m), (None if hi is None else hi * m)
    c = lin.const
    return _meet(natural, (None if lo is None else lo + c, None if hi is None else hi + c))


def int_range(e: Expr, facts: Facts) -> Range:
    """[lo, hi] of integer `e` under `facts`. Raises Infeasible when the facts contradict each
    other and IndexOverflow when a term can leave its dtype's range."""
    lin = affine(e)
    lo = hi = lin.const
    for c, t in lin.terms.values():
        tl, th = _scaled(_term_range(t, facts), c)
        lo, hi = lo + tl, hi + th
    if len(lin.terms) > 1 or (lin.terms and next(iter(lin.terms.values()))[0] != 1):
        lo, hi = _fact_range(lin, facts, (lo, hi))
    limits = INT_LIMITS.get(e.dtype)
    # a bare axis is a loop variable, whose type is the loop's business, not the index's
    if limits is not None and not isinstance(e, Var) and (lo < limits[0] or hi > limits[1]):
        raise IndexOverflow(e, (lo, hi))
    return lo, hi


def _term_range(t: Expr, facts: Facts) -> Range:
    natural = _natural_range(t, facts)
    return _meet(natural, facts.get(normalized({key(t): (1, t)})[0]))


def _corners(vals: list[int]) -> Range:
    return min(vals), max(vals)


def _natural_range(t: Expr, facts: Facts) -> Range:
    if isinstance(t, Var):
        return INT_LIMITS["int64"]  # an axis: its range is a fact
    limits = INT_LIMITS.get(t.dtype, INT_LIMITS["int64"])
    if isinstance(t, Binary) and is_int(t) and t.op in ("mul", "floordiv", "mod", "min", "max"):
        a, b = int_range(t.a, facts), int_range(t.b, facts)
        if t.op == "mul":
            return _corners([x * y for x in a for y in b])
        if t.op in ("min", "max"):
            f = min if t.op == "min" else max
            return f(a[0], b[0]), f(a[1], b[1])
        if b[0] <= 0 <= b[1]:
            return limits  # a divisor that can be 0: nothing is known
        if t.op == "floordiv":
            return _corners([x // y for x in a for y in b])
        if b[0] == b[1] and a[1] - a[0] < abs(b[0]) and a[0] % b[0] <= a[1] % b[0]:
            return a[0] % b[0], a[1] % b[0]  # no wrap-around inside the range
        if b[0] > 0:
            return (0, min(a[1], b[1] - 1)) if a[0] >= 0 else (0, b[1] - 1)
        return b[0] + 1, 0  # floored modulo by a negative divisor
    if isinstance(t, Call) and is_int(t) and t.func == "abs":
        lo, hi = int_range(t.args[0], facts)
        return (lo, hi) if lo >= 0 else (-hi, -lo) if hi <= 0 else (0, max(-lo, hi))
    if isinstance(t, Cast) and is_int(t):
        if t.value.dtype == "bool":
            return 0, 1
        if is_int(t.value):
            lo, hi = int_range(t.value, facts)
            # a narrowing cast of a wider range wraps: then only the dtype bounds it
            return (lo, hi) if limits[0] <= lo and hi <= limits[1] else limits
        return limits
    if isinstance(t, Select) and is_int(t):
        parts = []
        for branch, positive in ((t.t, True), (t.f, False)):
            for alt in assume(t.cond, positive, facts):
                try:
                    parts.append(int_range(branch, alt))
                except Infeasible:
                    pass
        if not parts:
            raise Infeasible
        return min(p[0] for p in parts), max(p[1] for p in parts)
    return limits  # a value read from a tensor, pow, a float cast to an int, ...


# ---- conditions --------------------------------------------------------------------------------


def _atoms(cond: Expr, positive: bool) -> list[list[tuple[Binary, bool]]] | None:
    """Disjunction of conjunctions of (comparison, holds) equivalent to `cond` (or its negation);
    [] is false, [[]] is true, None when it cannot be split within MAX_ALTERNATIVES."""
    if isinstance(cond, Const) and cond.dtype == "bool":
        return [[]] if bool(cond.value) == positive else []
    if isinstance(cond, Call) and cond.func == "not":
        return _atoms(cond.args[0], not positive)
    if isinstance(cond, Binary) and cond.op in ("and", "or"):
        a, b = _atoms(cond.a, positive), _atoms(cond.b, positive)
        if a is None or b is None:
            return None
        if (cond.op == "and") == positive:  # a conjunction
            out = [x + y for x in a for y in b]
        else:
            out = a + b
        return out if len(out) <= MAX_ALTERNATIVES else None
    if isinstance(cond, Binary) and cond.op in _NEGATE and is_int(cond.a) and is_int(cond.b):
        return [[(cond, positive)]]
    return [[]]  # a float comparison, a bool cast, ...: no information, which is sound


def narrow(facts: Facts, cmp: Binary, holds: bool) -> Facts:
    """`facts` plus what `cmp` (or its negation) proves about its one combination of terms."""
    op = cmp.op if holds else _NEGATE[cmp.op]
    d = affine(cmp.a).plus(affine(cmp.b), -1)  # d op 0
    if not d.terms:
        ok = {"lt": d.const < 0, "le": d.const <= 0, "gt": d.const > 0, "ge": d.const >= 0,
              "eq": d.const == 0, "ne": d.const != 0}[op]
        if not ok:
            raise Infeasible
        return facts
    if op == "ne":
        return facts
    k, m = normalized(d.terms)
    c = d.const
    # m*N + c op 0 bounds N
    lo: int | None = None
    hi: int | None = None
    if op in ("le", "lt", "eq"):  # m*N <= r
        r = -c - (1 if op == "lt" else 0)
        lo, hi = (None, r // m) if m > 0 else (-(-r // m), None)
    if op in ("ge", "gt", "eq"):  # m*N >= r
        r = -c + (1 if op == "gt" else 0)
        lo2, hi2 = (-(-r // m), None) if m > 0 else (None, r // m)
        lo = lo2 if lo is None else (lo if lo2 is None else max(lo, lo2))
        hi = hi2 if hi is None else (hi if hi2 is None else min(hi, hi2))
    old = facts.get(k, (None, None))
    lo = old[0] if lo is None else (lo if old[0] is None else max(lo, old[0]))
    hi = old[1] if hi is None else (hi if old[1] is None else min(hi, old[1]))
    if lo is not None and hi is not None and lo > hi:
        raise Infeasible
    out = dict(facts)
    out[k] = (lo, hi)
    return out


def assume(cond: Expr, positive: bool, facts: Facts) -> list[Facts]:
    """The fact sets under which `cond` is `positive`; contradictory alternatives are dropped."""
    alts = _atoms(cond, positive)
    if alts is None:
        return [facts]
    out = []
    for conj in alts:
        f = facts
        try:
            for cmp, holds in conj:
                f = narrow(f, cmp, holds)
        except Infeasible:
            continue
        out.append(f)
    return out


def hull(alternatives: list[Facts]) -> Facts:
    """One fact set implied by every alternative (bounds known in all of them, widened)."""
    first, rest = alternatives[0], alternatives[1:]
    out: Facts = {}
    for k, (lo, hi) in first.items():
        for f in rest:
            if k not in f:
                break
            lo2, hi2 = f[k]
            lo = None if lo is None or lo2 is None else min(lo, lo2)
            hi = None if hi is None or hi2 is None else max(hi, hi2)
        else:
            out[k] = (lo, hi)
    return out


def axis_facts(axes: list[Var], extents: list[int]) -> Facts:
    """Each axis variable runs over [0, extent - 1]."""
    return {normalized({key(v): (1, v)})[0]: (0, n - 1) for v, n in zip(axes, extents)}
