"""The workload registry: canonical keys, argument validation, JSON round trips, remote rebuilds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from autosched import te
from autosched.workload import Workload, WorkloadError, registered_workloads, workload

ROOT = Path(__file__).resolve().parents[2]

# Computed once from Workload.create("matmul", 64, 64, 64). If this changes, every key in every
# tuning database changes with it: only update it on purpose (and migrate the databases).
MATMUL_64_KEY = "ede20890a3171d7546da8c51e51196bd7327de25d2a350da4f3f2e8d67bf7c26"
MATMUL_64_CANONICAL = '{"args":[64,64,64,"float32"],"kwargs":{},"name":"matmul"}'

ALL_OPS = {
    "matmul": ((8, 4, 6), {}),
    "batch_matmul": ((2, 3, 4, 5), {}),
    "dense_bias_relu": ((3, 4, 5), {}),
    "conv2d_nchw": ((1, 2, 6, 6, 3, 3, 3), {"padding": 1}),
    "depthwise_conv2d_nchw": ((1, 2, 6, 6, 3, 3), {"stride": 2}),
    "softmax": ((3, 5), {}),
    "layernorm": ((3, 5), {"eps": 1e-3}),
    "gelu": ((4, 5), {}),
    "reduce": (((2, 3, 4), (1,)), {"kind": "max"}),
    "transpose": (((2, 3), (1, 0)), {}),
    "pool2d": ((1, 2, 5, 5, 3), {"stride": 2, "padding": 1, "kind": "avg"}),
}


def test_registry_lists_the_library() -> None:
    assert set(ALL_OPS) <= set(registered_workloads())


def test_matmul_key_is_pinned() -> None:
    wl = Workload.create("matmul", 64, 64, 64)
    assert json.dumps(wl.spec(), sort_keys=True, separators=(",", ":")) == MATMUL_64_CANONICAL
    assert wl.key == MATMUL_64_KEY


def test_equal_calls_spelled_differently_share_a_key() -> None:
    keys = {
        Workload.create("matmul", 64, 64, 64).key,
        Workload.create("matmul", 64, 64, 64, "float32").key,
        Workload.create("matmul", M=64, N=64, K=64, dtype="float32").key,
        Workload.create("matmul", np.int64(64), 64, np.int32(64)).key,
    }
    assert keys == {MATMUL_64_KEY}
    assert Workload.create("gelu", 4, 5).key == Workload.create("gelu", (4, 5)).key
    assert Workload.create("reduce", [2, 3], [1]).key == Workload.create("reduce", (2, 3), (1,)).key


def test_key_differs_when_any_arg_differs() -> None:
    base = ("conv2d_nchw", (1, 3, 8, 8, 4, 3, 3), dict(stride=1, padding=1, dilation=1, dtype="float32"))
    variants = [dict(N=2), dict(C=4), dict(H=9), dict(W=9), dict(K=5), dict(R=1), dict(S=1), dict(stride=2),
                dict(padding=0), dict(padding=(1, 2)), dict(dilation=2), dict(dtype="float16")]
    names = ["N", "C", "H", "W", "K", "R", "S"]
    base_kw = dict(zip(names, base[1])) | base[2]
    keys = {Workload.create(base[0], **base_kw).key}
    for v in variants:
        keys.add(Workload.create(base[0], **(base_kw | v)).key)
    assert len(keys) == len(variants) + 1
    assert Workload.create("matmul", 64, 64, 32).key != MATMUL_64_KEY
    assert Workload.create("batch_matmul", 1, 64, 64, 64).key != MATMUL_64_KEY  # the name counts
    assert Workload.create("layernorm", 4, 8, 1e-5).key != Workload.create("layernorm", 4, 8, 1e-6).key


def test_keys_are_stable_across_processes() -> None:
    code = ("from autosched.workload import Workload; "
            "print(Workload.create('matmul', 64, 64, 64).key, Workload.create('softmax', 3, 5).key)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={"PYTHONHASHSEED": "123", "PATH": ""}).stdout.split()
    assert out == [MATMUL_64_KEY, Workload.create("softmax", 3, 5).key]


@pytest.mark.parametrize("name", sorted(ALL_OPS))
def test_every_op_round_trips_through_json(name: str) -> None:
    args, kwargs = ALL_OPS[name]
    wl = Workload.create(name, *args, **kwargs)
    text = wl.to_json()
    d = json.loads(text)
    assert d["name"] == name and d["key"] == wl.key and d["args_order"] == list(wl.args_order)
    assert d["flops"] == wl.flops and d["dag"] == json.loads(wl.dag.to_json())
    back = Workload.from_json(text)
    assert back == wl and hash(back) == hash(wl) and back.to_json() == text
    assert back.args == wl.args and back.kwargs == wl.kwargs
    inp = wl.dag.random_inputs(1)
    for k, v in wl.dag.evaluate(inp).items():
        np.testing.assert_array_equal(back.dag.evaluate(inp)[k], v)


def test_tensors_are_memoized_and_ordered() -> None:
    wl = Workload.create("dense_bias_relu", 4, 5, 6)
    t1, t2 = wl.tensors(), wl.tensors()
    assert t1 == t2 and all(a is b for a, b in zip(t1, t2))
    assert wl.args_order == ("X", "W", "bias", "out")
    assert [t.name for t in wl.dag.outputs] == ["out"]
    fresh = Workload("dense_bias_relu", (4, 5, 6, "float32"))  # built lazily through the registry
    assert fresh == wl and fresh.dag.to_json() == wl.dag.to_json()


def test_unknown_name_lists_the_registered_ones() -> None:
    with pytest.raises(WorkloadError, match="unknown workload 'matmull'.*matmul"):
        Workload.create("matmull", 1, 2, 3)
    with pytest.raises(WorkloadError, match="unknown workload 'mat mul'"):
        Workload.create("mat mul")
    with pytest.raises(ValueError, match="invalid workload name"):
        Workload("mat mul")


@pytest.mark.parametrize("args,kwargs,msg", [
    ((0, 4, 4), {}, "'M' must be an int >= 1, got 0"),
    ((4, -1, 4), {}, "'N' must be an int >= 1"),
    ((4, 4, 2.5), {}, "'K' must be an int >= 1, got float"),
    ((4, 4, "4"), {}, "'K' must be an int"),
    ((4, 4, True), {}, "'K' must be an int"),
    ((4, 4, 4), {"dtype": "float8"}, "argument 'dtype' must be one of"),
    ((4, 4), {}, "missing a required argument: 'K'"),
    ((4, 4, 4, "float32", 5), {}, "too many positional arguments"),
    ((4, 4, 4), {"layout": "NT"}, "unexpected keyword argument 'layout'"),
    ((4, 4, 4), {"dtype": object()}, "'dtype' has type object"),
])
def test_matmul_argument_errors_name_the_argument(args, kwargs, msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        Workload.create("matmul", *args, **kwargs)


@pytest.mark.parametrize("name,args,kwargs,msg", [
    ("conv2d_nchw", (1, 3, 4, 4, 2, 5, 5), {}, "window .* does not fit"),
    ("conv2d_nchw", (1, 3, 8, 8, 2, 3, 3), {"stride": 0}, "'stride' must be an int >= 1"),
    ("conv2d_nchw", (1, 3, 8, 8, 2, 3, 3), {"padding": -1}, "'padding' must be an int >= 0"),
    ("conv2d_nchw", (1, 3, 8, 8, 2, 3, 3), {"padding": (1, 2, 3)}, "'padding' must be an int or a pair"),
    ("conv2d_nchw", (1, 3, 8, 8, 2, 3, 3), {"dilation": (1, 0)}, r"'dilation\[1\]' must be an int >= 1"),
    ("pool2d", (1, 1, 8, 8, 2), {"padding": 2}, "at most half the kernel"),
    ("pool2d", (1, 1, 8, 8, 2), {"kind": "median"}, "'kind' must be one of"),
    ("pool2d", (1, 1, 8, 8, 2), {"kind": "avg", "dtype": "int32"}, "float dtype"),
    ("softmax", (4, 4, "int32"), {}, "float dtype"),
    ("layernorm", (4, 4), {"eps": 0.0}, "'eps' must be a positive finite float"),
    ("layernorm", (4, 4), {"eps": float("nan")}, "must be finite"),
    ("gelu", (), {}, "'shape' must be a non-empty tuple"),
    ("gelu", (4, 0), {}, r"'shape\[1\]' must be an int >= 1"),
    ("reduce", ((2, 3), (2,)), {}, "not an axis of a 2-D tensor"),
    ("reduce", ((2, 3), (1, -1)), {}, "repeats an axis"),
    ("reduce", ((2, 3), 1), {"keepdims": 1}, "'keepdims' must be a bool"),
    ("reduce", ((2, 3), 1), {"kind": "prod"}, "'kind' must be one of"),
    ("transpose", ((2, 3), (0, 0)), {}, "'perm' must be a permutation"),
    ("transpose", ((2, 3), (1, 0, 2)), {}, "'perm' must be a permutation"),
    ("batch_matmul", (0, 1, 1, 1), {}, "'B' must be an int >= 1"),
    ("depthwise_conv2d_nchw", (1, 2, 3, 3, 2, 2), {"stride": "2"}, "'stride' must be an int"),
])
def test_op_argument_errors(name: str, args, kwargs, msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        Workload.create(name, *args, **kwargs)


# ---- custom workloads and remote rebuilds ------------------------------------------------------


@workload("test_only_scaled_add")
def scaled_add(n: int, alpha: float = 2.0, dtype: str = "float32") -> list[te.Tensor]:
    """Registered only in this test module: a process that does not import it must rebuild from JSON."""
    A = te.placeholder((n,), "A", dtype)
    B = te.placeholder((n,), "B", dtype)
    C = te.compute((n,), lambda i: A[i] * alpha + B[i], "C")
    return [A, B, C]


def test_custom_workload_from_tensors() -> None:
    A = te.placeholder((6,), "A")
    B = te.compute((6,), lambda i: te.exp(A[i]), "B")
    wl = Workload.from_tensors([A, B], name="my_exp")
    assert wl.custom and wl.args_order == ("A", "B") and wl.tensors()[1] is B
    A2 = te.placeholder((6,), "A")
    same = Workload.from_tensors([A2, te.compute((6,), lambda i: te.exp(A2[i]), "B")], name="my_exp")
    assert same.key == wl.key
    assert Workload.from_tensors([A, B]).key != wl.key  # the name is part of the key
    other = Workload.from_tensors([A, te.compute((6,), lambda i: te.log(A[i]), "B")], name="my_exp")
    assert other.key != wl.key
    back = Workload.from_json(wl.to_json())
    assert back == wl and back.custom and back.to_json() == wl.to_json()


def test_from_tensors_validation() -> None:
    A = te.placeholder((6,), "A")
    U = te.placeholder((6,), "U")
    B = te.compute((6,), lambda i: A[i] + 1.0, "B")
    with pytest.raises(WorkloadError, match=r"inputs \['A'\] are read but are not build arguments"):
        Workload.from_tensors([B])
    with pytest.raises(WorkloadError, match=r"inputs \['U'\] are not read"):
        Workload.from_tensors([A, U, B])
    with pytest.raises(WorkloadError, match="repeated names"):
        Workload.from_tensors([A, A, B])
    with pytest.raises(WorkloadError, match="no computed tensor"):
        Workload.from_tensors([A])
    with pytest.raises(WorkloadError, match="non-empty list of tensors"):
        Workload.from_tensors([])


def _tamper(wl: Workload, **changes) -> str:
    d = json.loads(wl.to_json())
    d.update(changes)
    return json.dumps(d)


def test_from_json_checks() -> None:
    wl = Workload.create("matmul", 8, 8, 8)
    with pytest.raises(WorkloadError, match="key mismatch"):
        Workload.from_json(_tamper(wl, key="0" * 64))
    with pytest.raises(WorkloadError, match="carried DAG differs"):
        Workload.from_json(_tamper(wl, dag=json.loads(Workload.create("matmul", 8, 8, 4).dag.to_json())))
    with pytest.raises(WorkloadError, match="unsupported workload version"):
        Workload.from_json(_tamper(wl, version=7))
    with pytest.raises(WorkloadError, match="not an autosched workload"):
        Workload.from_json("[]")
    with pytest.raises(WorkloadError, match="not valid JSON"):
        Workload.from_json("{")
    with pytest.raises(WorkloadError, match="misses field 'args_order'"):
        d = json.loads(wl.to_json())
        del d["args_order"]
        Workload.from_json(d)
    with pytest.raises(WorkloadError, match="unknown workload kind"):
        Workload.from_json(_tamper(wl, kind="python"))
    cw = Workload.from_tensors(wl.tensors(), name="mm")
    with pytest.raises(WorkloadError, match="not in the DAG"):
        Workload.from_json(_tamper(cw, args_order=["A", "B", "Z"]))
    with pytest.raises(te.DAGFormatError, match="unknown function"):
        bad = json.loads(cw.to_json())
        bad["dag"]["ops"][-1]["body"] = ["call", "system", [["c", 1.0, "float32"]], "float32"]
        Workload.from_json(bad)


REMOTE = """
import json, sys
import numpy as np
from autosched.workload import Workload, _REGISTRY
payload = json.loads(sys.stdin.read())
out = {}
for text in payload:
    wl = Workload.from_json(text)
    inp = wl.dag.random_inputs(3)
    res = wl.dag.evaluate(inp)
    out[wl.name] = [wl.key, list(wl.args_order), wl.to_json() == text, res[wl.args_order[-1]].tolist()]
