"""Vectorization really happens: loops a schedule marks `vectorize` become vector code.

Two ways lead there. A vectorized loop whose body is plain arithmetic on contiguous data is written
with GCC vector types (`asc_f32x16`) by the renderer itself, so no loop is left for the compiler to
report; any other loop gets `#pragma omp simd` and gcc's vectorization report must confirm it
(`BuiltKernel.not_vectorized` lists those it did not vectorize).
"""

from __future__ import annotations

import numpy as np
import pytest

import autosched as asc
from autosched import te
from autosched.codegen.vector_c import vtype
from autosched.target.vector import lanes
from tests.support.sched_helpers import check, matmul_packed, matmul_tiled, op


def _body(f: asc.BuiltKernel) -> str:
    return f.source.split("int default_function(", 1)[1]


@pytest.mark.parametrize("make", [matmul_tiled, matmul_packed], ids=["tiled", "packed"])
def test_matmul_schedules_vectorize(make) -> None:
    s, args = make()
    f = check(s, args)
    assert f.not_vectorized == []
    body = _body(f)
    assert "asc_st_asc_f32x16(" in body and "asc_ld_asc_f32x16(" in body
    assert "#pragma omp simd" not in body  # every vectorized loop became explicit vector code


@pytest.mark.parametrize("shape", [(8, 64), (7, 13)])
def test_elementwise_gelu_vectorizes_through_the_compiler(shape) -> None:
    """tanh in the body: `omp simd` + libmvec's vector tanhf; gcc's report must confirm the loop."""
    X, Y = op("gelu", *shape)
    s = asc.create_schedule(Y)
    s[Y].vectorize(Y.op.axis[1])
    s[Y].parallel(Y.op.axis[0])
    f = check(s, [X, Y])
    assert len(f.source_obj.vector_loops) == 1
    start, end, _, _ = f.source_obj.vector_loops[0]
    assert f.source.splitlines()[start - 2].strip() == "#pragma omp simd"
    assert any(start <= ln <= end for ln in f.library.vectorized_lines)  # gcc's report names the loop
    assert f.not_vectorized == []


def test_elementwise_add_explicit_vectors() -> None:
    A = te.placeholder((4, 48), "A")
    B = te.placeholder((4, 48), "B")
    C = te.compute((4, 48), lambda i, j: A[i, j] + B[i, j] * 2.0, "C")
    s = asc.create_schedule(C)
    s[C].vectorize(C.op.axis[1])
    f = check(s, [A, B, C])
    assert f.not_vectorized == []
    assert _body(f).count("asc_st_asc_f32x16(") == 3  # 48 = 3 vectors of 16 lanes


def test_float64_explicit_vectors() -> None:
    A, B, C = op("matmul", 8, 16, 5, "float64")
    s = asc.create_schedule(C)
    i, j = C.op.axis
    s[C].reorder(i, "k", j)
    s[C].vectorize(j)
    f = check(s, [A, B, C])
    assert "asc_st_asc_f64x8(" in _body(f)
    assert f.not_vectorized == []


def test_strided_loop_shows_up_as_not_vectorized() -> None:
    """A transpose's vectorized loop reads with a stride: gcc gives up, and the kernel says so."""
    X, Y = op("transpose", (16, 16), (1, 0))
    s = asc.create_schedule(Y)
    s[Y].vectorize(Y.op.axis[1])
    f = check(s, [X, Y])
    (start, _, _, _), = f.source_obj.vector_loops
    assert f.not_vectorized == [start]
    assert f.source.splitlines()[start - 1].lstrip().startswith("for (int32_t i1 = 0;")


def test_outer_loop_vectorize_not_reported_as_vectorized() -> None:
    A, B, C = op("matmul", 16, 16, 16)
    s = asc.create_schedule(C)
    s[C].vectorize(C.op.axis[0])
    f = check(s, [A, B, C])
    (start, _, _, _), = f.source_obj.vector_loops
    assert start not in f.library.vectorized_lines  # gcc vectorized the inner j loop, not i
    assert f.not_vectorized == [start]


def test_vector_loop_with_tail_ends_in_a_masked_vector() -> None:
    """A vectorized loop whose extent is not a whole number of vectors stays explicit vector code: whole
    vectors, then one partial vector read and written through lane masks (never past the row)."""
    vt = vtype("float32")
    X = te.placeholder((3, 20), "X")
    Y = te.compute((3, 20), lambda i, j: X[i, j] * X[i, j], "Y")
    s = asc.create_schedule(Y)
    jo, ji = s[Y].split(Y.op.axis[1], factor=16)  # 20 = 16 + 4: the inner loop has a tail
    s[Y].vectorize(ji)
    f = check(s, [X, Y])
    body = _body(f)
    assert "#pragma omp simd" not in body
    assert f"asc_ldm_{vt}(" in body and f"asc_stm_{vt}(" in body
    assert f.not_vectorized == []


