"""The numpy reference of te: intrinsics, dtypes, casts, padding, reducers, stage order, FLOPs.

The reference is the ground truth every generated kernel is checked against, so each construct
is compared with a direct numpy computation of the same math.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import erf

from autosched import te
from autosched.dtypes import np_dtype

FLOATS = ["float32", "float64", "float16", "bfloat16"]
INTS = ["int32", "int64"]
RTOL = {"float64": 1e-12, "float32": 1e-6, "float16": 1e-3, "bfloat16": 1e-2}


def run1(fn, x: np.ndarray, dtype: str, name: str = "B"):
    """Evaluate `B[i] = fn(A[i])` on the given values of A (1-D)."""
    A = te.placeholder(x.shape, "A", dtype)
    B = te.compute(x.shape, lambda i: fn(A[i]), name)
    dag = te.ComputeDAG(B)
    return dag.evaluate({"A": x})[name], B


def as_stored(x: np.ndarray, dtype: str) -> np.ndarray:
    return x.astype(np_dtype(dtype))


UNARY = {
    "exp": (te.exp, np.exp, (-3, 3)),
    "log": (te.log, np.log, (0.1, 4)),
    "sqrt": (te.sqrt, np.sqrt, (0.0, 4)),
    "rsqrt": (te.rsqrt, lambda v: 1 / np.sqrt(v), (0.1, 4)),
    "tanh": (te.tanh, np.tanh, (-3, 3)),
    "erf": (te.erf, erf, (-2, 2)),
    "sigmoid": (te.sigmoid, lambda v: 0.5 * (1 + np.tanh(v / 2)), (-6, 6)),
    "abs": (te.abs, np.abs, (-3, 3)),
    "floor": (te.floor, np.floor, (-3, 3)),
    "ceil": (te.ceil, np.ceil, (-3, 3)),
    "neg": (lambda v: -v, np.negative, (-3, 3)),
    "pow": (lambda v: te.pow(v, 2.5), lambda v: v ** 2.5, (0.0, 3)),
    "pow_op": (lambda v: v ** 3, lambda v: v ** 3, (-2, 2)),
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("fname", sorted(UNARY))
def test_float_intrinsics_match_numpy(fname: str, dtype: str) -> None:
    fn, ref, (lo, hi) = UNARY[fname]
    x = as_stored(np.random.default_rng(1).uniform(lo, hi, 37), dtype)
    got, B = run1(fn, x, dtype)
    assert B.dtype == dtype and got.dtype == np_dtype(dtype)
    want = as_stored(ref(x.astype(np.float64)), dtype)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=RTOL[dtype], atol=1e-30)


@pytest.mark.parametrize("dtype", FLOATS + INTS)
def test_binary_arithmetic_matches_numpy(dtype: str) -> None:
    rng = np.random.default_rng(2)
    a = as_stored(rng.integers(-20, 20, (5, 6)), dtype)
    b = as_stored(rng.integers(1, 9, (5, 6)) * rng.choice([-1, 1], (5, 6)), dtype)
    A = te.placeholder((5, 6), "A", dtype)
    B = te.placeholder((5, 6), "B", dtype)
    ops = {
        "add": (lambda x, y: x + y, np.add), "sub": (lambda x, y: x - y, np.subtract),
        "mul": (lambda x, y: x * y, np.multiply), "max": (te.maximum, np.maximum),
        "min": (te.minimum, np.minimum), "tmax": (lambda x, y: te.max(x, y), np.maximum),
        "tmin": (lambda x, y: te.min(x, y), np.minimum),
    }
    if dtype in INTS:  # integer `/` and `//` are floor division, `%` has Python's sign, as numpy
        ops.update(div=(lambda x, y: x / y, np.floor_divide), fdiv=(lambda x, y: x // y, np.floor_divide),
                   mod=(lambda x, y: x % y, np.mod))
    else:
        ops.update(div=(lambda x, y: x / y, np.divide))
    outs = {k: te.compute((5, 6), lambda i, j, f=f: f(A[i, j], B[i, j]), k) for k, (f, _) in ops.items()}
    res = te.ComputeDAG(list(outs.values())).evaluate({"A": a, "B": b})
    for k, (_, ref) in ops.items():
        assert outs[k].dtype == dtype
        want = as_stored(ref(a.astype(np.float64), b.astype(np.float64)), dtype)
        np.testing.assert_allclose(res[k].astype(np.float64), want.astype(np.float64),
                                   rtol=RTOL.get(dtype, 0), err_msg=k)


@pytest.mark.parametrize("dtype", INTS)
def test_float_intrinsic_of_int_is_computed_in_float32(dtype: str) -> None:
    x = np.array([-2, 0, 1, 3], dtype=dtype)
    got, B = run1(te.exp, x, dtype)
    assert B.dtype == "float32"
    np.testing.assert_allclose(got, np.exp(x.astype(np.float64)).astype(np.float32), rtol=1e-7)
    got, B = run1(te.abs, x, dtype)
    assert B.dtype == dtype and got.tolist() == [2, 0, 1, 3]


def test_scalar_constants_take_the_tensor_dtype() -> None:
    A = te.placeholder((3,), "A", "float16")
    assert (A[0] * 2).dtype == "float16" and (2.5 + A[0]).dtype == "float16"
    ints = te.placeholder((3,), "I", "int64")
    assert (ints[0] + 1).dtype == "int64" and (ints[0] * 0.5).dtype == "float32"
    assert te.const(1.5, "float64").dtype == "float64"


@pytest.mark.parametrize("src,dst", [("float32", "int32"), ("float64", "int64"), ("float32", "float16"),
                                     ("float64", "bfloat16"), ("int32", "float32"), ("int64", "float64"),
                                     ("bfloat16", "float32"), ("float16", "float64"), ("int64", "int32")])
def test_casts(src: str, dst: str) -> None:
    x = as_stored(np.array([-2.7, -1.5, -0.2, 0.0, 0.3, 1.5, 2.7, 100.123]) * (1 if src in FLOATS else 3), src)
    got, B = run1(lambda v: te.cast(v, dst), x, src)
    assert B.dtype == dst
    wide = x.astype(np.float64)
    want = np.trunc(wide) if dst in INTS else wide  # float -> int truncates toward zero, like C
    np.testing.assert_array_equal(got, want.astype(np_dtype(dst)))
    assert te.cast(te.placeholder((1,), "Z", src)[0], dst).dtype == dst


def test_cast_then_arithmetic_rounds_at_the_cast() -> None:
    x = np.array([1.0 + 2 ** -12, 3.14159], dtype=np.float64)  # not representable in float16
    got, _ = run1(lambda v: te.cast(te.cast(v, "float16"), "float64") * 2.0, x, "float64")
    np.testing.assert_array_equal(got, x.astype(np.float16).astype(np.float64) * 2)


def test_if_then_else_padding_matches_np_pad() -> None:
    H, W, p = 4, 5, 2
    A = te.placeholder((H, W), "A")
    P = te.compute((H + 2 * p, W + 2 * p), lambda y, x: te.if_then_else(
        te.all(y >= p, y < H + p, x >= p, x < W + p), A[y - p, x - p], -7.0), "pad")
    x = np.arange(H * W, dtype=np.float32).reshape(H, W)
    got = te.ComputeDAG(P).evaluate({"A": x})["pad"]
    np.testing.assert_array_equal(got, np.pad(x, p, constant_values=-7.0))


def test_select_promotes_branches_and_picks_per_element() -> None:
    A = te.placeholder((6,), "A", "int32")
    B = te.compute((6,), lambda i: te.if_then_else(A[i] > 0, A[i], 0.5), "B")  # int vs float32 branch
    assert B.dtype == "float32"
    x = np.array([-3, -1, 0, 1, 2, 9], dtype=np.int32)
    got = te.ComputeDAG(B).evaluate({"A": x})["B"]
    np.testing.assert_array_equal(got, np.where(x > 0, x, 0.5).astype(np.float32))
    C = te.compute((6,), lambda i: te.if_then_else(te.any(te.eq(i, 0), te.ne(i, i)), 1, A[i]), "C")
    assert te.ComputeDAG(C).evaluate({"A": x})["C"].tolist() == [1, -1, 0, 1, 2, 9]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_builtin_reducers(dtype: str) -> None:
    x = as_stored(np.random.default_rng(3).integers(-9, 9, (4, 5, 6)), dtype)
    A = te.placeholder(x.shape, "A", dtype)
    outs = []
    for name, red in (("s", te.sum), ("mx", te.max), ("mn", te.min)):
        j, k = te.reduce_axis(5, "j"), te.reduce_axis(6, "k")
        outs.append(te.compute((4,), lambda i, red=red, j=j, k=k: red(A[i, j, k], axis=[j, k]), name))
    res = te.ComputeDAG(outs).evaluate({"A": x})
    np.testing.assert_array_equal(res["s"], x.sum(axis=(1, 2)))
    np.testing.assert_array_equal(res["mx"], x.max(axis=(1, 2)))
    np.testing.assert_array_equal(res["mn"], x.min(axis=(1, 2)))


def test_custom_reducer_prod_with_identity_and_where() -> None:
    prod = te.comm_reducer(lambda x, y: x * y, 1.0, "prod")
    assert prod.identity("float32").value == 1.0 and prod.identity("int32").value == 1
    x = np.random.default_rng(4).uniform(0.5, 1.5, (3, 7)).astype(np.float32)
    A = te.placeholder((3, 7), "A")
    k = te.reduce_axis(7, "k")
    P = te.compute((3,), lambda i: prod(A[i, k], axis=k), "P")
    k2 = te.reduce_axis(7, "k")
    Q = te.compute((3,), lambda i: prod(A[i, k2], axis=k2, where=k2 < 3), "Q")  # identity fills the rest
    res = te.ComputeDAG([P, Q]).evaluate({"A": x})
    np.testing.assert_allclose(res["P"], x.astype(np.float64).prod(axis=1), rtol=1e-6)
    np.testing.assert_allclose(res["Q"], x[:, :3].astype(np.float64).prod(axis=1), rtol=1e-6)
    per_dtype = te.comm_reducer(lambda x, y: te.maximum(x, y), {"float32": -1e30, "default": -5}, "mymax")
    assert per_dtype.identity("float32").value == -1e30 and per_dtype.identity("int64").value == -5


def test_max_where_uses_minus_inf_identity() -> None:
    x = np.array([[-5.0, -4.0, 9.0]], dtype=np.float32)
    A = te.placeholder((1, 3), "A")
    k = te.reduce_axis(3, "k")
    M = te.compute((1,), lambda i: te.max(A[i, k], axis=k, where=k < 2), "M")
    assert te.ComputeDAG(M).evaluate({"A": x})["M"].tolist() == [-4.0]


def test_multi_stage_dag_order_and_all_stages_evaluated() -> None:
    A = te.placeholder((4,), "A")
    W = te.placeholder((4,), "W")
    B = te.compute((4,), lambda i: A[i] + 1.0, "B")
    C = te.compute((4,), lambda i: B[i] * W[i], "C")
    D = te.compute((4,), lambda i: C[i] + B[i], "D")
    dag = te.ComputeDAG(D)
    assert [t.name for t in dag.tensors] == ["A", "B", "W", "C", "D"]  # inputs before their consumers
    assert [t.name for t in dag.placeholders] == ["A", "W"]
    assert [t.name for t in dag.computes] == ["B", "C", "D"]
    assert [t.name for t in dag.consumers(B)] == ["C", "D"]
    assert dag["C"] is C
    inp = dag.random_inputs(seed=7)
    assert set(inp) == {"A", "W"} and all(v.dtype == np.float32 for v in inp.values())
    np.testing.assert_array_equal(inp["A"], dag.random_inputs(seed=7)["A"])  # deterministic
    res = dag.evaluate(inp)
    assert set(res) == {"B", "C", "D"}
    b = (inp["A"] + 1).astype(np.float32)
    np.testing.assert_allclose(res["D"], (b * inp["W"]).astype(np.float32) + b, rtol=1e-6)


def test_flop_counts() -> None:
    M, N, K = 8, 6, 5
    for dtype in ("float32", "int32"):  # value arithmetic counts for ints too; index arithmetic never
        A = te.placeholder((M, K), "A", dtype)
        B = te.placeholder((K, N), "B", dtype)
        k = te.reduce_axis(K, "k")
        C = te.compute((M, N), lambda i, j, A=A, B=B, k=k: te.sum(A[i, k] * B[k, j], axis=k), "C")
        assert te.ComputeDAG(C).flop_count() == 2 * M * N * K
    X = te.placeholder((10,), "X")
    Y = te.compute((10,), lambda i: te.exp(X[i]) * 2.0 + X[(i * 3 + 1) % 10], "Y")  # exp, mul, add
    assert te.ComputeDAG(Y).flop_count() == 30
    P = te.compute((12,), lambda i: te.if_then_else(te.all(i >= 1, i < 11), X[i - 1], 0.0), "P")
    assert te.ComputeDAG(P).flop_count() == 0  # padding is data movement
    k = te.reduce_axis(10, "k")
    R = te.compute((3,), lambda i: te.max(X[k], axis=k), "R")
    assert te.ComputeDAG(R).flop_count() == 30


def test_einsum_fast_path_agrees_with_grid_in_broadcast_cases() -> None:
    """Regression: a reduce axis no operand reads must scale the sum, and an output axis no operand
    reads must broadcast (np.einsum drops the first and rejects the second)."""
    x = np.random.default_rng(5).uniform(-1, 1, (4, 3)).astype(np.float32)
    v = np.random.default_rng(6).uniform(-1, 1, (3,)).astype(np.float32)
    A = te.placeholder((4, 3), "A")
    V = te.placeholder((3,), "V")
    k = te.reduce_axis(3, "k")
    C = te.compute((4, 5), lambda i, j: te.sum(A[i, k] * V[k], axis=k), "C")
    r = te.reduce_axis(2, "r")
    E = te.compute((4, 3), lambda i, j: te.sum(A[i, j] * A[i, j], axis=r), "E")
    res = te.ComputeDAG([C, E]).evaluate({"A": x, "V": v})
    np.testing.assert_allclose(res["C"], np.repeat((x.astype(np.float64) @ v)[:, None], 5, 1), rtol=1e-6)
    np.testing.assert_allclose(res["E"], 2 * x.astype(np.float64) ** 2, rtol=1e-6)


def test_inputs_are_rounded_to_their_placeholder_dtype() -> None:
    x = np.array([1.0 + 2 ** -13, 0.1])  # float64 values given for a float16 input
    got, _ = run1(lambda a: a * 1.0, x, "float16")
    np.testing.assert_array_equal(got, x.astype(np.float16))


def test_reference_chunks_large_reductions() -> None:
    from autosched.te import reference

    A = te.placeholder((3, 50), "A")
    k = te.reduce_axis(50, "k")
    S = te.compute((3,), lambda i: te.sum(te.exp(A[i, k]), axis=k), "S")
    x = np.random.default_rng(8).uniform(-1, 1, (3, 50)).astype(np.float32)
    old = reference.CHUNK_ELEMENTS
    try:
        reference.CHUNK_ELEMENTS = 7  # force row and reduce-axis chunking
        got = te.ComputeDAG(S).evaluate({"A": x})["S"]
    finally:
        reference.CHUNK_ELEMENTS = old
    np.testing.assert_allclose(got, np.exp(x.astype(np.float64)).sum(1), rtol=1e-6)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 9), st.integers(1, 9), st.integers(1, 9), st.sampled_from(["float32", "int64"]))
def test_matmul_any_shape(M: int, N: int, K: int, dtype: str) -> None:
    A = te.placeholder((M, K), "A", dtype)
    B = te.placeholder((K, N), "B", dtype)
    k = te.reduce_axis(K, "k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), "C")
    dag = te.ComputeDAG(C)
    inp = dag.random_inputs(seed=M * 100 + N * 10 + K)
    want = inp["A"].astype(np.float64) @ inp["B"].astype(np.float64)
    np.testing.assert_allclose(dag.evaluate(inp)["C"], want.astype(np_dtype(dtype)), rtol=1e-6)


def test_a_reducer_is_known_by_what_it_combines_not_by_its_name() -> None:
    """A user's reducer called "sum" that multiplies is a product: the reference must not take numpy's
    sum path (nor the einsum path of a sum of products) because of the name."""
    named_sum = te.comm_reducer(lambda x, y: x * y, 1.0, "sum")
    assert named_sum is not te.sum
    rng = np.random.default_rng(7)
    x = rng.uniform(0.5, 1.5, (3, 5)).astype(np.float32)
    w = rng.uniform(0.5, 1.5, (5, 4)).astype(np.float32)
    A, W = te.placeholder((3, 5), "A"), te.placeholder((5, 4), "W")
    k = te.reduce_axis(5, "k")
    P = te.compute((3,), lambda i: named_sum(A[i, k], axis=k), "P")
    k2 = te.reduce_axis(5, "k2")
    C = te.compute((3, 4), lambda i, j: named_sum(A[i, k2] * W[k2, j], axis=k2), "C")
    res = te.ComputeDAG([P, C]).evaluate({"A": x, "W": w})
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    np.testing.assert_allclose(res["P"], x64.prod(axis=1), rtol=1e-6)
    np.testing.assert_allclose(res["C"], (x64[:, :, None] * w64[None, :, :]).prod(axis=1), rtol=1e-6)
