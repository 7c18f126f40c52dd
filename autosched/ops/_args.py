"""Argument checks shared by the op library.

Workload arguments arrive over HTTP and from JSON, so every op checks them up front and raises
a `ValueError` that names the op and the argument, instead of failing somewhere inside `te`.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

from autosched.dtypes import SUPPORTED_DTYPES, DTypeError, check_dtype, is_float

COMPUTE_DTYPES = tuple(d for d in SUPPORTED_DTYPES if d != "bool")


def _int(op: str, arg: str, v: Any, lo: int) -> int:
    if isinstance(v, bool):
        raise ValueError(f"{op}: argument {arg!r} must be an int >= {lo}, got {v!r}")
    try:
        n = operator.index(v)
    except TypeError:
        raise ValueError(f"{op}: argument {arg!r} must be an int >= {lo}, "
                         f"got {type(v).__name__} {v!r}") from None
    if n < lo:
        raise ValueError(f"{op}: argument {arg!r} must be an int >= {lo}, got {n}")
    return n


def pos_int(op: str, arg: str, v: Any) -> int:
    """A positive int (extents: 0 and negatives are not shapes)."""
    return _int(op, arg, v, 1)


def nonneg_int(op: str, arg: str, v: Any) -> int:
    return _int(op, arg, v, 0)


def shape(op: str, arg: str, v: Any) -> tuple[int, ...]:
    """A non-empty tuple of positive ints (a lone int is a 1-D shape)."""
    if isinstance(v, int) and not isinstance(v, bool):
        v = (v,)
    if not isinstance(v, Sequence) or isinstance(v, str) or not v:
        raise ValueError(f"{op}: argument {arg!r} must be a non-empty tuple of positive ints, got {v!r}")
    return tuple(pos_int(op, f"{arg}[{k}]", d) for k, d in enumerate(v))


def pair(op: str, arg: str, v: Any, lo: int) -> tuple[int, int]:
    """An int for both spatial dims, or an (h, w) pair."""
    if isinstance(v, Sequence) and not isinstance(v, str):
        if len(v) != 2:
            raise ValueError(f"{op}: argument {arg!r} must be an int or a pair of ints, got {v!r}")
        return _int(op, f"{arg}[0]", v[0], lo), _int(op, f"{arg}[1]", v[1], lo)
    n = _int(op, arg, v, lo)
    return n, n


def padding4(op: str, v: Any) -> tuple[int, int, int, int]:
    """Padding as (top, left, bottom, right), from an int, an (h, w) pair or a 4-tuple (TVM order)."""
    if isinstance(v, Sequence) and not isinstance(v, str) and len(v) == 4:
        t, left, b, r = (nonneg_int(op, f"padding[{k}]", x) for k, x in enumerate(v))
        return t, left, b, r
    ph, pw = pair(op, "padding", v, 0)
    return ph, pw, ph, pw


def dtype(op: str, v: Any, float_only: bool = False) -> str:
    """A supported dtype name; ops whose math is only defined on floats (exp, division) say so."""
    try:
        d = check_dtype(v)
    except DTypeError:
        raise DTypeError(f"{op}: argument 'dtype' must be one of {list(COMPUTE_DTYPES)}, got {v!r}") from None
    if float_only and not is_float(d):
        raise DTypeError(f"{op}: argument 'dtype' must be a float dtype, got {d!r}")
    return d


def choice(op: str, arg: str, v: Any, options: Sequence[str]) -> str:
    if v not in options:
        raise ValueError(f"{op}: argument {arg!r} must be one of {list(options)}, got {v!r}")
    return v


def out_size(op: str, size: int, pad: int, kernel: int, stride: int, dilation: int, dim: str) -> int:
    """Output extent of a sliding window (floor mode), refusing windows larger than the input."""
    n = (size + pad - dilation * (kernel - 1) - 1) // stride + 1
    if n < 1:
        raise ValueError(f"{op}: the {dim} window (kernel {kernel}, dilation {dilation}) does not fit the "
                         f"padded input ({size} + padding {pad})")
    return n
