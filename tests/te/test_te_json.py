"""DAG JSON: round trips are exact, and hostile or malformed JSON is refused with a named reason.

The JSON form is what the service accepts over HTTP and what remote workers rebuild from, so
loading must never execute anything and must reject whatever does not describe a valid program.
"""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from autosched import te
from autosched.te import DAGFormatError


def matmul_dag() -> te.ComputeDAG:
    A = te.placeholder((4, 5), "A")
    B = te.placeholder((5, 3), "B")
    k = te.reduce_axis(5, "k")
    return te.ComputeDAG(te.compute((4, 3), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), "C"))


def padded_max_dag() -> te.ComputeDAG:
    """Padding with -inf (a non-finite constant) then a windowed max."""
    A = te.placeholder((2, 6), "A")
    P = te.compute((2, 8), lambda i, j: te.if_then_else(te.all(j >= 1, j < 7), A[i, j - 1], float("-inf")), "P")
    r = te.reduce_axis(3, "r")
    M = te.compute((2, 6), lambda i, j: te.max(P[i, j + r], axis=r), "M")
    return te.ComputeDAG(M)


def custom_reducer_dag() -> te.ComputeDAG:
    prod = te.comm_reducer(lambda x, y: x * y, {"float32": 1.0, "default": 1}, "prod")
    absmax = te.comm_reducer(lambda x, y: te.if_then_else(te.abs(x) > te.abs(y), x, y), 0.0, "absmax")
    A = te.placeholder((3, 4), "A")
    k = te.reduce_axis(4, "k")
    P = te.compute((3,), lambda i: prod(A[i, k], axis=k, where=k < 3), "P")
    k2 = te.reduce_axis(4, "k")
    Q = te.compute((3,), lambda i: absmax(A[i, k2], axis=k2), "Q")
    return te.ComputeDAG([P, Q])


