"""The C renderer: identifiers, dtypes, integer arithmetic, temporaries and unrolling, each checked by
building the kernel and comparing with the numpy reference."""

from __future__ import annotations

import re

import numpy as np
import pytest

import autosched as asc
from autosched import te
from tests.support.sched_helpers import check, op


def _body(src: str) -> str:
    return src.split("int default_function(", 1)[1]


# ---- identifiers -------------------------------------------------------------------------------------


@pytest.mark.parametrize("tname,axis", [("int", "i"), ("j", "j"), ("expf", "i"), ("free", "double"),
                                        ("default_function", "i"), ("asc_error", "M_PI"), ("linux", "NULL"),
                                        ("INT32_MAX", "restrict")])
def test_names_that_clash_in_c(tname: str, axis: str) -> None:
    """Tensor and axis names are plain identifiers to te; in C they may be keywords, library names or a
    loop variable of the same name: the renderer gives each object its own legal identifier."""
    A = te.placeholder((4, 6), tname)
    B = te.compute((4, 6), lambda i, j: te.exp(A[i, j]) + 1.0, "for", axis_names=[axis, "k"])
    C = te.compute((4, 6), lambda i, j: B[i, j] * A[i, j], "C", axis_names=["q", axis])
    check(asc.create_schedule(C), [A, C])


def test_cache_stage_name_does_not_alias_a_user_tensor() -> None:
    """`A.local` (a cache) and a user's `A_local` get distinct buffers (they used to share one)."""
    A = te.placeholder((4, 4), "A")
    AL = te.compute((4, 4), lambda i, j: A[i, j] + 1.0, "A_local")
    B = te.compute((4, 4), lambda i, j: AL[i, j] * 10.0 + A[j, i], "B")
    s = asc.create_schedule(B)
    s.cache_read(A, "local", [B])
    text = asc.lower(s, [A, B]).show()
    assert "allocate A_local[4, 4]" in text and "allocate A_local_2[4, 4]" in text
    check(s, [A, B])


def test_kernel_name_checked() -> None:
    A, B, C = op("matmul", 2, 2, 2)
    s = asc.create_schedule(C)
    with pytest.raises(asc.ScheduleError, match="invalid kernel name 'my kernel'"):
        asc.lower(s, [A, B, C], name="my kernel")
    with pytest.raises(ValueError, match="kernel name 'float' is reserved"):
        asc.build(s, [A, B, C], name="float")
    f = asc.build(s, [A, B, C], name="A")  # the entry and a parameter may not share a name
    assert "int A(float* restrict A_2" in f.source
    check(s, [A, B, C])


# ---- dtypes ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int32", "int64"])
@pytest.mark.parametrize("kind", ["sum", "max", "min"])
def test_reductions_by_dtype(dtype: str, kind: str) -> None:
    X, out = op("reduce", (5, 13), 1, kind=kind, dtype=dtype)
    s = asc.create_schedule(out)
    ko, ki = s[out].split("r1", factor=4)
    s[out].reorder(ko, out.op.axis[0], ki)
    check(s, [X, out])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "int64"])
def test_elementwise_and_matmul_by_dtype(dtype: str) -> None:
    A, B, C = op("matmul", 5, 17, 3, dtype)
    s = asc.create_schedule(C)
    s[C].vectorize(C.op.axis[1])
    check(s, [A, B, C])
    X, Y = op("transpose", (3, 5, 2), (2, 0, 1), dtype)
    check(asc.create_schedule(Y), [X, Y])


