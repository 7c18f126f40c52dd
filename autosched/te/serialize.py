"""JSON form of expressions and operations: data only, no Python code is ever executed to load it."""

from __future__ import annotations

import math
from typing import Any

from autosched.dtypes import INT_DTYPES, SUPPORTED_DTYPES, is_float, promote
from autosched.te.expr import (
    BINARY_OPS,
    BUILTIN_REDUCERS,
    COMPARE_OPS,
    FLOAT_FUNCS,
    UNARY_FUNCS,
    Binary,
    Call,
    Cast,
    Const,
    Expr,
    IterVar,
    Reduce,
    Reducer,
    Select,
    TensorRead,
    Var,
    builtin_reducer_name,
    check_name,
)
from autosched.te.interval import INT_LIMITS


class DAGFormatError(ValueError):
    """A JSON DAG that does not describe a valid tensor program."""


def _num(v: float | int | bool) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


def _unnum(v: Any) -> float | int | bool:
    if isinstance(v, str):
        if v not in ("nan", "inf", "-inf"):
            raise DAGFormatError(f"bad constant {v!r}")
        return float(v)
    if not isinstance(v, int | float | bool):
        raise DAGFormatError(f"bad constant {v!r}")
    return v


def reducer_to_json(r: Reducer) -> Any:
    if builtin_reducer_name(r) is not None:
        return r.name
    ident = r.identity_spec
    ident = {k: _num(v) for k, v in ident.items()} if isinstance(ident, dict) else _num(ident)
    return {"name": r.name, "combine": expr_to_json(r.combine), "identity": ident}


def expr_to_json(e: Expr) -> Any:
    if isinstance(e, Const):
        return ["c", _num(e.value), e.dtype]
    if isinstance(e, Var):
        return ["v", e.name]
    if isinstance(e, Binary):
        return ["b", e.op, expr_to_json(e.a), expr_to_json(e.b), e.dtype]
    if isinstance(e, Call):
        return ["call", e.func, [expr_to_json(a) for a in e.args], e.dtype]
    if isinstance(e, Cast):
        return ["cast", e.dtype, expr_to_json(e.value)]
    if isinstance(e, Select):
        return ["sel", expr_to_json(e.cond), expr_to_json(e.t), expr_to_json(e.f), e.dtype]
    if isinstance(e, TensorRead):
        return ["read", e.tensor.name, [expr_to_json(i) for i in e.indices]]
    if isinstance(e, Reduce):
        return ["reduce", reducer_to_json(e.reducer), expr_to_json(e.source), [a.name for a in e.axes]]
    raise TypeError(f"cannot serialize {type(e).__name__}")


def _dtype(d: Any) -> str:
    if d not in SUPPORTED_DTYPES:
        raise DAGFormatError(f"unsupported dtype {d!r}")
    return d


def _same(declared: Any, derived: str, node: Any) -> Any:
    """Declared dtypes must match what the builders derive: the renderers trust them."""
    if declared != derived:
        raise DAGFormatError(f"dtype {declared!r} of node {node!r} does not match its operands ({derived})")
    return declared


def reducer_from_json(j: Any) -> Reducer:
    if isinstance(j, str):
        if j not in BUILTIN_REDUCERS:
            raise DAGFormatError(f"unknown reducer {j!r}; builtin: {sorted(BUILTIN_REDUCERS)}")
        return BUILTIN_REDUCERS[j]
    if not isinstance(j, dict) or set(j) != {"name", "combine", "identity"}:
        raise DAGFormatError("custom reducer must be {name, combine, identity}")
    lhs, rhs = Var("x", "float64"), Var("y", "float64")
    combine = expr_from_json(j["combine"], {"x": lhs, "y": rhs}, {})
    ident = j["identity"]
    ident = {k: _unnum(v) for k, v in ident.items()} if isinstance(ident, dict) else _unnum(ident)
    return Reducer(check_name(j["name"], "reducer name"), combine, lhs, rhs, ident)


def expr_from_json(j: Any, vars_: dict[str, Var], tensors: dict[str, Any]) -> Expr:
    if not isinstance(j, list) or not j:
        raise DAGFormatError(f"bad expression node {j!r}")
    tag = j[0]
    try:
        if tag == "c":
            value, dtype = _unnum(j[1]), _dtype(j[2])
            if (dtype == "bool") != isinstance(value, bool) or (dtype in INT_DTYPES and not isinstance(value, int)):
                raise DAGFormatError(f"constant {j[1]!r} is not a {dtype} value")
            if dtype in INT_LIMITS and not INT_LIMITS[dtype][0] <= value <= INT_LIMITS[dtype][1]:
                raise DAGFormatError(f"constant {j[1]!r} does not fit {dtype}")
            return Const(value, dtype)
        if tag == "v":
            if j[1] not in vars_:
                raise DAGFormatError(f"unknown variable {j[1]!r}")
            return vars_[j[1]]
        if tag == "b":
            if j[1] not in BINARY_OPS:
                raise DAGFormatError(f"unknown binary op {j[1]!r}")
            a, b = expr_from_json(j[2], vars_, tensors), expr_from_json(j[3], vars_, tensors)
            want = "bool" if j[1] in COMPARE_OPS else promote(a.dtype, b.dtype)
            if j[1] == "div" and not is_float(want):
                raise DAGFormatError("integer 'div' node: integer division is 'floordiv'")
            return Binary(j[1], a, b, _same(_dtype(j[4]), want, j))
        if tag == "call":
            if j[1] not in UNARY_FUNCS:
                raise DAGFormatError(f"unknown function {j[1]!r}")
            if not isinstance(j[2], list) or len(j[2]) != 1:
                raise DAGFormatError(f"function {j[1]!r} takes exactly one argument")
            x = expr_from_json(j[2][0], vars_, tensors)
            if j[1] in FLOAT_FUNCS and not is_float(x.dtype):
                raise DAGFormatError(f"function {j[1]!r} of a {x.dtype} value: cast it to a float first")
            return Call(j[1], (x,), _same(_dtype(j[3]), "bool" if j[1] == "not" else x.dtype, j))
        if tag == "cast":
            return Cast(_dtype(j[1]), expr_from_json(j[2], vars_, tensors))
        if tag == "sel":
            c, t, f = (expr_from_json(x, vars_, tensors) for x in j[1:4])
            if c.dtype != "bool":
                raise DAGFormatError(f"select condition has dtype {c.dtype}, needs bool")
            _same(f.dtype, t.dtype, j)
            return Select(c, t, f, _same(_dtype(j[4]), t.dtype, j))
        if tag == "read":
            if j[1] not in tensors:
                raise DAGFormatError(f"read of unknown tensor {j[1]!r} (tensors must be defined before use)")
            t = tensors[j[1]]
            idx = [expr_from_json(i, vars_, tensors) for i in j[2]]
            return t[tuple(idx)]
        if tag == "reduce":
            axes = []
            for n in j[3]:
                ax = vars_.get(n)
                if not isinstance(ax, IterVar) or ax.kind != "reduce":
                    raise DAGFormatError(f"reduce over {n!r}, which is not a reduce axis")
                axes.append(ax)
            return Reduce(reducer_from_json(j[1]), expr_from_json(j[2], vars_, tensors), tuple(axes))
    except (IndexError, TypeError) as exc:
        raise DAGFormatError(f"malformed expression node {j!r}: {exc}") from None
    raise DAGFormatError(f"unknown expression tag {tag!r}")