def mixed_dtype_dag() -> te.ComputeDAG:
    A = te.placeholder((6,), "A", "int32")
    H = te.placeholder((6,), "H", "float16")
    Bf = te.placeholder((6,), "Bf", "bfloat16")
    X = te.compute((6,), lambda i: te.cast(A[i] // 2 + A[i] % 3, "float64") * te.sigmoid(H[i]) + Bf[i], "X")
    Y = te.compute((6,), lambda i: te.cast(te.floor(X[i] * 2.5), "int64") - te.const(float("inf"), "float32")
                   * 0.0 + te.erf(te.log(te.sqrt(te.abs(X[i]) + 1.0))), "Y")
    Z = te.compute((6,), lambda i: te.if_then_else(~(A[i] < 0) & te.ne(A[i], 3) | te.eq(A[i], 1),
                                                   te.tanh(Y[i]) ** 2.0, te.rsqrt(te.exp(-Y[i]))), "Z",
                   dtype="float32")
    return te.ComputeDAG([Y, Z])


DAGS = {"matmul": matmul_dag, "padded_max": padded_max_dag, "custom_reducer": custom_reducer_dag,
        "mixed": mixed_dtype_dag}


@pytest.mark.parametrize("which", sorted(DAGS))
def test_round_trip_is_identical_and_evaluates_the_same(which: str) -> None:
    dag = DAGS[which]()
    text = dag.to_json()
    back = te.ComputeDAG.from_json(text)
    assert back.to_json() == text and back.key == dag.key
    assert [t.name for t in back.tensors] == [t.name for t in dag.tensors]
    assert back.flop_count() == dag.flop_count()
    inp = dag.random_inputs(3)
    want, got = dag.evaluate(inp), back.evaluate(inp)
    assert set(want) == set(got)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    json.loads(text)  # strict JSON: non-finite constants travel as strings, not NaN/Infinity tokens
    assert "Infinity" not in text


def test_key_changes_with_content() -> None:
    A = te.placeholder((4,), "A")
    k1 = te.ComputeDAG(te.compute((4,), lambda i: A[i] + 1.0, "B")).key
    k2 = te.ComputeDAG(te.compute((4,), lambda i: A[i] + 2.0, "B")).key
    assert k1 != k2 and len(k1) == 64


# ---- hostile / malformed -------------------------------------------------------------------


def base() -> dict:
    return json.loads(matmul_dag().to_json())


def body_of(d: dict, name: str = "C") -> list:
    return next(o for o in d["ops"] if o["name"] == name)["body"]


def _set_op(d, key, value, name="C"):
    next(o for o in d["ops"] if o["name"] == name)[key] = value


CASES = {
    "unknown op kind": (lambda d: d["ops"][0].update(kind="python"), "unknown kind 'python'"),
    "unknown function": (lambda d: _set_op(d, "body", ["reduce", "sum", ["call", "system", [["c", 1.0,
                         "float32"]], "float32"], ["k"]]), "unknown function 'system'"),
    "unknown binary op": (lambda d: body_of(d)[2].__setitem__(1, "xor"), "unknown binary op 'xor'"),
    "read of undefined tensor": (lambda d: body_of(d)[2][2].__setitem__(1, "Z"), "unknown tensor 'Z'"),
    "read before definition": (lambda d: d["ops"].reverse(), "unknown tensor"),
    "bad dtype": (lambda d: d["ops"][0].update(dtype="float128"), "float128"),
    "bad constant dtype": (lambda d: _set_op(d, "body", ["c", 1.0, "complex64"]), "complex64"),
    "bad identifier": (lambda d: d["ops"][0].update(name="A; system('rm -rf /')"), "invalid tensor name"),
    "bad axis name": (lambda d: _set_op(d, "axis", [["i); evil(", 4], ["j", 3]]), "invalid axis name"),
    "bad reducer name": (lambda d: body_of(d).__setitem__(1, {"name": "p-r", "combine": ["v", "x"],
                                                              "identity": 0}), "invalid reducer name"),
    "unknown reducer": (lambda d: body_of(d).__setitem__(1, "argmax"), "unknown reducer 'argmax'"),
    "wrong version": (lambda d: d.update(version=99), "unsupported DAG version 99"),
    "wrong format": (lambda d: d.update(format="tvm"), "not an autosched DAG"),
    "missing field": (lambda d: d.pop("ops"), "missing field"),
    "unknown output": (lambda d: d.update(outputs=["nope"]), "nope"),
    "duplicate tensor": (lambda d: d["ops"].insert(1, copy.deepcopy(d["ops"][0])), "defined twice"),
    "duplicate axis": (lambda d: _set_op(d, "axis", [["i", 4], ["k", 3]]), "duplicate axis"),
    "float extent": (lambda d: _set_op(d, "axis", [["i", 4.5], ["j", 3]]), "positive int"),
    "zero extent": (lambda d: d["ops"][0].update(shape=[0, 5]), "positive ints"),
    "string shape": (lambda d: d["ops"][0].update(shape="45"), "positive ints"),
    "unknown tag": (lambda d: body_of(d)[2].__setitem__(0, "exec"), "unknown expression tag 'exec'"),
    "unknown variable": (lambda d: body_of(d)[2][2][2].__setitem__(0, ["v", "q"]), "unknown variable 'q'"),
    "bad constant": (lambda d: _set_op(d, "body", ["c", "__import__('os')", "float32"]), "bad constant"),
    "wrong index count": (lambda d: body_of(d)[2][2][2].pop(), "malformed expression node"),
    "float index": (lambda d: body_of(d)[2][2][2].__setitem__(0, ["c", 1.5, "float32"]), "index 0"),
    "reduce over spatial axis": (lambda d: body_of(d)[3].__setitem__(0, "i"), "not a reduce axis"),
    "nested reduce": (lambda d: _set_op(d, "body", ["b", "add", copy.deepcopy(body_of(d)), ["c", 1.0, "float32"],
                                                    "float32"]), "whole body"),
    "declared dtype mismatch": (lambda d: _set_op(d, "dtype", "float64"), "body dtype"),
    "node dtype mismatch": (lambda d: body_of(d)[2].__setitem__(4, "int32"), "does not match"),
    "call arity": (lambda d: _set_op(d, "body", ["call", "exp", [], "float32"]), "exactly one argument"),
    "float function of int": (lambda d: _set_op(d, "body", ["call", "exp", [["c", 1, "int32"]], "int32"]),
                              "cast it to a float"),
    "integer div": (lambda d: _set_op(d, "body", ["b", "div", ["c", 1, "int32"], ["c", 2, "int32"], "int32"]),
                    "floordiv"),
    "select condition": (lambda d: _set_op(d, "body", ["sel", ["c", 1.0, "float32"], ["c", 1.0, "float32"],
                                                       ["c", 2.0, "float32"], "float32"]), "needs bool"),
    "fractional int constant": (lambda d: body_of(d)[2][2][2].__setitem__(0, ["c", 1.5, "int32"]),
                                "not a int32 value"),
    "tag not a string": (lambda d: _set_op(d, "tag", {"x": 1}), "tag must be a string"),
    "ops not a list": (lambda d: d.update(ops=5), ""),
    "node not a list": (lambda d: _set_op(d, "body", {"c": 1}), "bad expression node"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_json_raises_dag_format_error(case: str) -> None:
    mutate, msg = CASES[case]
    d = base()
    mutate(d)
    with pytest.raises(DAGFormatError, match=None if not msg else msg.replace("(", r"\(").replace(")", r"\)")):
        te.ComputeDAG.from_json(json.dumps(d))


@pytest.mark.parametrize("text", ["", "not json", "[1, 2", "null", "[]", '"autosched-dag"'])
def test_non_dag_text(text: str) -> None:
    with pytest.raises(DAGFormatError):
        te.ComputeDAG.from_json(text)


def test_deeply_nested_json_is_a_format_error() -> None:
    depth = 100_000  # deeper than json.loads / the loader can recurse
    node = '["call","neg",[' * depth + '["c",1.0,"float32"]' + '],"float32"]' * depth
    text = matmul_dag().to_json()
    start = text.index('"body":') + len('"body":')
    end = text.index(',"dtype":"float32","kind":"compute"')
    with pytest.raises(DAGFormatError, match="nested too deeply"):
        te.ComputeDAG.from_json(text[:start] + node + text[end:])


def test_loading_never_calls_python_code(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    def boom(*a, **k):
        raise AssertionError("eval/exec called while loading a DAG")

    monkeypatch.setattr(builtins, "eval", boom)
    monkeypatch.setattr(builtins, "exec", boom)
    dag = te.ComputeDAG.from_json(custom_reducer_dag().to_json())
    assert dag.key == custom_reducer_dag().key
