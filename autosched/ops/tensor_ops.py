"""Shape-level ops: reductions over chosen axes and transposes (pure data movement)."""

from __future__ import annotations

from autosched import te
from autosched.ops import _args as a
from autosched.te import Tensor
from autosched.workload import workload

_REDUCERS = {"sum": te.sum, "max": te.max, "min": te.min}


def _axes(op: str, axes: int | tuple[int, ...], ndim: int) -> tuple[int, ...]:
    """Normalized, sorted axes; negative axes count from the end, as in numpy."""
    raw = (axes,) if isinstance(axes, int) else axes
    if isinstance(raw, str) or not isinstance(raw, tuple | list) or not raw:
        raise ValueError(f"{op}: argument 'axes' must be an int or a non-empty tuple of ints, got {axes!r}")
    out = []
    for k, ax in enumerate(raw):
        if isinstance(ax, bool) or not isinstance(ax, int) or not -ndim <= ax < ndim:
            raise ValueError(f"{op}: argument 'axes[{k}]' = {ax!r} is not an axis of a {ndim}-D tensor")
        out.append(ax % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"{op}: argument 'axes' {axes!r} repeats an axis")
    return tuple(sorted(out))


@workload("reduce")
def reduce(shape: tuple[int, ...], axes: int | tuple[int, ...], kind: str = "sum", keepdims: bool = False,
           dtype: str = "float32") -> list[Tensor]:
    """out = X.sum/max/min(axis=axes, keepdims=keepdims) over X of `shape`.

    Reducing every axis without keepdims gives shape (1,): te tensors have at least one dimension.
    """
    op = "reduce"
    dims = a.shape(op, "shape", shape)
    red_axes = _axes(op, axes, len(dims))
    kind = a.choice(op, "kind", kind, tuple(_REDUCERS))
    if not isinstance(keepdims, bool):
        raise ValueError(f"{op}: argument 'keepdims' must be a bool, got {keepdims!r}")
    dtype = a.dtype(op, dtype)
    X = te.placeholder(dims, "X", dtype)
    keep = [d for d in range(len(dims)) if d not in red_axes]
    raxes = [te.reduce_axis(dims[d], f"r{d}") for d in red_axes]
    if keepdims:
        out_shape = tuple(1 if d in red_axes else n for d, n in enumerate(dims))
        names = [f"i{d}" for d in range(len(dims))]
    else:
        out_shape = tuple(dims[d] for d in keep) or (1,)
        names = [f"i{d}" for d in keep] or ["i"]

    def f(*idx):
        src: list = [None] * len(dims)
        for d, r in zip(red_axes, raxes):
            src[d] = r
        for pos, d in enumerate(keep):
            src[d] = idx[d] if keepdims else idx[pos]
        return _REDUCERS[kind](X[tuple(src)], axis=raxes)

    out = te.compute(out_shape, f, "out", axis_names=names)
    return [X, out]


@workload("transpose")
def transpose(shape: tuple[int, ...], perm: tuple[int, ...], dtype: str = "float32") -> list[Tensor]:
    """out = X.transpose(perm) (numpy semantics: out.shape[d] = shape[perm[d]])."""
    op = "transpose"
    dims = a.shape(op, "shape", shape)
    if isinstance(perm, str) or not isinstance(perm, tuple | list) or sorted(perm) != list(range(len(dims))) \
            or any(isinstance(p, bool) for p in perm):
        raise ValueError(f"{op}: argument 'perm' must be a permutation of 0..{len(dims) - 1}, got {perm!r}")
    dtype = a.dtype(op, dtype)
    X = te.placeholder(dims, "X", dtype)
    inv = [perm.index(d) for d in range(len(dims))]
    # out axis d walks X's axis perm[d]: X's axis e is indexed by out axis inv[e]
    n = len(dims)
    out = te.compute(tuple(dims[p] for p in perm), lambda *idx: X[tuple(idx[inv[e]] for e in range(n))],
                     "out", axis_names=[f"i{d}" for d in range(len(dims))])
    return [X, out]
