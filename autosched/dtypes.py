"""The dtypes autosched supports, their numpy forms and their C storage/compute types.

float16 and bfloat16 are storage types: arithmetic on them is done in float32 (as the C backend
does), and results are rounded when stored.
"""

from __future__ import annotations

import numpy as np

SUPPORTED_DTYPES: tuple[str, ...] = ("float32", "float64", "float16", "bfloat16", "int32", "int64", "bool")
FLOAT_DTYPES = frozenset({"float32", "float64", "float16", "bfloat16"})
INT_DTYPES = frozenset({"int32", "int64"})
_FLOAT_RANK = {"float16": 1, "bfloat16": 1, "float32": 2, "float64": 3}
# bytes per element of each supported dtype (bool is stored as one byte)
DTYPE_BYTES: dict[str, int] = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int32": 4, "int64": 8,
                               "bool": 1}


class DTypeError(ValueError):
    """An unsupported or mismatched dtype."""


def check_dtype(dtype: str, what: str = "dtype") -> str:
    """Return `dtype` if supported, else raise naming the bad value and the supported ones."""
    if not isinstance(dtype, str) or dtype not in SUPPORTED_DTYPES or dtype == "bool":
        raise DTypeError(
            f"unsupported {what} {dtype!r}; "
            f"supported: {', '.join(d for d in SUPPORTED_DTYPES if d != 'bool')}"
        )
    return dtype


def dtype_bytes(dtype: str) -> int:
    """Bytes per element of `dtype`; raises DTypeError naming an unknown one."""
    if dtype not in DTYPE_BYTES:
        raise DTypeError(f"unknown dtype {dtype!r}; supported: {', '.join(SUPPORTED_DTYPES)}")
    return DTYPE_BYTES[dtype]


def is_float(dtype: str) -> bool:
    return dtype in FLOAT_DTYPES


def np_dtype(dtype: str) -> np.dtype:
    """numpy dtype object for `dtype` (bfloat16 through ml_dtypes)."""
    if dtype == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(dtype)


def promote(a: str, b: str) -> str:
    """Result dtype of a binary arithmetic op (TVM-like: floats win, wider wins)."""
    if a == b:
        return a
    if a == "bool":
        return b
    if b == "bool":
        return a
    fa, fb = is_float(a), is_float(b)
    if fa and fb:
        ra, rb = _FLOAT_RANK[a], _FLOAT_RANK[b]
        if ra == rb:  # float16 with bfloat16: no exact common half type
            return "float32"
        return a if ra > rb else b
    if fa:
        return a
    if fb:
        return b
    return "int64" if "int64" in (a, b) else "int32"


def compute_dtype(dtype: str) -> str:
    """dtype in which arithmetic on `dtype` values is carried out."""
    return "float32" if dtype in ("float16", "bfloat16") else dtype


def reference_dtype(dtype: str) -> np.dtype:
    """Wide numpy dtype in which the reference evaluates expressions of `dtype`."""
    if is_float(dtype):
        return np.dtype("float64")
    if dtype == "bool":
        return np.dtype(bool)
    return np.dtype("int64")
