"""numpy reference evaluation of a ComputeDAG: the ground truth every candidate is checked against.

Each compute is evaluated over a broadcast index grid (spatial axes first, then reduce axes), in
float64 for float dtypes, in chunks so memory stays bounded, and rounded to the stage's dtype at
the stage boundary (as the kernels store it). Sum-of-products over plain axes (matmul, batch
matmul, dense) goes through `np.einsum`, which is orders of magnitude faster than the grid.
Reads are clamped into bounds: `te.compute` refuses reads it cannot prove inside their tensor
(`autosched.te.read_bounds`), so an out-of-bounds index can only appear in the unselected branch
of `if_then_else` (padding), whose value is discarded.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod
from typing import Protocol

import numpy as np
from scipy.special import erf as _erf

from autosched.dtypes import is_float, np_dtype, reference_dtype
from autosched.te.expr import (
    Binary,
    Call,
    Cast,
    Const,
    Expr,
    IterVar,
    Reduce,
    Select,
    TensorRead,
    Var,
    builtin_reducer_name,
)
from autosched.te.tensor import ComputeOp, Tensor


class ComputeDAG(Protocol):
    """What the reference needs of a DAG (the class is `autosched.te.dag.ComputeDAG`)."""

    placeholders: Sequence[Tensor]
    computes: Sequence[Tensor]

CHUNK_ELEMENTS = 1 << 22

_BIN = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "min": np.minimum,
    "max": np.maximum, "pow": np.power, "lt": np.less, "le": np.less_equal, "gt": np.greater,
    "ge": np.greater_equal, "eq": np.equal, "ne": np.not_equal, "and": np.logical_and, "or": np.logical_or,
}
_UN = {
    "neg": np.negative, "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh, "abs": np.abs,
    "erf": _erf, "not": np.logical_not, "floor": np.floor, "ceil": np.ceil,
    "rsqrt": lambda x: 1.0 / np.sqrt(x), "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
}


def _floordiv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.floor_divide(a, np.where(b == 0, 1, b))


def _mod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.mod(a, np.where(b == 0, 1, b))


def eval_expr(e: Expr, env: dict[int, np.ndarray], values: dict[str, np.ndarray]) -> np.ndarray:
    """Evaluate `e` with variables (by id) bound to broadcastable arrays."""
    if isinstance(e, Const):
        return np.asarray(e.value, dtype=reference_dtype(e.dtype))
    if isinstance(e, Var):
        return env[id(e)]
    if isinstance(e, Binary):
        a, b = eval_expr(e.a, env, values), eval_expr(e.b, env, values)
        if e.op == "floordiv":
            return _floordiv(a, b)
        if e.op == "mod":
            return _mod(a, b)
        with np.errstate(all="ignore"):
            out = _BIN[e.op](a, b)
        return out if e.op in ("lt", "le", "gt", "ge", "eq", "ne", "and", "or") else out.astype(
            reference_dtype(e.dtype), copy=False)
    if isinstance(e, Call):
        with np.errstate(all="ignore"):
            return _UN[e.func](*(eval_expr(a, env, values) for a in e.args))
    if isinstance(e, Cast):
        v = eval_expr(e.value, env, values)
        if not is_float(e.dtype) and e.dtype != "bool" and np.issubdtype(np.asarray(v).dtype, np.floating):
            v = np.trunc(v)
        if e.dtype in ("float16", "bfloat16", "float32"):
            v = np.asarray(v).astype(np_dtype(e.dtype))
        return np.asarray(v).astype(reference_dtype(e.dtype))
    if isinstance(e, Select):
        c = eval_expr(e.cond, env, values)
        return np.where(c, eval_expr(e.t, env, values), eval_expr(e.f, env, values))
    if isinstance(e, TensorRead):
        arr = values[e.tensor.name]
        idx = []
        for k, ie in enumerate(e.indices):
            iv = np.asarray(eval_expr(ie, env, values)).astype(np.int64, copy=False)
            idx.append(np.clip(iv, 0, arr.shape[k] - 1))
        return arr[tuple(idx)]
    raise TypeError(f"cannot evaluate {type(e).__name__}")


def _combine(reducer, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    env = {id(reducer.lhs): a, id(reducer.rhs): b}
    return eval_expr(reducer.combine, env, {})


def _reduce_along(reducer, x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    builtin = builtin_reducer_name(reducer)
    if builtin == "sum":
        return np.sum(x, axis=axes)
    if builtin == "max":
        return np.max(x, axis=axes)
    if builtin == "min":
        return np.min(x, axis=axes)
    flat = np.moveaxis(x, axes, tuple(range(x.ndim - len(axes), x.ndim)))
    flat = flat.reshape(flat.shape[: x.ndim - len(axes)] + (-1,))
    acc = flat[..., 0]
    for k in range(1, flat.shape[-1]):
        acc = _combine(reducer, acc, flat[..., k])
    return acc


def _einsum_plan(op: ComputeOp) -> tuple[str, list[str]] | None:
    """`sum(A[plain axes] * B[plain axes])` -> einsum subscripts, else None."""
    body = op.body
    if not isinstance(body, Reduce) or builtin_reducer_name(body.reducer) != "sum":
        return None
    src = body.source
    if not (isinstance(src, Binary) and src.op == "mul"):
        return None
    reads = [src.a, src.b]
    if not all(isinstance(r, TensorRead) for r in reads):
        return None
    letters = {}
    for ax in list(op.axis) + list(body.axes):
        letters[id(ax)] = chr(ord("a") + len(letters))
    terms = []
    for r in reads:
        if not all(isinstance(i, IterVar) and id(i) in letters for i in r.indices):
            return None
        sub = "".join(letters[id(i)] for i in r.indices)
        if len(set(sub)) != len(sub):
            return None
        terms.append(sub)
    out = "".join(letters[id(a)] for a in op.axis)
    if set(letters.values()) - set("".join(terms)):
        # an axis no operand reads: a broadcast output axis (einsum rejects it) or a reduce axis
        # that scales the sum by its extent (einsum would drop it); the grid handles both
        return None
    return f"{terms[0]},{terms[1]}->{out}", [reads[0].tensor.name, reads[1].tensor.name]


def _eval_compute(op: ComputeOp, values: dict[str, np.ndarray]) -> np.ndarray:
    plan = _einsum_plan(op)
    if plan is not None:
        subs, names = plan
        a, b = (values[n].astype(np.float64 if is_float(op.dtype) else np.int64) for n in names)
        return np.einsum(subs, a, b, optimize=True)
    shape = op.shape
    raxes = op.reduce_axis
    rshape = tuple(a.extent for a in raxes)
    body = op.body
    src = body.source if isinstance(body, Reduce) else body
    nsp, nr = len(shape), len(rshape)
    out = np.empty(shape, dtype=reference_dtype(op.dtype))
    rows_per_chunk = max(1, CHUNK_ELEMENTS // max(1, prod(shape[1:]) * max(1, prod(rshape))))
    r0_chunk = rshape[0] if nr else 1
    if nr and prod(shape[1:]) * prod(rshape) > CHUNK_ELEMENTS:
        r0_chunk = max(1, CHUNK_ELEMENTS // max(1, prod(shape[1:]) * prod(rshape[1:])))
    for lo in range(0, shape[0], rows_per_chunk):
        hi = min(shape[0], lo + rows_per_chunk)
        acc = None
        for rlo in range(0, rshape[0] if nr else 1, r0_chunk):
            rhi = min(rshape[0], rlo + r0_chunk) if nr else 1
            env: dict[int, np.ndarray] = {}
            ndim = nsp + nr
            for d, ax in enumerate(op.axis):
                rng = np.arange(lo, hi) if d == 0 else np.arange(ax.extent)
                env[id(ax)] = rng.reshape([-1 if k == d else 1 for k in range(ndim)])
            for d, ax in enumerate(raxes):
                rng = np.arange(rlo, rhi) if d == 0 else np.arange(ax.extent)
                env[id(ax)] = rng.reshape([-1 if k == nsp + d else 1 for k in range(ndim)])
            full = (hi - lo,) + shape[1:] + (((rhi - rlo),) + rshape[1:] if nr else ())
            v = np.broadcast_to(eval_expr(src, env, values), full)
            if nr:
                part = _reduce_along(body.reducer, v, tuple(range(nsp, nsp + nr)))
                acc = part if acc is None else _combine(body.reducer, acc, part)
            else:
                acc = v
        out[lo:hi] = acc
    return out


def evaluate_dag(dag: ComputeDAG, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every tensor of `dag` by name: the inputs as given and each compute rounded to its dtype."""
    values: dict[str, np.ndarray] = {}
    for t in dag.placeholders:
        if t.name not in inputs:
            raise KeyError(f"missing input {t.name!r}")
        arr = np.asarray(inputs[t.name])
        if arr.shape != t.shape:
            raise ValueError(f"input {t.name!r}: shape {arr.shape}, expected {t.shape}")
        # round to the placeholder's dtype first: a float64 array given for a float16 input must
        # be seen as the float16 values a kernel would receive
        values[t.name] = arr.astype(np_dtype(t.dtype)).astype(reference_dtype(t.dtype))
    result = {}
    for t in dag.computes:
        raw = _eval_compute(t.op, values)
        stored = np.asarray(raw).astype(np_dtype(t.dtype))
        result[t.name] = stored
        values[t.name] = stored.astype(reference_dtype(t.dtype))
    return result