out["ops_imported"] = "autosched.ops" in sys.modules
out["registered"] = sorted(_REGISTRY)
print(json.dumps(out))
"""


def test_from_json_in_a_process_that_never_imported_the_ops() -> None:
    local = [Workload.create("test_only_scaled_add", 5, alpha=0.5), Workload.create("softmax", 2, 3)]
    proc = subprocess.run([sys.executable, "-c", REMOTE], cwd=ROOT, input=json.dumps([w.to_json() for w in local]),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["ops_imported"] is False and out["registered"] == []  # rebuilt from the carried DAGs
    for wl in local:
        key, order, same_json, result = out[wl.name]
        assert key == wl.key and tuple(order) == wl.args_order and same_json
        want = wl.dag.evaluate(wl.dag.random_inputs(3))[wl.args_order[-1]]
        np.testing.assert_array_equal(np.array(result, dtype=want.dtype), want)


def test_register_conflict() -> None:
    with pytest.raises(WorkloadError, match="already registered"):
        workload("matmul")(scaled_add)
    workload("test_only_scaled_add")(scaled_add)  # the same function again (a reload) is fine


def test_pickle_round_trip() -> None:
    import pickle

    wl = Workload.create("softmax", 3, 4)
    wl.dag  # noqa: B018 - fill the cache; it must not travel
    back = pickle.loads(pickle.dumps(wl))
    assert back == wl and back.to_json() == wl.to_json()
    dag = pickle.loads(pickle.dumps(wl.dag))  # builtin reducers stay the builtins
    assert dag.to_json() == wl.dag.to_json()
    cw = Workload.from_tensors(Workload.create("matmul", 2, 3, 4).tensors(), name="mm")
    assert pickle.loads(pickle.dumps(cw)).to_json() == cw.to_json()
