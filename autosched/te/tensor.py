"""Tensors and the operations that produce them: placeholders (inputs) and computes."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from autosched.dtypes import check_dtype, is_float
from autosched.te.expr import (
    BUILTIN_REDUCERS,
    Const,
    Expr,
    IterVar,
    Reduce,
    Reducer,
    TensorRead,
    Var,
    as_expr,
    as_extent,
    check_name,
    walk,
)
from autosched.te.read_bounds import check_reads
from autosched.te.text import expr_text


class Operation:
    """Base of the two operation kinds; `name` is the stage name used by schedules."""

    name: str

    def input_tensors(self) -> list[Tensor]:
        return []


class PlaceholderOp(Operation):
    def __init__(self, name: str, shape: tuple[int, ...], dtype: str) -> None:
        self.name, self.shape, self.dtype = name, shape, dtype


class ComputeOp(Operation):
    """out[axis...] = body, where body may be a top-level reduction over `reduce_axis`."""

    def __init__(self, name: str, axis: tuple[IterVar, ...], body: Expr, dtype: str, tag: str = "") -> None:
        self.name, self.axis, self.body, self.dtype, self.tag = name, axis, body, dtype, tag
        self.reduce_axis: tuple[IterVar, ...] = body.axes if isinstance(body, Reduce) else ()

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(a.extent for a in self.axis)

    def input_tensors(self) -> list[Tensor]:
        seen: dict[int, Tensor] = {}
        for node in walk(self.body):
            if isinstance(node, TensorRead) and id(node.tensor) not in seen:
                seen[id(node.tensor)] = node.tensor
        return list(seen.values())


class Tensor:
    """A multi-dimensional array produced by an operation."""

    def __init__(self, op: Operation, shape: tuple[int, ...], dtype: str) -> None:
        self.op, self.shape, self.dtype = op, shape, dtype

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, idx: Any) -> TensorRead:
        idx = idx if isinstance(idx, tuple) else (idx,)
        if len(idx) != len(self.shape):
            raise IndexError(f"tensor {self.name!r} has {len(self.shape)} dimensions, "
                             f"indexed with {len(idx)}")
        out = []
        for k, x in enumerate(idx):
            e = as_expr(x)
            if e.dtype not in ("int32", "int64"):
                raise TypeError(f"tensor {self.name!r}: index {k} has dtype {e.dtype}, needs an integer "
                                f"(index {expr_text(e)})")
            out.append(e)
        return TensorRead(self, tuple(out))

    def __repr__(self) -> str:
        return f"Tensor({self.name}, shape={self.shape}, dtype={self.dtype})"

    __hash__ = object.__hash__


def _check_shape(shape: Any, who: str) -> tuple[int, ...]:
    if as_extent(shape) is not None or isinstance(shape, int):
        shape = (shape,)
    try:
        dims = tuple(shape)
    except TypeError:
        raise ValueError(f"{who}: shape must be a tuple of positive ints, got {shape!r}") from None
    ints = tuple(as_extent(d) for d in dims)
    if not dims or any(n is None for n in ints):
        raise ValueError(f"{who}: shape must be a non-empty tuple of positive ints, got {shape!r}")
    return ints  # type: ignore[return-value]


def placeholder(shape: Sequence[int] | int, name: str = "placeholder", dtype: str = "float32") -> Tensor:
    """An input tensor."""
    check_name(name, "tensor name")
    dims = _check_shape(shape, f"placeholder {name!r}")
    check_dtype(dtype, f"dtype of placeholder {name!r}")
    return Tensor(PlaceholderOp(name, dims, dtype), dims, dtype)


def reduce_axis(extent: int | tuple[int, int], name: str = "k") -> IterVar:
    """A reduction axis over [0, extent) (a (0, n) pair is accepted too)."""
    if isinstance(extent, tuple):
        lo, hi = extent
        if lo != 0:
            raise ValueError(f"reduce_axis {name!r}: only ranges starting at 0 are supported, got {extent}")
        extent = hi
    return IterVar(name, extent, "reduce")


def compute(
    shape: Sequence[int] | int,
    fcompute: Callable[..., Any],
    name: str = "compute",
    dtype: str | None = None,
    tag: str = "",
    axis_names: Sequence[str] | None = None,
) -> Tensor:
    """A tensor whose element at `axis` is `fcompute(*axis)`; axes take the lambda's argument names."""
    check_name(name, "tensor name")
    dims = _check_shape(shape, f"compute {name!r}")
    # parameters with defaults are values bound in a loop (`lambda i, f=f: ...`), not axes
    params = [p for p in inspect.signature(fcompute).parameters.values()
              if p.default is inspect.Parameter.empty and p.kind != inspect.Parameter.KEYWORD_ONLY]
    if axis_names is not None:
        names = list(axis_names)
        if len(names) != len(dims):
            raise ValueError(f"compute {name!r}: {len(names)} axis names for {len(dims)} dimensions")
    elif params and params[0].kind == inspect.Parameter.VAR_POSITIONAL:
        names = [f"i{k}" for k in range(len(dims))]
    else:
        names = [p.name for p in params]
        if len(names) != len(dims):
            raise ValueError(f"compute {name!r}: shape has {len(dims)} dimensions "
                             f"but fcompute takes {len(names)}")
    axis = tuple(IterVar(n, d, "spatial") for n, d in zip(names, dims))
    body = as_expr(fcompute(*axis))
    if dtype is not None:
        check_dtype(dtype, f"dtype of compute {name!r}")
        if body.dtype != dtype:
            body = Reduce(body.reducer, body.source.astype(dtype), body.axes) if isinstance(body, Reduce) \
                else body.astype(dtype)
    if body.dtype == "bool":
        raise ValueError(f"compute {name!r}: body is a boolean; use te.if_then_else to make a value")
    _check_body(name, body, axis)
    check_reads(name, body, axis)
    return Tensor(ComputeOp(name, axis, body, body.dtype, tag), dims, body.dtype)


