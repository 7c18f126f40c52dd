"""Each op's te reference equals an independent numpy / torch-CPU computation of the same operator.

The op library is only useful if the DAG it builds means what the op's name says, so every op is
checked against PyTorch (or numpy) on small shapes, odd ones included, and the window ops on
stride / padding / dilation variants.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from autosched import ops
from autosched.dtypes import np_dtype
from autosched.workload import Workload

TOL = {"float64": 1e-10, "float32": 2e-5, "float16": 2e-2, "bfloat16": 8e-2}


def run(name: str, *args, **kwargs) -> tuple[dict[str, np.ndarray], np.ndarray, Workload]:
    """Inputs (by name), the final output of the reference, and the workload."""
    wl = Workload.create(name, *args, **kwargs)
    inp = wl.dag.random_inputs(seed=11)
    out_name = wl.args_order[-1]
    return inp, wl.dag.evaluate(inp)[out_name], wl


def t(x: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(x.astype(np.float64))


def close(got: np.ndarray, want, dtype: str = "float32") -> None:
    want = want.numpy() if isinstance(want, torch.Tensor) else np.asarray(want)
    assert got.dtype == np_dtype(dtype)
    assert got.shape == want.shape
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=TOL.get(dtype, 0), atol=TOL.get(dtype, 0))


@pytest.mark.parametrize("M,N,K", [(1, 1, 1), (7, 5, 3), (16, 9, 33)])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int32", "int64"])
def test_matmul(M: int, N: int, K: int, dtype: str) -> None:
    inp, got, wl = run("matmul", M, N, K, dtype)
    assert wl.args_order == ("A", "B", "C")
    close(got, t(inp["A"]) @ t(inp["B"]), dtype)
    assert wl.flops == 2 * M * N * K


@pytest.mark.parametrize("B,M,N,K", [(1, 2, 3, 4), (3, 5, 7, 2)])
def test_batch_matmul(B: int, M: int, N: int, K: int) -> None:
    inp, got, _ = run("batch_matmul", B, M, N, K)
    close(got, torch.bmm(t(inp["A"]), t(inp["B"])))


@pytest.mark.parametrize("M,N,K", [(3, 5, 7), (8, 1, 16)])
def test_dense_bias_relu(M: int, N: int, K: int) -> None:
    inp, got, wl = run("dense_bias_relu", M, N, K)
    assert [s.name for s in wl.dag.computes] == ["dense", "out"]  # the epilogue is its own stage
    want = F.relu(F.linear(t(inp["X"]), t(inp["W"]), t(inp["bias"])))
    close(got, want)
    assert (got >= 0).all() and (got == 0).any()


CONV_CASES = [
    dict(N=1, C=3, H=7, W=7, K=4, R=3, S=3),
    dict(N=2, C=2, H=8, W=9, K=3, R=3, S=2, stride=2, padding=1),
    dict(N=1, C=3, H=9, W=8, K=2, R=3, S=3, stride=(2, 1), padding=(2, 1), dilation=2),
    dict(N=1, C=1, H=5, W=5, K=1, R=1, S=1, dilation=(1, 3)),
    dict(N=1, C=2, H=6, W=6, K=2, R=2, S=3, stride=3, padding=2),
]


@pytest.mark.parametrize("case", CONV_CASES, ids=str)
def test_conv2d_nchw(case: dict) -> None:
    inp, got, wl = run("conv2d_nchw", **case)
    kw = {k: case.get(k, d) for k, d in (("stride", 1), ("padding", 0), ("dilation", 1))}
    want = F.conv2d(t(inp["data"]), t(inp["kernel"]), **kw)
    close(got, want)
    names = [s.name for s in wl.dag.computes]
    assert names == (["pad", "conv"] if case.get("padding") else ["conv"])
    R, S = case["R"], case["S"]
    assert wl.flops == 2 * got.size * case["C"] * R * S


def test_conv2d_asymmetric_padding_and_float16() -> None:
    inp, got, _ = run("conv2d_nchw", 1, 2, 6, 7, 3, 3, 3, padding=(0, 1, 2, 3))  # top, left, bottom, right
    padded = F.pad(t(inp["data"]), (1, 3, 0, 2))  # torch: (left, right, top, bottom)
    close(got, F.conv2d(padded, t(inp["kernel"])))
    inp, got, _ = run("conv2d_nchw", 1, 4, 5, 5, 2, 3, 3, padding=1, dtype="float16")
    close(got, F.conv2d(t(inp["data"]), t(inp["kernel"]), padding=1), "float16")


@pytest.mark.parametrize("case", [
    dict(N=1, C=3, H=7, W=6, R=3, S=3),
    dict(N=2, C=4, H=9, W=9, R=3, S=3, stride=2, padding=1, dilation=2),
    dict(N=1, C=2, H=5, W=8, R=1, S=3, stride=(1, 2), padding=(0, 1)),
], ids=str)
def test_depthwise_conv2d_nchw(case: dict) -> None:
    inp, got, _ = run("depthwise_conv2d_nchw", **case)
    C = case["C"]
    kw = {k: case.get(k, d) for k, d in (("stride", 1), ("padding", 0), ("dilation", 1))}
    weight = t(inp["kernel"]).reshape(C, 1, case["R"], case["S"])
    close(got, F.conv2d(t(inp["data"]), weight, groups=C, **kw))


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("case", [
    dict(N=1, C=2, H=6, W=6, kernel=2, stride=2),
    dict(N=2, C=3, H=7, W=9, kernel=3, stride=2, padding=1),
    dict(N=1, C=1, H=5, W=8, kernel=(3, 2), stride=(1, 3), padding=(1, 0)),
    dict(N=1, C=2, H=4, W=4, kernel=4),
], ids=str)
def test_pool2d(case: dict, kind: str) -> None:
    inp, got, wl = run("pool2d", kind=kind, **case)
    x = t(inp["data"])
    kw = dict(kernel_size=case["kernel"], stride=case.get("stride", 1), padding=case.get("padding", 0))
    if kind == "max":
        want = F.max_pool2d(x, **kw)
    else:
        want = F.avg_pool2d(x, count_include_pad=True, **kw)  # divides by kh*kw, padding included
    close(got, want)
    assert [s.name for s in wl.dag.computes][-1] == "pool"


def test_max_pool_int_pads_with_int_min() -> None:
    inp, got, _ = run("pool2d", 1, 1, 3, 3, 3, 1, 1, "max", "int32")
    assert got.dtype == np.int32
    x = inp["data"][0, 0].astype(np.int64)
    want = np.array([[x[max(0, i - 1):i + 2, max(0, j - 1):j + 2].max() for j in range(3)] for i in range(3)])
    np.testing.assert_array_equal(got[0, 0], want)


@pytest.mark.parametrize("M,N", [(1, 1), (4, 7), (3, 64)])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_softmax(M: int, N: int, dtype: str) -> None:
    inp, got, wl = run("softmax", M, N, dtype)
    assert [s.name for s in wl.dag.computes] == ["maxelem", "expv", "expsum", "rsum", "norm"]
    close(got, torch.softmax(t(inp["X"]), dim=-1), dtype)


def test_softmax_is_stable_for_large_inputs() -> None:
    wl = Workload.create("softmax", 2, 3)
    x = np.array([[1000.0, 1001.0, 999.0], [-1000.0, -1000.0, -1000.0]], dtype=np.float32)
    got = wl.dag.evaluate({"X": x})["norm"]
    close(got, torch.softmax(t(x), dim=-1))


@pytest.mark.parametrize("M,N,eps", [(2, 3, 1e-5), (5, 17, 1e-3), (1, 1, 1e-5)])
def test_layernorm(M: int, N: int, eps: float) -> None:
    inp, got, wl = run("layernorm", M, N, eps)
    assert [s.name for s in wl.dag.computes] == ["mean", "var", "out"]
    want = F.layer_norm(t(inp["X"]), (N,), t(inp["gamma"]), t(inp["beta"]), eps=eps)
    close(got, want)


@pytest.mark.parametrize("shape", [(1,), (37,), (3, 5), (2, 3, 4)])
def test_gelu(shape: tuple[int, ...]) -> None:
    inp, got, _ = run("gelu", *shape)
    close(got, F.gelu(t(inp["X"]), approximate="tanh"))
    x = np.linspace(-6, 6, 41).astype(np.float32)
    out = Workload.create("gelu", 41).dag.evaluate({"X": x})["out"]
    close(out, F.gelu(t(x), approximate="tanh"))


@pytest.mark.parametrize("shape,axes,keepdims", [
    ((4, 5), 1, False), ((4, 5), (0,), True), ((2, 3, 4), (0, 2), False), ((2, 3, 4), (-1, 0), True),
    ((3, 4), (0, 1), False), ((6,), 0, True),
])
@pytest.mark.parametrize("kind", ["sum", "max", "min"])
def test_reduce(shape, axes, keepdims: bool, kind: str) -> None:
    inp, got, _ = run("reduce", shape, axes, kind, keepdims)
    want = getattr(np, kind)(inp["X"].astype(np.float64), axis=axes, keepdims=keepdims)
    close(got, np.asarray(want).reshape(got.shape) if np.ndim(want) == 0 else want)
    if not keepdims and np.ndim(want) == 0:
        assert got.shape == (1,)  # every axis reduced: te tensors keep one dimension


def test_reduce_int64() -> None:
    inp, got, _ = run("reduce", (3, 4), 1, "sum", False, "int64")
    np.testing.assert_array_equal(got, inp["X"].sum(axis=1))


@pytest.mark.parametrize("shape,perm", [((3, 4), (1, 0)), ((2, 3, 4), (2, 0, 1)), ((2, 3, 4, 5), (0, 2, 3, 1)),
                                        ((5,), (0,))])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int32"])
def test_transpose(shape, perm, dtype: str) -> None:
    inp, got, wl = run("transpose", shape, perm, dtype)
    np.testing.assert_array_equal(got, np.transpose(inp["X"], perm))
    assert wl.flops == 0


def test_ops_are_callable_directly() -> None:
    A, B, C = ops.matmul(4, 5, 6)
    assert (A.shape, B.shape, C.shape) == ((4, 6), (6, 5), (4, 5))
    data, kernel, conv = ops.conv2d_nchw(1, 3, 8, 8, 4, 3, 3, stride=2, padding=1)
    assert conv.shape == (1, 4, 4, 4)
