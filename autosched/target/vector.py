"""Vector facts of the CPU target: elements per vector register and per cache line.

The width is the one the generated C is compiled for (`host_isa.vector_bytes`), so the search
space, the renderer and the cost model agree on it.
"""

from __future__ import annotations

from autosched.dtypes import DTYPE_BYTES
from autosched.target.host_isa import vector_bytes

CACHE_LINE_BYTES = 64
VECTOR_DTYPES = ("float32", "float64")  # the dtypes the C renderer writes explicit vector code for


def lanes(dtype: str) -> int:
    """Elements per vector register of the target (0: no vector type for `dtype`)."""
    return vector_bytes() // DTYPE_BYTES[dtype] if dtype in VECTOR_DTYPES else 0


def line_lanes(dtype: str) -> int:
    """Elements per 64-byte cache line: the unit streaming stores must write whole, on any host."""
    return CACHE_LINE_BYTES // DTYPE_BYTES[dtype] if dtype in VECTOR_DTYPES else 0