def test_integer_floordiv_and_mod_of_negative_values() -> None:
    """te's `//` and `%` are floor division and modulo (Python's), not C's truncation."""
    X = te.placeholder((16,), "X", "int32")
    Y = te.compute((16,), lambda i: X[i] // 3 + X[i] % 5 * 100, "Y")
    s = asc.create_schedule(Y)
    f = asc.build(s, [X, Y])
    x = np.arange(-8, 8, dtype="int32")
    y = np.empty(16, "int32")
    f(x, y)
    np.testing.assert_array_equal(y, x // 3 + x % 5 * 100)


def test_index_arithmetic_with_floordiv_mod_after_fuse() -> None:
    X, Y = op("transpose", (5, 7, 3), (2, 0, 1))
    s = asc.create_schedule(Y)
    f = s[Y].fuse(*Y.op.axis)
    fo, fi = s[Y].split(f, factor=16)
    s[Y].parallel(fo)
    check(s, [X, Y])


def test_casts_and_selects() -> None:
    X = te.placeholder((9,), "X", "float32")
    Y = te.compute((9,), lambda i: te.if_then_else(X[i] > 0.0, (X[i] * 10.0).astype("int32"), -1), "Y")
    Z = te.compute((9,), lambda i: Y[i].astype("float64") / 4.0, "Z")
    check(asc.create_schedule(Z), [X, Z])


def test_infinities_as_constants() -> None:
    X = te.placeholder((6,), "X")
    Y = te.compute((6,), lambda i: te.if_then_else(X[i] > 0.5, te.const(float("inf")), te.max.identity("float32")),
                   "Y")
    s = asc.create_schedule(Y)
    f = asc.build(s, [X, Y])
    assert "INFINITY" in _body(f.source)
    x = np.linspace(0, 1, 6, dtype="float32")
    y = np.empty(6, "float32")
    f(x, y)
    np.testing.assert_array_equal(y, np.where(x > 0.5, np.inf, -np.inf))


# ---- temporaries -------------------------------------------------------------------------------------------


def test_large_temporaries_go_to_the_heap() -> None:
    """A tile within the stack limit is a local array; a larger one is allocated with aligned_alloc
    and freed."""
    X = te.placeholder((4, 20000), "X")
    Y = te.compute((4, 20000), lambda i, j: X[i, j] * 2.0, "Y")
    Z = te.compute((4, 20000), lambda i, j: Y[i, j] + Y[i, 19999 - j], "Z")
    s = asc.create_schedule(Z)
    s[Y].compute_at(s[Z], Z.op.axis[0])  # 20000 floats = 80 KB: on the stack
    f = check(s, [X, Z])
    assert re.search(r"float Y\[20000\] __attribute__\(\(aligned\(64\)\)\);", f.source)
    f2 = check(asc.create_schedule(Z), [X, Z])  # Y at root: a 320 KB function-level temporary
    assert "aligned_alloc(64, 320000)" in f2.source and "free(Y);" in f2.source


def test_global_temporary_between_stages() -> None:
    X, W, bias, out = op("dense_bias_relu", 6, 10, 7)
    f = check(asc.create_schedule(out), [X, W, bias, out])
    assert "aligned_alloc" in f.source  # `dense` lives between the two stages


# ---- unrolling ------------------------------------------------------------------------------------------------


def test_unroll_in_source_and_by_pragma() -> None:
    A, B, C = op("matmul", 4, 8, 100)
    s = asc.create_schedule(C)
    i, j = C.op.axis
    s[C].reorder(i, "k", j)
    s[C].unroll(j)  # 8 iterations of one statement: written out in the source
    s[C].unroll("k")  # 100 iterations: too long for the source, a GCC unroll pragma
    f = check(s, [A, B, C])
    body = _body(f.source)
    assert "for (int32_t j" not in body
    assert "#pragma GCC unroll 64" in body


def test_unrolled_loop_with_tail() -> None:
    X = te.placeholder((10,), "X")
    Y = te.compute((10,), lambda i: X[i] + 1.0, "Y")
    s = asc.create_schedule(Y)
    io, ii = s[Y].split(Y.op.axis[0], factor=4)
    s[Y].unroll(ii)
    f = check(s, [X, Y])
    # the ragged last tile is peeled (`loop_partition`): two whole tiles unrolled, then Y[8] and Y[9]
    assert "i_outer < 2;" in f.source and "#pragma GCC unroll" not in f.source
    assert "Y[8] = (X[8] + 1.0f);" in f.source and "Y[9] = (X[9] + 1.0f);" in f.source


def test_parallel_reduction_through_rfactor() -> None:
    X, out = op("reduce", (64, 33), (0, 1))
    s = asc.create_schedule(out)
    f = s[out].fuse("r0", "r1")
    fo, fi = s[out].split(f, nparts=8)
    rf = s.rfactor(out, fo)
    s[rf].parallel(s[rf].op.axis[0])
    k = check(s, [X, out])
    assert "#pragma omp parallel for" in k.source
