"""Elementwise intrinsics and helpers of the expression language."""

from __future__ import annotations

from typing import Any

from autosched.dtypes import check_dtype, promote
from autosched.te.expr import Binary, Call, Cast, Expr, Select, as_expr, binary, call


def exp(x: Any) -> Expr:
    return call("exp", x)


def log(x: Any) -> Expr:
    return call("log", x)


def sqrt(x: Any) -> Expr:
    return call("sqrt", x)


def rsqrt(x: Any) -> Expr:
    return call("rsqrt", x)


def tanh(x: Any) -> Expr:
    return call("tanh", x)


def erf(x: Any) -> Expr:
    return call("erf", x)


def sigmoid(x: Any) -> Expr:
    return call("sigmoid", x)


def abs(x: Any) -> Expr:  # noqa: A001
    return call("abs", x)


def floor(x: Any) -> Expr:
    return call("floor", x)


def ceil(x: Any) -> Expr:
    return call("ceil", x)


def power(x: Any, y: Any) -> Expr:
    return binary("pow", x, y)


pow = power  # noqa: A001


def maximum(x: Any, y: Any) -> Expr:
    return binary("max", x, y)


def minimum(x: Any, y: Any) -> Expr:
    return binary("min", x, y)


def eq(x: Any, y: Any) -> Expr:
    return binary("eq", x, y)


def ne(x: Any, y: Any) -> Expr:
    return binary("ne", x, y)


def all(*conds: Any) -> Expr:  # noqa: A001
    out = as_expr(conds[0])
    for c in conds[1:]:
        out = binary("and", out, c)
    return out


def any(*conds: Any) -> Expr:  # noqa: A001
    out = as_expr(conds[0])
    for c in conds[1:]:
        out = binary("or", out, c)
    return out


def cast(x: Any, dtype: str) -> Expr:
    return Cast(check_dtype(dtype), as_expr(x))


def if_then_else(cond: Any, t: Any, f: Any) -> Expr:
    """`cond ? t : f` (only the chosen side is evaluated: safe for padded reads)."""
    c = as_expr(cond)
    if c.dtype != "bool":
        raise TypeError(f"if_then_else: condition must be a comparison, got dtype {c.dtype}")
    if isinstance(t, Expr) and not isinstance(f, Expr):
        f = as_expr(f, t.dtype)
    elif isinstance(f, Expr) and not isinstance(t, Expr):
        t = as_expr(t, f.dtype)
    t, f = as_expr(t), as_expr(f)
    dtype = promote(t.dtype, f.dtype)
    if t.dtype != dtype:
        t = Cast(dtype, t)
    if f.dtype != dtype:
        f = Cast(dtype, f)
    return Select(c, t, f, dtype)


__all__ = ["Binary", "Call", "exp", "log", "sqrt", "rsqrt", "tanh", "erf", "sigmoid", "abs", "floor", "ceil",
           "power", "pow", "maximum", "minimum", "eq", "ne", "all", "any", "cast", "if_then_else"]