@pytest.mark.parametrize("n", [1, 3, 13, 31])
def test_partial_vectors_at_any_width(n: int) -> None:
    """Rows narrower than a vector, or a vector and a part, on this host's width: exact results, and
    the output row's neighbours untouched (the masked store writes only its lanes)."""
    X = te.placeholder((5, n), "X")
    Y = te.compute((5, n), lambda i, j: X[i, j] * 2.0 + 1.0, "Y")
    s = asc.create_schedule(Y)
    s[Y].vectorize(Y.op.axis[1])
    f = check(s, [X, Y])
    assert f"asc_stm_{vtype('float32')}(" in _body(f) or n % lanes("float32") == 0


def test_explicit_vectors_broadcast_invariant_values() -> None:
    """A store whose value does not depend on the vectorized loop is broadcast to every lane."""
    X = te.placeholder((5,), "X")
    Y = te.compute((5, 32), lambda i, j: X[i] * 3.0, "Y")
    s = asc.create_schedule(Y)
    s[Y].vectorize(Y.op.axis[1])
    f = check(s, [X, Y])
    assert "((asc_f32x16){0} + (" in _body(f)
    x = np.arange(5, dtype="float32")
    y = np.empty((5, 32), "float32")
    f(x, y)
    np.testing.assert_array_equal(y, np.repeat(x[:, None] * 3.0, 32, axis=1))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_min_max_are_explicit_vectors_with_the_scalar_code_s_lanes(dtype) -> None:
    """max/min (a relu epilogue) are written as vector helpers, not `omp simd`, and give in every
    lane what the scalar code gives (`a > b ? a : b`): NaN compares false, so max(NaN, 0) is 0."""
    A = te.placeholder((4, 64), "A", dtype)
    B = te.placeholder((4, 64), "B", dtype)
    C = te.compute((4, 64), lambda i, j: te.maximum(A[i, j], 0.0) + te.minimum(A[i, j], B[i, j]), "C")
    s = asc.create_schedule(C)
    s[C].vectorize(C.op.axis[1])
    f = asc.build(s, [A, B, C])
    body = _body(f)
    assert "#pragma omp simd" not in body
    assert "asc_max_asc_f" in body and "asc_min_asc_f" in body
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 64)).astype(dtype)
    b = rng.standard_normal((4, 64)).astype(dtype)
    a[0, :5] = [np.nan, -0.0, 0.0, np.inf, -np.inf]
    b[0, :5] = [1.0, np.nan, -0.0, np.nan, 2.0]
    c = np.full((4, 64), 7.0, dtype)
    f(a, b, c)
    with np.errstate(invalid="ignore"):
        want = np.where(a > 0.0, a, 0.0) + np.where(a < b, a, b)
    np.testing.assert_array_equal(c, want.astype(dtype))


def test_a_partial_vector_never_writes_lanes_a_later_loop_reads() -> None:
    """Found by the schedule fuzzer: a row variance split into 16 lane accumulators (an rfactor) over
    31 columns ends in a partial vector of 15; its 16th lane holds the sum of the full vectors and is
    read by the final sum, so that partial vector is masked, never written at full width."""
    import numpy as np

    from autosched.space.registry import make_space
    from autosched.workload import Workload

    w = Workload.create("layernorm", 17, 31, 1e-5, "float32")
    space = make_space(w, "cpu")
    values = {k.name: k.choices[0] for k in space.space.knobs}
    lanes_knobs = [k.name for k in space.space.knobs if k.name.endswith(".lanes") and 16 in k.choices]
    if not lanes_knobs:
        pytest.skip("no 16-lane rfactor choice on this host")
    values[lanes_knobs[0]] = 16
    f = asc.build(space.apply(space.space.index_of(values)), [w.dag[a] for a in w.args_order])
    x = w.dag.random_inputs(0)
    outs = {t.name: np.zeros(t.shape, t.dtype) for t in w.dag.outputs}
    f(*[x[a] if a in x else outs[a] for a in w.args_order])
    ref = w.dag.evaluate(x)
    for name, got in outs.items():
        np.testing.assert_allclose(got, ref[name], rtol=1e-4, atol=1e-5)
