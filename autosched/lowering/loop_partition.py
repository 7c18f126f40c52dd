"""Loop partitioning: peel the last iterations of a loop whose inner extents and guards bind only there.

Why: a split whose factor does not divide the extent (rows of 1024 in register tiles of 6) lowers to
inner loops of extent `min(6, 1024 - i_outer * 6)` and guards `i < 1024`. Such a loop has no constant
trip count, so the register tile cannot be unrolled into named vector variables and every iteration
pays for the tail of one. Splitting `i_outer` into a main loop over the iterations where every such
bound provably holds (its `min`s fold to constants and its guards vanish) and a tail loop for the rest
gives the main loop the code of a dividing split; only the tail keeps the guards. This is TVM's
`LoopPartition`. Without it 6x16, the tile that fits AVX2's 16 vector registers, is unusable on sizes
it does not divide (see docs/decisions/loop-partitioning.md).

Proofs use `arith.numeric_range` over loop ranges (a variable of extent n runs over [0, n-1]); what
cannot be proven is left as it was, so the pass never changes results, only which iterations test.
"""

from __future__ import annotations

from autosched.lowering import arith
from autosched.lowering.ir import Allocate, For, IfThen, Seq, Stmt, Store, seq
from autosched.lowering.stage_info import conjunction, conjuncts
from autosched.lowering.visitors import fresh_vars, iter_expr, map_expr, map_stmt, substitute_stmt
from autosched.te.expr import Binary, Const, Expr, Var

MAX_PARTITIONS = 6
"""Loops partitioned per kernel at most: each partition copies the loop's body once (nested tails of
rows and columns make four copies with three partitions)."""

_PARTITIONED_KINDS = ("serial", "parallel")
_COMPARISONS = {"lt", "le", "gt", "ge"}


def _is_int(e: Expr) -> bool:
    return e.dtype.startswith(("int", "uint"))


def _difference_range(a: Expr, b: Expr, ranges: dict[int, int]) -> tuple[int, int] | None:
    return arith.numeric_range(Binary("sub", a, b, "int64" if "int64" in (a.dtype, b.dtype) else "int32"), ranges)


def proven(cond: Expr, ranges: dict[int, int]) -> bool:
    """True when the integer comparison `cond` holds for every value of the ranged variables."""
    if not (isinstance(cond, Binary) and cond.op in _COMPARISONS and _is_int(cond.a) and _is_int(cond.b)):
        return False
    r = _difference_range(cond.a, cond.b, ranges)
    if r is None:
        return False
    lo, hi = r
    return {"lt": hi < 0, "le": hi <= 0, "gt": lo > 0, "ge": lo >= 0}[cond.op]


def _chosen_side(x: Binary, ranges: dict[int, int]) -> Expr | None:
    """The operand an integer `min`/`max` provably picks under `ranges`, None when unproven."""
    r = _difference_range(x.a, x.b, ranges)
    if r is None or not (r[1] <= 0 or r[0] >= 0):
        return None
    a_smaller = r[1] <= 0
    return x.a if a_smaller == (x.op == "min") else x.b


def _is_int_min_max(x: Expr) -> bool:
    return isinstance(x, Binary) and x.op in ("min", "max") and _is_int(x)


def _fold_node(x: Expr, ranges: dict[int, int]) -> Expr | None:
    if _is_int_min_max(x):
        return _chosen_side(x, ranges)
    if isinstance(x, Binary) and x.op in ("floordiv", "mod") and _is_int(x):
        # a fused loop's coordinate that is one value over the whole partition (the tail's block index)
        r = arith.numeric_range(x, ranges)
        if r is not None and r[0] == r[1]:
            return Const(r[0], x.dtype)
    return None


def _fold_expr(e: Expr, ranges: dict[int, int]) -> Expr:
    """Integer `min`/`max` whose order is proven become the chosen side, and integer divisions and
    remainders that take one value under `ranges` become that value."""
    out = map_expr(e, lambda x: _fold_node(x, ranges))
    return arith.simplify(out) if out is not e and _is_int(out) else out


def inner_ranges(var: Var, extent: Expr, ranges: dict[int, int]) -> dict[int, int]:
    """`ranges` plus the loop variable `var` over `extent`, when the extent has a numeric bound."""
    r = arith.numeric_range(extent, ranges)
    return ranges if r is None or r[1] < 1 else {**ranges, id(var): r[1]}


def fold(s: Stmt, ranges: dict[int, int]) -> Stmt:
    """A copy of `s` with proven `min`s folded and proven guard conjuncts dropped."""
    if isinstance(s, Seq):
        return seq([fold(x, ranges) for x in s.stmts])
    if isinstance(s, For):
        extent = _fold_expr(s.extent, ranges)
        return For(s.var, extent, s.kind, fold(s.body, inner_ranges(s.var, extent, ranges)), s.loop_name,
                   s.stage, s.unroll, s.thread_tag, s.streaming)
    if isinstance(s, IfThen):
        body = fold(s.body, ranges)
        rest = [c for c in conjuncts(s.cond) if not proven(c, ranges)]
        return IfThen(conjunction(rest), body) if rest else body
    if isinstance(s, Allocate):
        return Allocate(s.buffer, fold(s.body, ranges))
    if isinstance(s, Store):
        return map_stmt(s, lambda e: _fold_expr(e, ranges))
    return s


