"""Mistakes in a tensor expression fail where they are made, with a message that names them."""

from __future__ import annotations

import numpy as np
import pytest

from autosched import te
from autosched.dtypes import DTypeError, check_dtype, promote


@pytest.fixture
def A() -> te.Tensor:
    return te.placeholder((4, 5), "A")


def test_wrong_index_count(A: te.Tensor) -> None:
    with pytest.raises(IndexError, match="'A' has 2 dimensions, indexed with 1"):
        te.compute((4,), lambda i: A[i], "B")
    with pytest.raises(IndexError, match="indexed with 3"):
        te.compute((4,), lambda i: A[i, i, i], "B")


@pytest.mark.parametrize("dtype", ["float8", "complex64", "bool", "int8", "", None, 32, "Float32"])
def test_unknown_or_unsupported_dtype(dtype) -> None:
    with pytest.raises(DTypeError, match="unsupported"):
        te.placeholder((2,), "A", dtype)
    with pytest.raises(DTypeError):
        check_dtype(dtype)


def test_unsupported_dtype_in_cast_and_compute(A: te.Tensor) -> None:
    with pytest.raises(DTypeError, match="float8"):
        te.cast(A[0, 0], "float8")
    with pytest.raises(DTypeError, match="uint8"):
        te.compute((4,), lambda i: A[i, 0], "B", dtype="uint8")
    with pytest.raises(DTypeError):
        A[0, 0].astype("int16")


def test_supported_dtypes_and_promotion() -> None:
    for d in ("float32", "float64", "float16", "bfloat16", "int32", "int64"):
        assert check_dtype(d) == d
    assert promote("int32", "float16") == "float16"
    assert promote("float16", "bfloat16") == "float32"
    assert promote("int32", "int64") == "int64"
    assert promote("float32", "float64") == "float64"


def test_axis_of_another_stage(A: te.Tensor) -> None:
    B = te.compute((4, 5), lambda i, j: A[i, j] * 2.0, "B")
    stolen = B.op.axis[0]
    with pytest.raises(ValueError, match="axis 'i' that is not one of its own axes"):
        te.compute((4, 5), lambda x, y: A[stolen, y], "C")


def test_reduce_axis_of_another_compute_or_unreduced(A: te.Tensor) -> None:
    k = te.reduce_axis(5, "k")
    with pytest.raises(ValueError, match="reduce axis 'k'"):
        te.compute((4,), lambda i: A[i, k], "B")  # used but not reduced over


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "4", None])
def test_non_positive_or_non_int_extents(bad) -> None:
    with pytest.raises(ValueError, match="positive int"):
        te.placeholder((4, bad), "A")
    with pytest.raises(ValueError, match="positive int"):
        te.compute((bad,), lambda i: i, "B")
    with pytest.raises(ValueError, match="positive int"):
        te.reduce_axis(bad, "k")


def test_numpy_ints_are_fine_as_extents() -> None:
    A = te.placeholder((np.int64(3), np.int32(2)), "A")
    assert A.shape == (3, 2) and all(type(d) is int for d in A.shape)
    assert te.reduce_axis(np.int64(4), "k").extent == 4


def test_empty_shape_and_reduce_ranges() -> None:
    with pytest.raises(ValueError, match="non-empty"):
        te.placeholder((), "A")
    with pytest.raises(ValueError, match="starting at 0"):
        te.reduce_axis((1, 5), "k")
    assert te.reduce_axis((0, 5), "k").extent == 5


def test_float_index(A: te.Tensor) -> None:
    with pytest.raises(TypeError, match="index 0 has dtype float32, needs an integer"):
        te.compute((4,), lambda i: A[i * 0.5, 0], "B")
    with pytest.raises(TypeError, match="index 1"):
        te.compute((4,), lambda i: A[i, A[i, 0]], "B")  # a data-dependent float index


def test_reduction_not_at_top_level(A: te.Tensor) -> None:
    k = te.reduce_axis(5, "k")
    with pytest.raises(ValueError, match="whole body"):
        te.compute((4,), lambda i: te.sum(A[i, k], axis=k) + 1.0, "B")
    with pytest.raises(ValueError, match="whole body"):
        te.compute((4,), lambda i: te.exp(te.sum(A[i, k], axis=k)), "B")
    with pytest.raises(ValueError, match="whole body"):
        te.compute((4,), lambda i: te.if_then_else(te.eq(i, 0), te.max(A[i, k], axis=k), 0.0), "B")
    with pytest.raises(ValueError, match="whole body"):
        te.compute((4,), lambda i: te.sum(te.sum(A[i, k], axis=k), axis=k), "B")


