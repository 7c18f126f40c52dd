"""Expressions as short Python-like text, for error messages that quote what the user wrote.

Only messages use it (`A[i - 1, k]`, `i // 2`); code generation has its own renderers.
"""

from __future__ import annotations

from autosched.te.expr import Binary, Call, Cast, Const, Expr, Reduce, Select, TensorRead, Var

_INFIX = {"or": ("|", 1), "and": ("&", 2), "lt": ("<", 3), "le": ("<=", 3), "gt": (">", 3), "ge": (">=", 3),
          "eq": ("==", 3), "ne": ("!=", 3), "add": ("+", 4), "sub": ("-", 4), "mul": ("*", 5), "div": ("/", 5),
          "floordiv": ("//", 5), "mod": ("%", 5), "pow": ("**", 7)}
_ATOM = 9


def expr_text(e: Expr) -> str:
    """`e` as text, parenthesized only where precedence needs it."""
    return _text(e)[0]


def _wrap(part: tuple[str, int], need: int) -> str:
    s, prec = part
    return f"({s})" if prec < need else s


def _text(e: Expr) -> tuple[str, int]:
    if isinstance(e, Const):
        return repr(e.value), _ATOM if not (isinstance(e.value, int | float) and e.value < 0) else 6
    if isinstance(e, Var):
        return e.name, _ATOM
    if isinstance(e, TensorRead):
        return f"{e.tensor.name}[{', '.join(expr_text(i) for i in e.indices)}]", _ATOM
    if isinstance(e, Binary):
        if e.op in ("min", "max"):
            return f"{e.op}({expr_text(e.a)}, {expr_text(e.b)})", _ATOM
        sym, prec = _INFIX[e.op]
        # left-associative: the right operand of `a - (b - c)` keeps its parentheses
        return f"{_wrap(_text(e.a), prec)} {sym} {_wrap(_text(e.b), prec + 1)}", prec
    if isinstance(e, Call):
        if e.func == "neg":
            return f"-{_wrap(_text(e.args[0]), 6)}", 6
        if e.func == "not":
            return f"~{_wrap(_text(e.args[0]), 6)}", 6
        return f"{e.func}({', '.join(expr_text(a) for a in e.args)})", _ATOM
    if isinstance(e, Cast):
        return f"{e.dtype}({expr_text(e.value)})", _ATOM
    if isinstance(e, Select):
        return f"if_then_else({expr_text(e.cond)}, {expr_text(e.t)}, {expr_text(e.f)})", _ATOM
    if isinstance(e, Reduce):
        return f"{e.reducer.name}({expr_text(e.source)}, axis=[{', '.join(a.name for a in e.axes)}])", _ATOM
    return type(e).__name__, _ATOM
