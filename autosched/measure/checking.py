"""Compare a kernel's outputs with the numpy reference: tolerances by dtype, NaN never passes.

Generated kernels reorder floating-point reductions (tiling, vectorized partial sums, FMA
contraction), so bit equality is wrong for floats; but a loose check would let a kernel
that skips part of the work record a fast time. Tolerances therefore follow the dtype's
precision and grow only with the square root of the reduction length (the usual growth of
rounding error in a sum of random terms). Outputs are poisoned with NaN before the run, so an
element the kernel never wrote is NaN and fails: NaN never passes, even where the reference
itself is NaN. Integers must match exactly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

# (rtol, atol) for a reduction of length <= REDUCE_FREE; scaled by sqrt(len / REDUCE_FREE) beyond.
BASE_TOLERANCE: dict[str, tuple[float, float]] = {
    "float64": (1e-9, 1e-12),
    "float32": (1e-4, 1e-5),
    "float16": (1e-2, 1e-3),
    "bfloat16": (2e-2, 1e-2),
}
REDUCE_FREE = 256
# An element may also miss by this share of rtol times the output's largest magnitude: error
# from cancellation in a long sum scales with the terms, not with the (small) result.
MAGNITUDE_SHARE = 1e-2


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float


@dataclass(frozen=True)
class CheckOutcome:
    ok: bool
    message: str = ""
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0


def tolerance_for(dtype: str, reduce_len: int = 1) -> Tolerance:
    """rtol/atol for `dtype`, scaled up for reductions longer than REDUCE_FREE terms."""
    if dtype not in BASE_TOLERANCE:
        return Tolerance(0.0, 0.0)  # integers and bools: exact
    rtol, atol = BASE_TOLERANCE[dtype]
    scale = max(1.0, math.sqrt(max(reduce_len, 1) / REDUCE_FREE))
    return Tolerance(rtol * scale, atol * scale)


def _dtype_name(a: np.ndarray) -> str:
    return str(a.dtype)


def _fmt_index(flat: int, shape: tuple[int, ...]) -> str:
    return str(tuple(int(i) for i in np.unravel_index(flat, shape))) if shape else "()"


def check_array(name: str, actual: np.ndarray, expected: np.ndarray, reduce_len: int = 1) -> CheckOutcome:
    """Check one output; the message names the output, the errors and the worst element."""
    dtype = _dtype_name(actual)
    head = f"output {name!r} ({dtype}, shape {tuple(actual.shape)})"
    if tuple(actual.shape) != tuple(expected.shape):
        return CheckOutcome(False, f"{head}: reference has shape {tuple(expected.shape)}",
                            math.inf, math.inf)
    tol = tolerance_for(dtype, reduce_len)
    a = actual.astype(np.float64).ravel()
    e = np.asarray(expected).astype(np.float64).ravel()
    n = a.size
    if n == 0:
        return CheckOutcome(True)
    nan_a = np.isnan(a)
    if nan_a.any():
        count = int(nan_a.sum())
        first = int(np.argmax(nan_a))
        ref_nan = int(np.isnan(e).sum())
        note = f"; the reference itself has {ref_nan} NaN" if ref_nan else " (element never written?)"
        return CheckOutcome(
            False,
            f"{head}: {count} of {n} elements are NaN, first at {_fmt_index(first, actual.shape)}{note}",
            math.inf, math.inf,
        )
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(a == e, 0.0, np.abs(a - e))  # equal infinities agree
        diff = np.where(np.isnan(diff), np.inf, diff)  # inf vs -inf, or vs NaN in the reference
        finite_e = np.abs(e[np.isfinite(e)])
        magnitude = float(finite_e.max()) if finite_e.size else 0.0
        allowed = tol.atol + tol.rtol * np.abs(e) + tol.rtol * MAGNITUDE_SHARE * magnitude
        allowed = np.where(np.isfinite(e), allowed, 0.0)  # an infinity must be matched exactly
        rel = diff / np.maximum(np.abs(e), np.finfo(np.float64).tiny)
    if actual.dtype.kind in "iub":  # exact, in the native type (float64 loses int64 bits)
        bad = actual.ravel() != np.asarray(expected).astype(actual.dtype).ravel()
    else:
        bad = diff > allowed
    max_abs = float(diff.max())
    max_rel = float(rel[diff > 0].max()) if (diff > 0).any() else 0.0
    if not bad.any():
        return CheckOutcome(True, "", max_abs, max_rel)
    worst = int(np.argmax(np.where(bad, diff / np.maximum(allowed, 1e-300), 0.0)))
    msg = (
        f"{head}: {int(bad.sum())} of {n} elements differ beyond rtol={tol.rtol:.1e}, atol={tol.atol:.1e}; "
        f"max abs err {max_abs:.4g}, max rel err {max_rel:.4g}; worst at {_fmt_index(worst, actual.shape)}: "
        f"got {a[worst]:.6g}, expected {e[worst]:.6g}"
    )
    return CheckOutcome(False, msg, max_abs, max_rel)


def check_outputs(
    actual: Mapping[str, np.ndarray], expected: Mapping[str, np.ndarray], reduce_len: int = 1
) -> CheckOutcome:
    """Check every output in `actual` against `expected`; the first failure is reported."""
    worst_abs = worst_rel = 0.0
    for name, arr in actual.items():
        if name not in expected:
            return CheckOutcome(False, f"output {name!r}: the reference has no tensor of that name",
                                math.inf, math.inf)
        out = check_array(name, arr, expected[name], reduce_len)
        if not out.ok:
            return out
        worst_abs, worst_rel = max(worst_abs, out.max_abs_err), max(worst_rel, out.max_rel_err)
    return CheckOutcome(True, "", worst_abs, worst_rel)