def test_two_tensors_with_one_name(A: te.Tensor) -> None:
    B1 = te.compute((4,), lambda i: A[i, 0], "B")
    B2 = te.compute((4,), lambda i: A[i, 1], "B")
    C = te.compute((4,), lambda i: B1[i] + B2[i], "C")
    with pytest.raises(ValueError, match="both named 'B'"):
        te.ComputeDAG(C)
    A2 = te.placeholder((4, 5), "A")
    with pytest.raises(ValueError, match="both named 'A'"):
        te.ComputeDAG(te.compute((4,), lambda i: A[i, 0] + A2[i, 0], "D"))


@pytest.mark.parametrize("name", ["A B", "1A", "A;B", "", "A-B", "x" * 65, "int\n"])
def test_bad_identifiers(name: str) -> None:
    with pytest.raises(ValueError, match="invalid tensor name"):
        te.placeholder((2,), name)
    with pytest.raises(ValueError, match="invalid axis name"):
        te.reduce_axis(2, name)


def test_compute_signature_mismatch(A: te.Tensor) -> None:
    with pytest.raises(ValueError, match="shape has 2 dimensions but fcompute takes 1"):
        te.compute((4, 5), lambda i: A[i, 0], "B")
    with pytest.raises(ValueError, match="1 axis names for 2 dimensions"):
        te.compute((4, 5), lambda *ix: A[ix], "B", axis_names=["i"])
    B = te.compute((4, 5), lambda *ix: A[ix], "B")
    assert [a.name for a in B.op.axis] == ["i0", "i1"]


def test_loop_captured_defaults_are_not_axes(A: te.Tensor) -> None:
    outs = [te.compute((4,), lambda i, c=c: A[i, c], f"B{c}") for c in range(2)]
    assert [len(o.shape) for o in outs] == [1, 1]


def test_typed_constants() -> None:
    assert te.const(1, "float32").value == 1.0 and isinstance(te.const(1, "float32").value, float)
    assert te.const(3.0, "int64").value == 3 and isinstance(te.const(3.0, "int64").value, int)
    with pytest.raises(ValueError, match="not a whole number"):
        te.const(1.5, "int32")
    with pytest.raises(TypeError, match="int or a float"):
        te.const("1", "float32")


def test_misc_misuse(A: te.Tensor) -> None:
    with pytest.raises(TypeError, match="no truth value"):
        bool(A[0, 0] > 0)
    with pytest.raises(TypeError, match="condition must be a comparison"):
        te.if_then_else(A[0, 0], 1.0, 0.0)
    with pytest.raises(ValueError, match="boolean"):
        te.compute((4,), lambda i: A[i, 0] > 0, "B")
    with pytest.raises(ValueError, match="not a reduce axis"):
        te.compute((4,), lambda i: te.sum(A[i, 0], axis=i), "B")
    k = te.reduce_axis(5, "i")
    with pytest.raises(ValueError, match="clashes"):
        te.compute((4,), lambda i: te.sum(A[i, k], axis=k), "B")
    with pytest.raises(ValueError, match="free variable"):
        te.compute((4,), lambda i: A[i, te.Var("n")], "B")
    with pytest.raises(TypeError, match="cannot use"):
        te.compute((4,), lambda i: A[i, 0] + "x", "B")
    with pytest.raises(TypeError, match="ComputeDAG outputs must be tensors"):
        te.ComputeDAG([A[0, 0]])
    with pytest.raises(ValueError, match="at least one"):
        te.ComputeDAG([])
    with pytest.raises(ValueError, match="no identity"):
        te.comm_reducer(lambda x, y: x * y, {"float32": 1.0}, "p").identity("int32")


def test_evaluate_checks_its_inputs(A: te.Tensor) -> None:
    dag = te.ComputeDAG(te.compute((4,), lambda i: A[i, 0], "B"))
    with pytest.raises(KeyError, match="missing input 'A'"):
        dag.evaluate({})
    with pytest.raises(ValueError, match=r"shape \(5, 4\), expected \(4, 5\)"):
        dag.evaluate({"A": np.zeros((5, 4))})
    with pytest.raises(KeyError, match="no tensor named 'Q'"):
        dag["Q"]