def _mentions(e: Expr, v: Var) -> bool:
    return any(x is v for x in iter_expr(e))


def _bound_items(s: Stmt, v: Var, ranges: dict[int, int], out: list[tuple[Expr, dict[int, int]]]) -> None:
    """Collect the integer `min`/`max`s of loop extents and the guard conjuncts in `s` that mention `v`,
    each with the loop ranges around it (inner loops ranged over all of `v`'s values: a superset)."""
    if isinstance(s, Seq):
        for x in s.stmts:
            _bound_items(x, v, ranges, out)
    elif isinstance(s, For):
        out.extend((x, ranges) for x in iter_expr(s.extent) if _is_int_min_max(x) and _mentions(x, v))
        _bound_items(s.body, v, inner_ranges(s.var, _fold_expr(s.extent, ranges), ranges), out)
    elif isinstance(s, IfThen):
        out.extend((c, ranges) for c in conjuncts(s.cond) if _mentions(c, v))
        _bound_items(s.body, v, ranges, out)
    elif isinstance(s, Allocate):
        _bound_items(s.body, v, ranges, out)


def _holds(item: Expr, ranges: dict[int, int]) -> bool:
    """A `min`/`max` whose operands' order is proven, or a proven comparison."""
    if _is_int_min_max(item):
        return _chosen_side(item, ranges) is not None
    return proven(item, ranges)


def _has_bounds(s: Stmt) -> bool:
    """Whether `s` has a loop of non-constant extent or a guard: a cheap test before any proof."""
    stack = [s]
    while stack:
        x = stack.pop()
        if isinstance(x, IfThen) or (isinstance(x, For) and not isinstance(x.extent, Const)):
            return True
        if isinstance(x, Seq):
            stack.extend(x.stmts)
        elif isinstance(x, For | Allocate):
            stack.append(x.body)
    return False


class _Partitioner:
    def __init__(self, budget: int) -> None:
        self.budget = budget

    def run(self, s: Stmt, ranges: dict[int, int]) -> Stmt:
        if isinstance(s, Seq):
            return seq([self.run(x, ranges) for x in s.stmts])
        if isinstance(s, IfThen):
            return IfThen(s.cond, self.run(s.body, ranges))
        if isinstance(s, Allocate):
            return Allocate(s.buffer, self.run(s.body, ranges))
        if not isinstance(s, For) or not _has_bounds(s):
            return s
        n = arith.const_value(s.extent)
        if n is not None and n >= 2 and s.kind in _PARTITIONED_KINDS and self.budget > 0:
            split = self._split_point(s, n, ranges)
            if split is not None:
                self.budget -= 1
                return self._partition(s, n, split, ranges)
        return For(s.var, s.extent, s.kind, self.run(s.body, inner_ranges(s.var, s.extent, ranges)),
                   s.loop_name, s.stage, s.unroll, s.thread_tag, s.streaming)

    @staticmethod
    def _split_point(s: For, n: int, ranges: dict[int, int]) -> int | None:
        """The largest p < n such that, for loop variable values in [0, p), every bound that holds in
        the first iteration but not in all holds; None when there is no such bound."""
        v = id(s.var)
        items: list[tuple[Expr, dict[int, int]]] = []
        _bound_items(s.body, s.var, {**ranges, v: n}, items)
        split = None
        for item, around in items:
            if _holds(item, {**around, v: n}) or not _holds(item, {**around, v: 1}):
                continue
            lo, hi = 1, n - 1  # `item` holds over [0, lo); the largest such prefix is in [lo, hi]
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if _holds(item, {**around, v: mid}):
                    lo = mid
                else:
                    hi = mid - 1
            split = lo if split is None else min(split, lo)
        return split

    def _partition(self, s: For, n: int, p: int, ranges: dict[int, int]) -> Stmt:
        main_ranges = {**ranges, id(s.var): p}
        main_body = self.run(fold(s.body, main_ranges), main_ranges)
        main = For(s.var, Const(p, s.var.dtype), s.kind, main_body, s.loop_name, s.stage, s.unroll, s.thread_tag,
                   s.streaming)
        if n - p == 1:
            tail_body = fresh_vars(substitute_stmt(s.body, {s.var: Const(p, s.var.dtype)}))
            tail: Stmt = self.run(fold(tail_body, ranges), ranges)
        else:
            v = Var(s.var.name, s.var.dtype)
            shifted = fresh_vars(substitute_stmt(s.body, {s.var: Binary("add", v, Const(p, v.dtype), v.dtype)}))
            tail_ranges = {**ranges, id(v): n - p}
            tail = For(v, Const(n - p, v.dtype), s.kind, self.run(fold(shifted, tail_ranges), tail_ranges),
                       s.loop_name, s.stage, s.unroll, s.thread_tag, s.streaming)
        return Seq([main, tail])


def partition_loops(s: Stmt, max_partitions: int = MAX_PARTITIONS) -> Stmt:
    """`s` with loops peeled where their tails alone need bounds (see the module docstring)."""
    return _Partitioner(max_partitions).run(s, {})
