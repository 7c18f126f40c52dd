"""Every tensor read of a compute is proven inside its tensor when the compute is defined.

Rule: for each read `T[e0, e1, ...]` in a compute's body, each index `ed` must lie in
[0, T.shape[d] - 1] for every value of the compute's axes and reduce axes (each runs over
[0, extent - 1]). Ranges come from `autosched.te.interval`: exact for affine indices, interval
arithmetic for `//`, `%`, `min`/`max` and products. The one way to read outside that range is a
guard: inside `te.if_then_else(cond, t, f)` (and a reduction's `where=`) only the chosen branch
runs, so `t` is checked assuming `cond` and `f` assuming its negation. Comparisons between
integer expressions (`i >= 1`, `h < H + top`, `i + j < n`), joined with `&`/`te.all`, `|`/`te.any`
and `~`, narrow the compared combination of axes; a condition on floats narrows nothing.

Data-dependent indices (an integer value read from a tensor: gather) are allowed only when a
guard bounds them (`te.if_then_else(te.all(idx[i] >= 0, idx[i] < n), A[idx[i]], 0)`); otherwise
their range is the whole dtype and the read is refused. Index arithmetic that can overflow its
dtype is refused too. What cannot be proven is refused with `ReadOutOfBoundsError`, naming the
compute, the read, the index, its range and the tensor's extent.
"""

from __future__ import annotations

from collections.abc import Sequence

from autosched.te.expr import Expr, IterVar, Reduce, Select, TensorRead, children, walk
from autosched.te.interval import Facts, IndexOverflow, Infeasible, assume, axis_facts, hull, int_range
from autosched.te.text import expr_text

MAX_CONTEXTS = 256  # alternatives kept apart under nested guards before they are merged (soundly)
_HINT = "guard the read with te.if_then_else(cond, read, value) whose condition bounds the index"


class ReadOutOfBoundsError(ValueError):
    """A compute reads (or may read) outside a tensor it reads."""


def check_reads(name: str, body: Expr, axis: Sequence[IterVar]) -> None:
    """Refuse `body` (the body of compute `name` over `axis`) if any read can leave its tensor."""
    axes = list(axis) + (list(body.axes) if isinstance(body, Reduce) else [])
    facts = axis_facts(axes, [a.extent for a in axes])
    src = body.source if isinstance(body, Reduce) else body
    _Checker(name).visit(src, (facts,))


class _Checker:
    def __init__(self, name: str) -> None:
        self.name = name
        self.seen: set[tuple[int, int]] = set()  # (node, context): shared subtrees are checked once
        self.keep: list[tuple[Facts, ...]] = []  # contexts stay alive so their ids stay unique

    def visit(self, e: Expr, ctx: tuple[Facts, ...]) -> None:
        mark = (id(e), id(ctx))
        if mark in self.seen:
            return
        self.seen.add(mark)
        if isinstance(e, Select):
            self.visit(e.cond, ctx)
            self.visit(e.t, self._under(e.cond, True, ctx))
            self.visit(e.f, self._under(e.cond, False, ctx))
            return
        if isinstance(e, TensorRead):
            for d, ie in enumerate(e.indices):
                self.visit(ie, ctx)
                self._check_index(e, d, ctx)
            return
        for c in children(e):
            self.visit(c, ctx)

    def _under(self, cond: Expr, positive: bool, ctx: tuple[Facts, ...]) -> tuple[Facts, ...]:
        out: list[Facts] = []
        for facts in ctx:
            out.extend(assume(cond, positive, facts))
        if len(out) > MAX_CONTEXTS:
            out = [hull(out)]
        new = tuple(out)
        self.keep.append(new)
        return new

    def _check_index(self, read: TensorRead, d: int, ctx: tuple[Facts, ...]) -> None:
        ie, extent = read.indices[d], read.tensor.shape[d]
        lo: int | None = None
        hi: int | None = None
        for facts in ctx:
            try:
                r = int_range(ie, facts)
            except Infeasible:
                continue
            except IndexOverflow as exc:
                raise ReadOutOfBoundsError(
                    f"{self._where(read)}: index {d} ({expr_text(ie)}): {expr_text(exc.term)} ranges over "
                    f"[{exc.range[0]}, {exc.range[1]}], which overflows {exc.term.dtype}; "
                    f"compute the index in int64 (te.cast) or {_HINT}") from None
            lo = r[0] if lo is None else min(lo, r[0])
            hi = r[1] if hi is None else max(hi, r[1])
        if lo is None or hi is None or (0 <= lo and hi < extent):
            return  # unreachable, or inside
        gathered = sorted({n.tensor.name for n in walk(ie) if isinstance(n, TensorRead)})
        why = (f"; it depends on values read from {', '.join(gathered)} (a data-dependent index), "
               "which only a guard can bound") if gathered else ""
        raise ReadOutOfBoundsError(
            f"{self._where(read)}: index {d} ranges over [{lo}, {hi}], outside [0, {extent - 1}]{why}; "
            f"{_HINT}, e.g. te.if_then_else(te.all({expr_text(ie)} >= 0, {expr_text(ie)} < {extent}), ...)")

    def _where(self, read: TensorRead) -> str:
        return f'compute "{self.name}": read {expr_text(read)}'
