"""Data pointers of numpy arrays at the cost of one field read, for the kernel call path.

`ndarray.ctypes.data` and `__array_interface__` build Python objects on every call, which costs
more than a near-empty kernel. The data pointer is the first field after the object header of
numpy's `PyArrayObject` (a layout its C ABI keeps, subclasses included), so it is read there
directly when a probe at import confirms the layout, and through `__array_interface__` otherwise
(docs/decisions/kernel-call-path.md).
"""

from __future__ import annotations

import ctypes
import sys

import numpy as np

_VOID_P_AT = ctypes.c_void_p.from_address


def _probe_offset() -> int | None:
    """Offset of the data field in an ndarray object, or None where it cannot be confirmed."""
    if sys.implementation.name != "cpython":  # id() is an object's address only in CPython
        return None
    off = object.__basicsize__  # PyObject_HEAD: larger on free-threaded builds
    base = np.arange(12, dtype=np.float64)

    class Sub(np.ndarray):
        pass

    probes = (base, base[5:], base.reshape(3, 4)[1:, ::2], base[7:].view(Sub), np.zeros((2, 3), np.int32))
    for a in probes:
        if _VOID_P_AT(id(a) + off).value != a.__array_interface__["data"][0]:
            return None
    return off


_OFFSET = _probe_offset()


def _via_interface(a: np.ndarray) -> int:
    """Address of the first element of `a` (an ndarray or subclass), the portable way."""
    return a.__array_interface__["data"][0]


def _via_field(a: np.ndarray) -> int:
    """Address of the first element of `a`, which must be an ndarray (or subclass): read from its struct."""
    return _VOID_P_AT(id(a) + _OFFSET).value or 0  # type: ignore[operator]


# address of the first element of an ndarray (or subclass): the caller checks the type first
data_pointer = _via_interface if _OFFSET is None else _via_field
