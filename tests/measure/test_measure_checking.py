"""The correctness check: tolerances by dtype, NaN never passes, messages name the damage."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from autosched.measure.checking import check_array, check_outputs, tolerance_for


def test_float32_within_tolerance_passes_and_reports_error() -> None:
    e = np.linspace(-3, 3, 100, dtype=np.float32)
    a = e * (1 + 1e-6)
    out = check_array("C", a, e)
    assert out.ok and 0 < out.max_abs_err < 1e-5


def test_float32_wrong_fails_with_location_and_errors() -> None:
    e = np.zeros((4, 5), np.float32)
    a = e.copy()
    a[2, 3] = 0.5
    out = check_array("C", a, e)
    assert not out.ok
    assert "'C'" in out.message and "(2, 3)" in out.message and "max abs err 0.5" in out.message
    assert "1 of 20" in out.message and out.max_abs_err == pytest.approx(0.5)


def test_nan_never_passes_even_if_reference_is_nan() -> None:
    e = np.array([1.0, np.nan], np.float32)
    a = np.array([1.0, np.nan], np.float32)
    out = check_array("C", a, e)
    assert not out.ok and "NaN" in out.message and "reference itself" in out.message
    out = check_array("C", np.array([np.nan, 2.0], np.float32), np.array([1.0, 2.0], np.float32))
    assert not out.ok and "never written" in out.message and "(0,)" in out.message


def test_equal_infinities_pass_opposite_fail() -> None:
    e = np.array([np.inf, -np.inf, 1.0])
    assert check_array("C", e.copy(), e).ok
    assert not check_array("C", np.array([-np.inf, -np.inf, 1.0]), e).ok


def test_integers_are_exact() -> None:
    e = np.arange(10, dtype=np.int64) * (1 << 40)
    assert check_array("I", e.copy(), e).ok
    a = e.copy()
    a[3] += 1
    out = check_array("I", a, e)
    assert not out.ok and "(3,)" in out.message


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64"])
def test_low_and_high_precision(dtype: str) -> None:
    dt = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    e = np.linspace(-2, 2, 64).astype(np.float64)
    a = e.astype(dt)  # rounding to the dtype is within its tolerance
    assert check_array("C", a, e).ok
    assert not check_array("C", (e + 0.25).astype(dt), e).ok


def test_tolerance_grows_with_reduction_length_only_past_threshold() -> None:
    assert tolerance_for("float32", 1) == tolerance_for("float32", 256)
    big = tolerance_for("float32", 256 * 64)
    assert big.rtol == pytest.approx(8 * tolerance_for("float32").rtol)
    assert tolerance_for("int32", 10**6).rtol == 0.0
    e = np.full(8, 100.0, np.float32)
    a = e * (1 + 3e-4)
    assert not check_array("C", a, e).ok
    assert check_array("C", a, e, reduce_len=256 * 16).ok


def test_long_sum_cancellation_is_judged_against_the_output_scale() -> None:
    e = np.array([1000.0, 1e-4], np.float32)  # second element: a near-cancelled sum
    a = np.array([1000.0, 5e-4], np.float32)  # off by 4e-4 absolute, 400% relative
    assert check_array("C", a, e).ok


def test_check_outputs_reports_missing_and_shape_mismatch() -> None:
    z = np.zeros(3, np.float32)
    assert not check_outputs({"C": z}, {"D": z}).ok
    out = check_outputs({"C": z}, {"C": np.zeros(4, np.float32)})
    assert not out.ok and "shape" in out.message and math.isinf(out.max_abs_err)
    assert check_outputs({"C": z, "D": z}, {"C": z, "D": z}).ok
