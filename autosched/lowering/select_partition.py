"""Partitioning on guarded reads: split a loop where the conditions of its `Select`s are settled.

Why: a padded input (`pad[y, x] = inside ? data[y - 1, x - 1] : 0`) or a convolution that reads its
input through a bounds check tests the condition at every element, and gcc leaves such a loop
scalar: the read may not be executed where the condition fails. Over most of the loop the condition
is known: `x >= 1` fails only at the first column, `x < w + 1` only at the last. Splitting the loop
at those points gives a head and a tail that write the fill value and a middle whose reads are plain
loads, which vectorize (TVM's LoopPartition does this for padding). See
docs/decisions/padded-input-loops.md.

Only conjuncts that are integer comparisons are used, and a segment's `Select`s are folded only where
`loop_partition`'s range proofs settle them; the rest keep their test, so results never change.
"""

from __future__ import annotations

from autosched.lowering.ir import Allocate, For, IfThen, Seq, Stmt, Store, seq
from autosched.lowering.loop_partition import inner_ranges, proven
from autosched.lowering.stage_info import conjunction, conjuncts
from autosched.lowering.visitors import fresh_vars, iter_expr, map_expr, map_stmt, substitute_stmt
from autosched.te.expr import Binary, Const, Expr, Select, Var

MAX_SEGMENTS = 5
"""Pieces one loop is cut into at most (head, middle and tail for a window on each side)."""
MAX_SPLIT_LOOPS = 4
"""Loops split per kernel at most: each piece copies the loop's body."""

_NEGATED = {"lt": "ge", "ge": "lt", "le": "gt", "gt": "le"}
_PARTITIONED_KINDS = ("serial", "vectorized")


def _negation(c: Expr) -> Expr | None:
    if isinstance(c, Binary) and c.op in _NEGATED:
        return Binary(_NEGATED[c.op], c.a, c.b, c.dtype)
    return None


def _shifted(e: Expr, var: Var, w: Var, start: int) -> Expr:
    repl = Binary("add", w, Const(start, w.dtype), w.dtype) if start else w
    return map_expr(e, lambda x: repl if x is var else None)


def _settled(c: Expr, var: Var, start: int, stop: int, ranges: dict[int, int]) -> bool | None:
    """True (False) when conjunct `c` provably holds (fails) for every `var` in [start, stop)."""
    if stop <= start:
        return None
    w = Var(var.name, var.dtype)
    around = {**ranges, id(w): stop - start}
    if proven(_shifted(c, var, w, start), around):
        return True
    neg = _negation(c)
    if neg is not None and proven(_shifted(neg, var, w, start), around):
        return False
    return None


def _select_conjuncts(s: Stmt, var: Var, ranges: dict[int, int], out: list[tuple[Expr, dict[int, int]]]) -> None:
    """The comparison conjuncts of `Select` conditions in `s` that mention `var`, each with the loop
    ranges around it (loops inside ranged over all their values)."""
    if isinstance(s, Seq):
        for x in s.stmts:
            _select_conjuncts(x, var, ranges, out)
    elif isinstance(s, For):
        _select_conjuncts(s.body, var, inner_ranges(s.var, s.extent, ranges), out)
    elif isinstance(s, IfThen | Allocate):
        _select_conjuncts(s.body, var, ranges, out)
    elif isinstance(s, Store):
        for e in (s.value, *s.indices):
            for x in iter_expr(e):
                if isinstance(x, Select):
                    out.extend((c, ranges) for c in conjuncts(x.cond)
                               if getattr(c, "op", None) in _NEGATED and any(n is var for n in iter_expr(c)))


def _cut_points(loop: For, n: int, ranges: dict[int, int]) -> list[int]:
    """Where some conjunct changes from settled to unsettled: the ends of its longest settled prefix
    and suffix (a comparison linear in the loop variable is monotone in it)."""
    items: list[tuple[Expr, dict[int, int]]] = []
    _select_conjuncts(loop.body, loop.var, ranges, items)
    cuts: set[int] = set()
    for c, around in items:
        for want in (True, False):
            lo, hi = 0, n  # longest prefix [0, p) settled to `want`
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if _settled(c, loop.var, 0, mid, around) is want:
                    lo = mid
                else:
                    hi = mid - 1
            cuts.add(lo)
            lo, hi = 0, n  # shortest suffix start q with [q, n) settled to `want`
            while lo < hi:
                mid = (lo + hi) // 2
                if _settled(c, loop.var, mid, n, around) is want:
                    hi = mid
                else:
                    lo = mid + 1
            cuts.add(lo)
    return sorted(p for p in cuts if 0 < p < n)


