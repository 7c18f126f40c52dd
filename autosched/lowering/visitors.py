"""Generic rewriting and walking of the loop-nest IR, shared by the CPU and GPU passes."""

from __future__ import annotations

from collections.abc import Callable

from autosched.lowering.ir import Allocate, Buffer, For, IfThen, Load, Seq, Stmt, Store
from autosched.te.expr import Expr, Var, transform, walk


def map_expr(e: Expr, fn: Callable[[Expr], Expr | None]) -> Expr:
    """`transform` that also descends into the indices of `Load`s (te's walker does not know them)."""

    def inner(x: Expr) -> Expr | None:
        if isinstance(x, Load):
            x = Load(x.buffer, tuple(map_expr(i, fn) for i in x.indices))
        out = fn(x)
        return x if out is None else out

    return transform(e, inner)


def map_stmt(s: Stmt, fe: Callable[[Expr], Expr], fs: Callable[[Store], Store] | None = None,
             fvar: dict[Var, Var] | None = None) -> Stmt:
    """A copy of `s` with every expression mapped by `fe`, every store by `fs` afterwards and loop
    variables renamed by `fvar`."""
    if isinstance(s, Seq):
        return Seq([map_stmt(x, fe, fs, fvar) for x in s.stmts])
    if isinstance(s, For):
        var = fvar.get(s.var, s.var) if fvar else s.var
        return For(var, fe(s.extent), s.kind, map_stmt(s.body, fe, fs, fvar), s.loop_name, s.stage, s.unroll,
                   s.thread_tag, s.streaming)
    if isinstance(s, IfThen):
        return IfThen(fe(s.cond), map_stmt(s.body, fe, fs, fvar))
    if isinstance(s, Allocate):
        return Allocate(s.buffer, map_stmt(s.body, fe, fs, fvar))
    if isinstance(s, Store):
        st = Store(s.buffer, tuple(fe(i) for i in s.indices), fe(s.value))
        return fs(st) if fs is not None else st
    return s


def reindex(s: Stmt, buf: Buffer, f: Callable[[tuple[Expr, ...]], tuple[Expr, ...]]) -> Stmt:
    """Rewrite every access of `buf` in `s`: indices -> f(indices)."""

    def fe(e: Expr) -> Expr:
        return map_expr(e, lambda x: Load(x.buffer, f(x.indices)) if isinstance(x, Load) and x.buffer is buf
                        else None)

    def fs(st: Store) -> Store:
        return Store(buf, f(st.indices), st.value) if st.buffer is buf else st

    return map_stmt(s, fe, fs)


def substitute_stmt(s: Stmt, mapping: dict[Var, Expr]) -> Stmt:
    return map_stmt(s, lambda e: map_expr(e, lambda x: mapping.get(x) if isinstance(x, Var) else None))


def fresh_vars(s: Stmt) -> Stmt:
    """A copy of `s` whose loops define new variables (so it can be emitted twice in one C scope)."""
    mapping: dict[Var, Var] = {}
    stack = [s]
    while stack:
        x = stack.pop()
        if isinstance(x, For):
            mapping[x.var] = Var(x.var.name, x.var.dtype)
        stack.extend(getattr(x, "stmts", []))
        if hasattr(x, "body"):
            stack.append(x.body)
    return map_stmt(s, lambda e: map_expr(e, lambda x: mapping.get(x) if isinstance(x, Var) else None),
                    fvar=mapping)


def iter_expr(e: Expr):
    """Every node of `e`, the indices of its `Load`s included."""
    for x in walk(e):
        yield x
        if isinstance(x, Load):
            for i in x.indices:
                yield from iter_expr(i)


def uses_var(e: Expr, v: Var) -> bool:
    return any(x is v for x in iter_expr(e))