def _check_body(name: str, body: Expr, axis: tuple[IterVar, ...]) -> None:
    allowed = set(map(id, axis))
    if isinstance(body, Reduce):
        allowed |= set(map(id, body.axes))
        if any(a.name in {x.name for x in axis} for a in body.axes):
            raise ValueError(f"compute {name!r}: reduce axis name clashes with a spatial axis name")
    for node in walk(body.source if isinstance(body, Reduce) else body):
        if isinstance(node, Reduce):
            raise ValueError(f"compute {name!r}: a reduction must be the whole body of a compute")
        if isinstance(node, IterVar) and id(node) not in allowed:
            kind = "reduce axis" if node.kind == "reduce" else "axis"
            raise ValueError(
                f"compute {name!r}: uses {kind} {node.name!r} that is not one of its own axes "
                "(reduce axes must be passed to te.sum/max/min of this compute)"
            )
        if isinstance(node, Var) and not isinstance(node, IterVar):
            raise ValueError(f"compute {name!r}: free variable {node.name!r}")


# ---- reducers --------------------------------------------------------------------------------


def comm_reducer(
    combine: Callable[[Expr, Expr], Any], identity: float | dict[str, float], name: str
) -> Reducer:
    """Declare a commutative reducer, e.g. `prod = te.comm_reducer(lambda x, y: x * y, 1.0, "prod")`."""
    lhs, rhs = Var("x", "float64"), Var("y", "float64")
    return Reducer(name, as_expr(combine(lhs, rhs)), lhs, rhs, identity)


sum = BUILTIN_REDUCERS["sum"]  # noqa: A001
max = BUILTIN_REDUCERS["max"]  # noqa: A001
min = BUILTIN_REDUCERS["min"]  # noqa: A001




def const(value: float | int, dtype: str = "float32") -> Const:
    """A typed constant; an integer dtype refuses a fractional value instead of storing 1.5 as an int."""
    check_dtype(dtype)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"te.const: value must be an int or a float, got {value!r}")
    if is_float(dtype):
        return Const(float(value), dtype)
    if isinstance(value, float) and not value.is_integer():
        raise ValueError(f"te.const: {value!r} is not a whole number, so not an {dtype} constant")
    return Const(int(value), dtype)
