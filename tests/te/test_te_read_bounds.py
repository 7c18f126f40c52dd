"""Reads outside a tensor are refused when the compute is defined, unless a guard rules them out.

Each test plants a read that would leave its buffer (or one a guard makes safe) and checks the
definition is refused with a message naming the read, its range and the extent (or accepted).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from autosched import te
from autosched.te.dag import ComputeDAG
from autosched.te.expr import Binary, Const, Expr, Select
from autosched.te.interval import IndexOverflow, Infeasible, axis_facts, int_range
from autosched.te.read_bounds import ReadOutOfBoundsError
from autosched.workload import Workload, get_workload_func, registered_workloads


@pytest.fixture
def A() -> te.Tensor:
    return te.placeholder((64, 64), "A")


# ---- refused -------------------------------------------------------------------------------------


def test_off_by_one_left_is_refused_with_the_message(A: te.Tensor) -> None:
    with pytest.raises(ReadOutOfBoundsError) as exc:
        te.compute((64, 64), lambda i, k: A[i - 1, k], "B")
    msg = str(exc.value)
    assert msg.startswith('compute "B": read A[i - 1, k]: index 0 ranges over [-1, 62], outside [0, 63]')
    assert "te.if_then_else" in msg  # the way out is named
    assert isinstance(exc.value, ValueError)


def test_off_by_one_right_is_refused(A: te.Tensor) -> None:
    with pytest.raises(ReadOutOfBoundsError, match=r"read A\[i, k \+ 1\]: index 1 ranges over \[1, 64\], "
                                                   r"outside \[0, 63\]"):
        te.compute((64, 64), lambda i, k: A[i, k + 1], "B")


def test_reduce_axis_overrun_and_too_big_compute_are_refused(A: te.Tensor) -> None:
    k = te.reduce_axis(65, "k")
    with pytest.raises(ReadOutOfBoundsError, match=r"index 1 ranges over \[0, 64\]"):
        te.compute((64,), lambda i: te.sum(A[i, k], axis=k), "S")
    with pytest.raises(ReadOutOfBoundsError, match=r"index 0 ranges over \[0, 64\]"):
        te.compute((65, 64), lambda i, j: A[i, j], "C")


def test_guard_on_the_wrong_side_or_too_weak_is_refused(A: te.Tensor) -> None:
    with pytest.raises(ReadOutOfBoundsError, match=r"\[-1, -1\]"):  # the read sits in the else branch: i == 0
        te.compute((64,), lambda i: te.if_then_else(i >= 1, 0.0, A[i - 1, 0]), "B")
    with pytest.raises(ReadOutOfBoundsError, match=r"index 0 ranges over \[-1, 61\]"):
        te.compute((64,), lambda i: te.if_then_else(i < 63, A[i - 1, 0], 0.0), "B")
    with pytest.raises(ReadOutOfBoundsError):  # `|` proves neither side
        te.compute((64,), lambda i: te.if_then_else(te.any(i >= 1, i < 3), A[i - 1, 0], 0.0), "B")
    X = te.placeholder((64,), "X")
    with pytest.raises(ReadOutOfBoundsError):  # a float condition says nothing about the index
        te.compute((64,), lambda i: te.if_then_else(X[i] > 0.0, A[i - 1, 0], 0.0), "B")


def test_float_index_is_refused_naming_it_and_its_dtype(A: te.Tensor) -> None:
    with pytest.raises(TypeError, match=r"index 0 has dtype float32, needs an integer \(index i \+ 100000000.0\)"):
        te.compute((64, 64), lambda i, k: A[i + 1e8, k], "B")


def test_non_affine_indices_out_of_range_are_refused(A: te.Tensor) -> None:
    with pytest.raises(ReadOutOfBoundsError, match=r"A\[i // 2, 0\]: index 0 ranges over \[0, 64\]"):
        te.compute((130,), lambda i: A[i // 2, 0], "B")
    with pytest.raises(ReadOutOfBoundsError, match=r"ranges over \[1, 64\]"):
        te.compute((64,), lambda i: A[(i + 1) % 65, 0], "B")
    with pytest.raises(ReadOutOfBoundsError, match=r"ranges over \[0, 64\]"):
        te.compute((70,), lambda i: A[(i + 1) % 65, 0], "B")
    with pytest.raises(ReadOutOfBoundsError, match=r"ranges over \[0, 81\]"):
        te.compute((10, 10), lambda i, j: A[i * j, 0], "B")
    with pytest.raises(ReadOutOfBoundsError, match=r"ranges over \[-1, 62\]"):
        te.compute((64,), lambda i: A[te.maximum(i - 1, -1), 0], "B")


def test_data_dependent_index_must_be_guarded(A: te.Tensor) -> None:
    idx = te.placeholder((64,), "idx", "int32")
    with pytest.raises(ReadOutOfBoundsError, match="data-dependent index"):
        te.compute((64,), lambda i: A[idx[i], 0], "G")
    G = te.compute((64,), lambda i: te.if_then_else(te.all(idx[i] >= 0, idx[i] < 64), A[idx[i], 0], 0.0), "G")
    vals = {"A": np.arange(64 * 64, dtype=np.float32).reshape(64, 64),
            "idx": np.array([(i * 7) % 70 - 3 for i in range(64)], dtype=np.int32)}
    got = ComputeDAG(G).evaluate(vals)["G"]
    want = [vals["A"][j, 0] if 0 <= j < 64 else 0.0 for j in vals["idx"]]
    np.testing.assert_array_equal(got, want)


def test_index_arithmetic_that_overflows_is_refused(A: te.Tensor) -> None:
    with pytest.raises(ReadOutOfBoundsError, match="overflows int32"):
        te.compute((64,), lambda i: A[(i * 100000 * 100000) % 64, 0], "B")


def test_huge_placeholders_are_checked_without_enumerating() -> None:
    n = 2 ** 40
    big = te.placeholder((n,), "big")
    grid = te.placeholder((2 ** 21, 2 ** 21), "grid")
    assert te.compute((1000,), lambda i: big[i + (n - 1000)], "tail").shape == (1000,)  # an int64 index
    assert te.compute((2 ** 21, 2 ** 21), lambda i, j: grid[j, i], "t").shape == (2 ** 21, 2 ** 21)
    assert te.compute((n,), lambda i: big[i], "copy").shape == (n,)
    with pytest.raises(ReadOutOfBoundsError, match=rf"ranges over \[{n - 999}, {n}\], outside \[0, {n - 1}\]"):
        te.compute((1000,), lambda i: big[i + (n - 999)], "tail")
    # an int32 axis over 2**40 values: `i + 1` is int32 arithmetic that C would wrap
    with pytest.raises(ReadOutOfBoundsError, match=r"i \+ 1 ranges over \[1, \d+\], which overflows int32"):
        te.compute((n - 1,), lambda i: big[i + 1], "shift")


def test_big_python_ints_are_not_truncated_to_int32(A: te.Tensor) -> None:
    i = te.IterVar("i", 4, "spatial")
    assert (i + 2 ** 40).b.dtype == "int64" and (i + 2 ** 40).dtype == "int64"
    with pytest.raises(ReadOutOfBoundsError, match=rf"ranges over \[{2 ** 40 - 1}, {2 ** 40 + 62}\]"):
        te.compute((64,), lambda i: A[i + 2 ** 40 - 1, 0], "B")
    d = json.loads(ComputeDAG(te.compute((64,), lambda i: A[i, 0], "B")).to_json())
    d["ops"][1]["body"] = ["read", "A", [["b", "add", ["v", "i"], ["c", 2 ** 40, "int32"], "int32"], ["c", 0, "int32"]]]
    with pytest.raises(te.DAGFormatError, match="does not fit int32"):
        ComputeDAG.from_dict(d)


# ---- accepted ------------------------------------------------------------------------------------


def test_guarded_reads_are_accepted_and_evaluate_right(A: te.Tensor) -> None:
    B = te.compute((64, 64), lambda i, k: te.if_then_else(i >= 1, A[i - 1, k], 0.0), "B")
    C = te.compute((64, 64), lambda i, k: te.if_then_else(te.any(i < 1, k >= 63), 0.0, A[i - 1, k + 1]), "C")
    D = te.compute((64, 64), lambda i, k: te.if_then_else(~(i + k < 63), 0.0, A[i + k + 1, 0]), "D")
    r = te.reduce_axis(3, "r")
    E = te.compute((64,), lambda i: te.sum(A[i + r - 1, 0], axis=r, where=te.all(i + r >= 1, i + r < 65)), "E")
    a = np.random.default_rng(0).uniform(-1, 1, (64, 64)).astype(np.float32)
    out = ComputeDAG([B, C, D, E]).evaluate({"A": a})
    padded = np.pad(a, 1)
    np.testing.assert_array_equal(out["B"], padded[:64, 1:65])
    np.testing.assert_array_equal(out["C"], padded[:64, 2:66])
    want_d = np.array([[a[i + k + 1, 0] if i + k < 63 else 0.0 for k in range(64)] for i in range(64)])
    np.testing.assert_array_equal(out["D"], want_d)
    np.testing.assert_allclose(out["E"], padded[:64, 1] + padded[1:65, 1] + padded[2:66, 1], rtol=1e-5, atol=1e-6)


def test_common_non_affine_patterns_are_accepted() -> None:
    n = 37  # divides nothing
    X = te.placeholder((n,), "X")
    Y = te.placeholder((2 * n,), "Y")
    r = te.reduce_axis(2, "r")
    half = te.compute((2 * n,), lambda i: X[i // 2], "half")
    roll = te.compute((n,), lambda i: X[(i + 1) % n], "roll")
    pairs = te.compute((n,), lambda i: te.sum(Y[i * 2 + r], axis=r), "pairs")
    clamp = te.compute((n + 5,), lambda i: X[te.minimum(te.maximum(i - 2, 0), n - 1)], "clamp")
    rev = te.compute((n,), lambda i: X[n - 1 - i], "rev")
    outer = te.compute((6, 6), lambda i, j: X[i * j], "outer")
    x = np.arange(n, dtype=np.float32)
    y = np.arange(2 * n, dtype=np.float32)
    out = ComputeDAG([half, roll, pairs, clamp, rev, outer]).evaluate({"X": x, "Y": y})
    np.testing.assert_array_equal(out["half"], np.repeat(x, 2))
    np.testing.assert_array_equal(out["roll"], np.roll(x, -1))
    np.testing.assert_array_equal(out["pairs"], y[0::2] + y[1::2])
    np.testing.assert_array_equal(out["clamp"], x[np.clip(np.arange(n + 5) - 2, 0, n - 1)])
    np.testing.assert_array_equal(out["rev"], x[::-1])
    np.testing.assert_array_equal(out["outer"], np.outer(np.arange(6), np.arange(6)).astype(np.float32))


# ---- JSON ----------------------------------------------------------------------------------------


def test_json_dag_with_an_out_of_bounds_read_is_refused_on_load(A: te.Tensor) -> None:
    dag = ComputeDAG(te.compute((64, 64), lambda i, k: te.if_then_else(i >= 1, A[i - 1, k], 0.0), "B"))
    d = json.loads(dag.to_json())
    assert ComputeDAG.from_dict(d).key == dag.key  # the guarded form loads
    body = d["ops"][1]["body"]
    assert body[0] == "sel"
    d["ops"][1]["body"] = body[2]  # drop the guard: the bare A[i - 1, k]
    with pytest.raises(te.DAGFormatError, match=r'compute "B": read A\[i - 1, k\]: index 0 ranges over \[-1, 62\]'):
        ComputeDAG.from_json(json.dumps(d))
    d["ops"][1]["body"] = ["read", "A", [["b", "add", ["v", "i"], ["c", 100000000, "int32"], "int32"], ["v", "k"]]]
    with pytest.raises(te.DAGFormatError, match=r"ranges over \[100000000, 100000063\]"):
        ComputeDAG.from_dict(d)
    d["ops"][1]["body"] = ["read", "A", [["b", "add", ["v", "i"], ["c", 1e8, "float32"], "float32"], ["v", "k"]]]
    with pytest.raises(te.DAGFormatError, match="index 0 has dtype float32"):
        ComputeDAG.from_dict(d)


# ---- the op library ------------------------------------------------------------------------------

LIBRARY_CASES = {
    "matmul": [((7, 5, 3), {})],
    "batch_matmul": [((2, 3, 4, 5), {})],
    "dense_bias_relu": [((3, 4, 5), {})],
    "conv2d_nchw": [((1, 2, 7, 6, 3, 3, 3), {"padding": (2, 0, 1, 3), "stride": (2, 3), "dilation": (2, 1)}),
                    ((1, 1, 5, 5, 1, 5, 5), {"padding": 4})],
    "depthwise_conv2d_nchw": [((1, 2, 9, 7, 3, 2), {"stride": 2, "padding": 1, "dilation": 3})],
    "softmax": [((3, 5), {})],
    "layernorm": [((3, 5), {})],
    "gelu": [((4, 5), {})],
    "reduce": [(((2, 3, 4), (0, 2)), {"keepdims": True}), (((5,), 0), {})],
    "transpose": [(((2, 3, 4), (2, 0, 1)), {})],
    "pool2d": [((1, 2, 7, 5, 3), {"stride": 2, "padding": 1}), ((1, 1, 6, 6, (4, 2)), {"padding": (2, 1),
                                                                                       "kind": "avg"})],
}


def test_every_library_op_is_covered_here() -> None:
    # other tests register their own workloads into the same registry: only the library's count
    library = {n for n in registered_workloads() if get_workload_func(n).__module__.startswith("autosched.ops")}
    assert library and library <= set(LIBRARY_CASES)


@pytest.mark.parametrize("name,args,kwargs", [(n, a, k) for n, cases in LIBRARY_CASES.items() for a, k in cases],
                         ids=lambda x: str(x))
def test_every_library_op_is_still_defined(name: str, args: tuple, kwargs: dict) -> None:
    wl = Workload.create(name, *args, **kwargs)
    ComputeDAG.from_json(wl.dag.to_json())  # and reloads through the same check


def test_the_padding_guard_is_what_makes_conv_legal() -> None:
    data = te.placeholder((1, 2, 5, 5), "data")
    with pytest.raises(ReadOutOfBoundsError, match=r"index 2 ranges over \[-1, 5\], outside \[0, 4\]"):
        te.compute((1, 2, 7, 7), lambda n, c, h, w: data[n, c, h - 1, w - 1], "pad")


@settings(max_examples=40, deadline=None)
@given(N=st.integers(1, 2), C=st.integers(1, 3), H=st.integers(1, 11), W=st.integers(1, 11),
       R=st.integers(1, 4), S=st.integers(1, 4), stride=st.integers(1, 3), dilation=st.integers(1, 3),
       pad=st.tuples(*[st.integers(0, 3)] * 4))
def test_conv_with_any_valid_window_is_defined(N, C, H, W, R, S, stride, dilation, pad) -> None:
    assume(H + pad[0] + pad[2] >= dilation * (R - 1) + 1 and W + pad[1] + pad[3] >= dilation * (S - 1) + 1)
    wl = Workload.create("conv2d_nchw", N, C, H, W, 2, R, S, stride=stride, padding=pad, dilation=dilation)
    inp = wl.dag.random_inputs(seed=3)
    got = wl.dag.evaluate(inp)["conv"]
    x = torch.from_numpy(inp["data"].astype(np.float64))
    x = F.pad(x, (pad[1], pad[3], pad[0], pad[2]))  # torch: (left, right, top, bottom)
    want = F.conv2d(x, torch.from_numpy(inp["kernel"].astype(np.float64)), stride=stride, dilation=dilation)
    np.testing.assert_allclose(got, want.numpy(), rtol=2e-5, atol=2e-5)


# ---- properties ----------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 97), m=st.integers(1, 97), coef=st.integers(-4, 4), off=st.integers(-200, 200),
       guarded=st.booleans())
def test_affine_reads_are_accepted_exactly_when_inside(n: int, m: int, coef: int, off: int, guarded: bool) -> None:
    X = te.placeholder((n,), "X")
    values = [coef * i + off for i in range(m)]
    inside = min(values) >= 0 and max(values) < n

    def f(i):
        read = X[i * coef + off]
        return te.if_then_else(te.all(i * coef + off >= 0, i * coef + off < n), read, 0.0) if guarded else read

    if inside or guarded:
        out = te.compute((m,), f, "Y")
        x = np.arange(n, dtype=np.float32)
        got = ComputeDAG(out).evaluate({"X": x})["Y"]
        np.testing.assert_array_equal(got, [x[v] if 0 <= v < n else 0.0 for v in values])
    else:
        with pytest.raises(ReadOutOfBoundsError, match=rf"ranges over \[{min(values)}, {max(values)}\], "
                                                       rf"outside \[0, {n - 1}\]"):
            te.compute((m,), f, "Y")


def _exprs(i: te.IterVar, j: te.IterVar):
    leaves = st.sampled_from([i, j]) | st.integers(-6, 6).map(lambda v: Const(v, "int32"))

    def grow(sub):
        ops = st.sampled_from(["add", "sub", "mul", "floordiv", "mod", "min", "max"])
        cmp = st.sampled_from(["lt", "le", "gt", "ge", "eq", "ne"])
        binary = st.tuples(ops, sub, sub).map(lambda t: Binary(t[0], t[1], t[2], "int32"))
        select = st.tuples(cmp, sub, sub, sub, sub).map(
            lambda t: Select(Binary(t[0], t[1], t[2], "bool"), t[3], t[4], "int32"))
        return binary | select

    return st.recursive(leaves, grow, max_leaves=8)


def _brute(e: Expr, env: dict[int, int]) -> int:
    if isinstance(e, Const):
        return int(e.value)
    if isinstance(e, te.IterVar):
        return env[id(e)]
    if isinstance(e, Select):
        c = e.cond
        a, b = _brute(c.a, env), _brute(c.b, env)
        hold = {"lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b, "eq": a == b, "ne": a != b}[c.op]
        return _brute(e.t if hold else e.f, env)
    assert isinstance(e, Binary)
    a, b = _brute(e.a, env), _brute(e.b, env)
    if e.op in ("floordiv", "mod") and b == 0:
        raise ZeroDivisionError
    return {"add": a + b, "sub": a - b, "mul": a * b, "floordiv": a // b if b else 0, "mod": a % b if b else 0,
            "min": min(a, b), "max": max(a, b)}[e.op]


@settings(max_examples=300, deadline=None)
@given(data=st.data(), ni=st.integers(1, 9), nj=st.integers(1, 9))
def test_interval_contains_every_value(data, ni: int, nj: int) -> None:
    """Soundness of the range used by the check, against brute force over all axis values."""
    i, j = te.IterVar("i", ni, "spatial"), te.IterVar("j", nj, "spatial")
    e = data.draw(_exprs(i, j))
    try:
        vals = [_brute(e, {id(i): a, id(j): b}) for a in range(ni) for b in range(nj)]
    except ZeroDivisionError:
        return
    try:
        lo, hi = int_range(e, axis_facts([i, j], [ni, nj]))
    except Infeasible:
        raise AssertionError(f"reachable values {vals} called infeasible") from None
    except IndexOverflow:
        return  # e.g. a divisor that may be 0 gives the whole dtype: a refusal, which is sound
    assert lo <= min(vals) and max(vals) <= hi