def _fold_selects(s: Stmt, ranges: dict[int, int]) -> Stmt:
    """`s` with each `Select` whose condition is settled under `ranges` replaced by its branch."""
    def fold(x: Expr) -> Expr | None:
        if not isinstance(x, Select):
            return None
        conds = conjuncts(x.cond)
        rest = []
        for c in conds:
            if proven(c, ranges):
                continue
            neg = _negation(c)
            if neg is not None and proven(neg, ranges):
                return x.f
            rest.append(c)
        if not rest:
            return x.t
        return Select(conjunction(rest), x.t, x.f, x.dtype) if len(rest) < len(conds) else None

    if isinstance(s, Seq):
        return seq([_fold_selects(x, ranges) for x in s.stmts])
    if isinstance(s, For):
        return For(s.var, s.extent, s.kind, _fold_selects(s.body, inner_ranges(s.var, s.extent, ranges)),
                   s.loop_name, s.stage, s.unroll, s.thread_tag, s.streaming)
    if isinstance(s, IfThen):
        return IfThen(s.cond, _fold_selects(s.body, ranges))
    if isinstance(s, Allocate):
        return Allocate(s.buffer, _fold_selects(s.body, ranges))
    if isinstance(s, Store):
        return map_stmt(s, lambda e: map_expr(e, fold))
    return s


def _has_guarded_read(s: Stmt) -> bool:
    if isinstance(s, Seq):
        return any(_has_guarded_read(x) for x in s.stmts)
    if isinstance(s, For | IfThen | Allocate):
        return _has_guarded_read(s.body)
    if isinstance(s, Store):
        return any(isinstance(x, Select) for e in (s.value, *s.indices) for x in iter_expr(e))
    return False


class _SelectPartitioner:
    def __init__(self, budget: int) -> None:
        self.budget = budget

    def run(self, s: Stmt, ranges: dict[int, int]) -> Stmt:
        if isinstance(s, Seq):
            return seq([self.run(x, ranges) for x in s.stmts])
        if isinstance(s, IfThen):
            return IfThen(s.cond, self.run(s.body, ranges))
        if isinstance(s, Allocate):
            return Allocate(s.buffer, self.run(s.body, ranges))
        if not isinstance(s, For) or not _has_guarded_read(s):
            return s
        n = s.extent.value if isinstance(s.extent, Const) else None
        if isinstance(n, int) and n >= 2 and s.kind in _PARTITIONED_KINDS and self.budget > 0:
            cuts = _cut_points(s, n, ranges)
            if cuts and len(cuts) < MAX_SEGMENTS:
                self.budget -= 1
                return self._split(s, [0, *cuts, n], ranges)
        return For(s.var, s.extent, s.kind, self.run(s.body, inner_ranges(s.var, s.extent, ranges)),
                   s.loop_name, s.stage, s.unroll, s.thread_tag, s.streaming)

    def _split(self, s: For, bounds: list[int], ranges: dict[int, int]) -> Stmt:
        parts: list[Stmt] = []
        for a, b in zip(bounds, bounds[1:]):
            if b - a == 1:
                body = fresh_vars(substitute_stmt(s.body, {s.var: Const(a, s.var.dtype)}))
                parts.append(self.run(_fold_selects(body, ranges), ranges))
                continue
            w = Var(s.var.name, s.var.dtype)
            shift = Binary("add", w, Const(a, w.dtype), w.dtype) if a else w
            body = fresh_vars(substitute_stmt(s.body, {s.var: shift}))
            inner = {**ranges, id(w): b - a}
            parts.append(For(w, Const(b - a, w.dtype), s.kind, self.run(_fold_selects(body, inner), inner),
                             s.loop_name, s.stage, s.unroll, s.thread_tag, s.streaming))
        return Seq(parts)


def partition_selects(s: Stmt, max_loops: int = MAX_SPLIT_LOOPS) -> Stmt:
    """`s` with loops split where their guarded reads' conditions are settled (module docstring)."""
    return _SelectPartitioner(max_loops).run(s, {})
