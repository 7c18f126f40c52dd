"""The generality suite's operators (issue 29): custom DAGs as a user writes them with `te`.

Each builder takes a `te` namespace and the shape and returns (tensors: inputs then outputs, flops).
It uses only the API that `autosched.te` and TVM's `tvm.te` share (placeholder, compute, reduce_axis,
sum, max, const, all, if_then_else, exp, erf, tanh, sigmoid, rsqrt), so the very same function builds
autosched's workload and TVM MetaSchedule's twin; nothing from autosched is imported here. Shapes are
products of odd primes (17, 31, 97, 127, 517, ...) so that no common tile or vector size (8, 16, 32,
64) divides any dimension. Every entry carries a torch eager twin that writes into `out=` where torch
offers it (`torch_allocates` marks the others) and says whether TVM runs it (`tvm`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import generality_torch as tw

F32_LOWEST = -3.4028234663852886e38  # padding value of max pooling: below every float32 input


@dataclass(frozen=True)
class GeneralityWorkload:
    """One operator of the suite. `torch_fn(shape, *inputs, out=None)` computes the output with torch
    eager from the inputs in build order (shape gives strides and windows); it returns the output,
    written into `out` when given and `torch_allocates` is False. `small` is a quick-to-build shape
    of the same structure, for tests."""

    name: str
    kind: str
    build: Callable[..., tuple[list[Any], float]]
    shape: tuple[int, ...]
    small: tuple[int, ...]
    torch_fn: Callable[..., Any]
    torch_allocates: bool
    tvm: bool

    def tensors(self, te: Any, shape: tuple[int, ...] | None = None) -> tuple[list[Any], float]:
        return self.build(te, *(shape or self.shape))

    def torch_call(self, shape: tuple[int, ...] | None = None) -> Callable[..., Any]:
        """The torch twin bound to a shape: `fn(*inputs, out=None)`."""
        return partial(self.torch_fn, tuple(shape or self.shape))


def _f32(te: Any, value: float) -> Any:
    return te.const(value, "float32")


# ---- matmuls -------------------------------------------------------------------------------------------

def matmul_nn(te: Any, m: int, n: int, k: int) -> tuple[list[Any], float]:
    """C = A B, A [M, K], B [K, N]."""
    a = te.placeholder((m, k), name="A", dtype="float32")
    b = te.placeholder((k, n), name="B", dtype="float32")
    r = te.reduce_axis((0, k), name="r")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    return [a, b, c], 2.0 * m * n * k


def matmul_nt(te: Any, m: int, n: int, k: int) -> tuple[list[Any], float]:
    """C = A B^T, B stored [N, K] (a torch Linear weight)."""
    a = te.placeholder((m, k), name="A", dtype="float32")
    b = te.placeholder((n, k), name="B", dtype="float32")
    r = te.reduce_axis((0, k), name="r")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[j, r], axis=r), name="C")
    return [a, b, c], 2.0 * m * n * k


def matmul_tn(te: Any, m: int, n: int, k: int) -> tuple[list[Any], float]:
    """C = A^T B, A stored [K, M]."""
    a = te.placeholder((k, m), name="A", dtype="float32")
    b = te.placeholder((k, n), name="B", dtype="float32")
    r = te.reduce_axis((0, k), name="r")
    c = te.compute((m, n), lambda i, j: te.sum(a[r, i] * b[r, j], axis=r), name="C")
    return [a, b, c], 2.0 * m * n * k


def matmul_tt(te: Any, m: int, n: int, k: int) -> tuple[list[Any], float]:
    """C = A^T B^T, A stored [K, M], B stored [N, K]."""
    a = te.placeholder((k, m), name="A", dtype="float32")
    b = te.placeholder((n, k), name="B", dtype="float32")
    r = te.reduce_axis((0, k), name="r")
    c = te.compute((m, n), lambda i, j: te.sum(a[r, i] * b[j, r], axis=r), name="C")
    return [a, b, c], 2.0 * m * n * k


def batch_matmul(te: Any, bs: int, m: int, n: int, k: int) -> tuple[list[Any], float]:
    """C[b] = A[b] B[b] for many small matrices."""
    a = te.placeholder((bs, m, k), name="A", dtype="float32")
    b = te.placeholder((bs, k, n), name="B", dtype="float32")
    r = te.reduce_axis((0, k), name="r")
    c = te.compute((bs, m, n), lambda p, i, j: te.sum(a[p, i, r] * b[p, r, j], axis=r), name="C")
    return [a, b, c], 2.0 * bs * m * n * k


def dense_bias_relu(te: Any, m: int, n: int, k: int) -> tuple[list[Any], float]:
    """relu(X W^T + bias), W [N, K]: a Linear layer and its activation."""
    x = te.placeholder((m, k), name="X", dtype="float32")
    w = te.placeholder((n, k), name="W", dtype="float32")
    bias = te.placeholder((n,), name="bias", dtype="float32")
    r = te.reduce_axis((0, k), name="r")
    d = te.compute((m, n), lambda i, j: te.sum(x[i, r] * w[j, r], axis=r), name="dense")
    y = te.compute((m, n), lambda i, j: te.max(d[i, j] + bias[j], _f32(te, 0.0)), name="Y")
    return [x, w, bias, y], 2.0 * m * n * k + 2.0 * m * n


def matmul_softmax(te: Any, m: int, n: int, k: int) -> tuple[list[Any], float]:
    """softmax over the rows of X W (attention scores), two stages in one DAG."""
    x = te.placeholder((m, k), name="X", dtype="float32")
    w = te.placeholder((k, n), name="W", dtype="float32")
    r = te.reduce_axis((0, k), name="r")
    s = te.compute((m, n), lambda i, j: te.sum(x[i, r] * w[r, j], axis=r), name="scores")
    y, sm_flops = _softmax_of(te, s, m, n)
    return [x, w, y], 2.0 * m * n * k + sm_flops


def matmul_bias_gelu(te: Any, m: int, n: int, k: int) -> tuple[list[Any], float]:
    """gelu(X W + bias) with the exact (erf) gelu."""
    x = te.placeholder((m, k), name="X", dtype="float32")
    w = te.placeholder((k, n), name="W", dtype="float32")
    bias = te.placeholder((n,), name="bias", dtype="float32")
    r = te.reduce_axis((0, k), name="r")
    h = te.compute((m, n), lambda i, j: te.sum(x[i, r] * w[r, j], axis=r), name="H")
    hb = te.compute((m, n), lambda i, j: h[i, j] + bias[j], name="HB")
    y = te.compute((m, n), lambda i, j: hb[i, j] * 0.5 * (1.0 + te.erf(hb[i, j] * (1.0 / math.sqrt(2.0)))),
                   name="Y")
    return [x, w, bias, y], 2.0 * m * n * k + 6.0 * m * n


# ---- sliding windows -----------------------------------------------------------------------------------

def _out(size: int, pad: int, window: int, stride: int, dilation: int = 1) -> int:
    return (size + 2 * pad - dilation * (window - 1) - 1) // stride + 1


def _pad(te: Any, data: Any, pad: int, value: float) -> Any:
    nb, c, h, w = (int(d) for d in data.shape)
    if pad == 0:
        return data
    return te.compute((nb, c, h + 2 * pad, w + 2 * pad), lambda n, ci, y, x: te.if_then_else(
        te.all(y >= pad, y < h + pad, x >= pad, x < w + pad), data[n, ci, y - pad, x - pad], _f32(te, value)),
        name="padded")


def conv2d(te: Any, nb: int, c: int, h: int, w: int, kf: int, kr: int, ks: int, stride: int, pad: int,
           dil: int) -> tuple[list[Any], float]:
    """NCHW convolution with a padding stage:
    out[n, f, y, x] = sum_{c, ry, rx} pad[n, c, y*s + ry*d, x*s + rx*d] * kernel[f, c, ry, rx]."""
    oh, ow = _out(h, pad, kr, stride, dil), _out(w, pad, ks, stride, dil)
    data = te.placeholder((nb, c, h, w), name="data", dtype="float32")
    kernel = te.placeholder((kf, c, kr, ks), name="kernel", dtype="float32")
    src = _pad(te, data, pad, 0.0)
    rc, ry, rx = (te.reduce_axis((0, c), name="rc"), te.reduce_axis((0, kr), name="ry"),
                  te.reduce_axis((0, ks), name="rx"))
    out = te.compute((nb, kf, oh, ow), lambda n, f, y, x: te.sum(
        src[n, rc, y * stride + ry * dil, x * stride + rx * dil] * kernel[f, rc, ry, rx], axis=[rc, ry, rx]),
        name="conv")
    return [data, kernel, out], 2.0 * nb * kf * oh * ow * c * kr * ks


def conv2d_guarded(te: Any, nb: int, c: int, h: int, w: int, kf: int, kr: int, ks: int, stride: int, pad: int,
                   dil: int) -> tuple[list[Any], float]:
    """The same convolution with the padding written as a guarded read inside the reduction (no pad stage)."""
    oh, ow = _out(h, pad, kr, stride, dil), _out(w, pad, ks, stride, dil)
    data = te.placeholder((nb, c, h, w), name="data", dtype="float32")
    kernel = te.placeholder((kf, c, kr, ks), name="kernel", dtype="float32")
    rc, ry, rx = (te.reduce_axis((0, c), name="rc"), te.reduce_axis((0, kr), name="ry"),
                  te.reduce_axis((0, ks), name="rx"))

    def body(n: Any, f: Any, y: Any, x: Any) -> Any:
        iy, ix = y * stride + ry * dil - pad, x * stride + rx * dil - pad
        inside = te.all(iy >= 0, iy < h, ix >= 0, ix < w)
        return te.sum(te.if_then_else(inside, data[n, rc, iy, ix], _f32(te, 0.0)) * kernel[f, rc, ry, rx],
                      axis=[rc, ry, rx])

    out = te.compute((nb, kf, oh, ow), body, name="conv")
    return [data, kernel, out], 2.0 * nb * kf * oh * ow * c * kr * ks


def depthwise(te: Any, nb: int, c: int, h: int, w: int, kr: int, ks: int, stride: int,
              pad: int) -> tuple[list[Any], float]:
    """Depthwise NCHW convolution, kernel [C, R, S] (torch: groups=C, weight [C, 1, R, S])."""
    oh, ow = _out(h, pad, kr, stride), _out(w, pad, ks, stride)
    data = te.placeholder((nb, c, h, w), name="data", dtype="float32")
    kernel = te.placeholder((c, kr, ks), name="kernel", dtype="float32")
    src = _pad(te, data, pad, 0.0)
    ry, rx = te.reduce_axis((0, kr), name="ry"), te.reduce_axis((0, ks), name="rx")
    out = te.compute((nb, c, oh, ow), lambda n, ci, y, x: te.sum(
        src[n, ci, y * stride + ry, x * stride + rx] * kernel[ci, ry, rx], axis=[ry, rx]), name="dwconv")
    return [data, kernel, out], 2.0 * nb * c * oh * ow * kr * ks


def max_pool(te: Any, nb: int, c: int, h: int, w: int, win: int, stride: int, pad: int) -> tuple[list[Any], float]:
    """Max pooling over win x win windows, padded with the lowest float (never the max of a window)."""
    oh, ow = _out(h, pad, win, stride), _out(w, pad, win, stride)
    data = te.placeholder((nb, c, h, w), name="data", dtype="float32")
    src = _pad(te, data, pad, F32_LOWEST)
    ry, rx = te.reduce_axis((0, win), name="ry"), te.reduce_axis((0, win), name="rx")
    out = te.compute((nb, c, oh, ow), lambda n, ci, y, x: te.max(
        src[n, ci, y * stride + ry, x * stride + rx], axis=[ry, rx]), name="pool")
    return [data, out], 1.0 * nb * c * oh * ow * win * win


def avg_pool(te: Any, nb: int, c: int, h: int, w: int, win: int, stride: int) -> tuple[list[Any], float]:
    """Average pooling without padding: a window sum, then a scale."""
    oh, ow = _out(h, 0, win, stride), _out(w, 0, win, stride)
    data = te.placeholder((nb, c, h, w), name="data", dtype="float32")
    ry, rx = te.reduce_axis((0, win), name="ry"), te.reduce_axis((0, win), name="rx")
    s = te.compute((nb, c, oh, ow), lambda n, ci, y, x: te.sum(
        data[n, ci, y * stride + ry, x * stride + rx], axis=[ry, rx]), name="wsum")
    out = te.compute((nb, c, oh, ow), lambda n, ci, y, x: s[n, ci, y, x] * (1.0 / (win * win)), name="pool")
    return [data, out], 1.0 * nb * c * oh * ow * (win * win + 1)


# ---- reductions ----------------------------------------------------------------------------------------

def reduce_rows(te: Any, m: int, n: int) -> tuple[list[Any], float]:
    """Row sums: reduce the last (contiguous) axis."""
    x = te.placeholder((m, n), name="X", dtype="float32")
    r = te.reduce_axis((0, n), name="r")
    y = te.compute((m,), lambda i: te.sum(x[i, r], axis=r), name="Y")
    return [x, y], 1.0 * m * n


def reduce_cols(te: Any, m: int, n: int) -> tuple[list[Any], float]:
    """Column sums: reduce the first (strided) axis."""
    x = te.placeholder((m, n), name="X", dtype="float32")
    r = te.reduce_axis((0, m), name="r")
    y = te.compute((n,), lambda j: te.sum(x[r, j], axis=r), name="Y")
    return [x, y], 1.0 * m * n


def reduce_mid(te: Any, a: int, b: int, c: int) -> tuple[list[Any], float]:
    """Max over the middle axis of a 3-D tensor."""
    x = te.placeholder((a, b, c), name="X", dtype="float32")
    r = te.reduce_axis((0, b), name="r")
    y = te.compute((a, c), lambda i, k: te.max(x[i, r, k], axis=r), name="Y")
    return [x, y], 1.0 * a * b * c


def reduce_outer_inner(te: Any, a: int, b: int, c: int) -> tuple[list[Any], float]:
    """Sum over the first and last axes together (per-channel statistics): a small output."""
    x = te.placeholder((a, b, c), name="X", dtype="float32")
    r0, r2 = te.reduce_axis((0, a), name="r0"), te.reduce_axis((0, c), name="r2")
    y = te.compute((b,), lambda j: te.sum(x[r0, j, r2], axis=[r0, r2]), name="Y")
    return [x, y], 1.0 * a * b * c


# ---- row-wise normalizations ---------------------------------------------------------------------------

def _softmax_of(te: Any, x: Any, m: int, n: int) -> tuple[Any, float]:
    k1 = te.reduce_axis((0, n), name="k1")
    mx = te.compute((m,), lambda i: te.max(x[i, k1], axis=k1), name="rowmax")
    e = te.compute((m, n), lambda i, j: te.exp(x[i, j] - mx[i]), name="e")
    k2 = te.reduce_axis((0, n), name="k2")
    s = te.compute((m,), lambda i: te.sum(e[i, k2], axis=k2), name="rowsum")
    y = te.compute((m, n), lambda i, j: e[i, j] / s[i], name="Y")
    return y, 5.0 * m * n


def softmax(te: Any, m: int, n: int) -> tuple[list[Any], float]:
    """Row softmax as a user writes it: max, exp of the difference, sum, divide."""
    x = te.placeholder((m, n), name="X", dtype="float32")
    y, flops = _softmax_of(te, x, m, n)
    return [x, y], flops


def layernorm(te: Any, m: int, n: int) -> tuple[list[Any], float]:
    """Row layernorm (two-pass variance, eps 1e-5) with gamma and beta of length N."""
    x = te.placeholder((m, n), name="X", dtype="float32")
    g = te.placeholder((n,), name="gamma", dtype="float32")
    b = te.placeholder((n,), name="beta", dtype="float32")
    k1 = te.reduce_axis((0, n), name="k1")
    # a reduction is the whole body of its stage (in both te's), so the 1/N goes inside the sum
    mean = te.compute((m,), lambda i: te.sum(x[i, k1] * (1.0 / n), axis=k1), name="mean")
    k2 = te.reduce_axis((0, n), name="k2")
    var = te.compute((m,), lambda i: te.sum((x[i, k2] - mean[i]) * (x[i, k2] - mean[i]) * (1.0 / n), axis=k2),
                     name="var")
    y = te.compute((m, n), lambda i, j: (x[i, j] - mean[i]) * te.rsqrt(var[i] + 1e-5) * g[j] + b[j], name="Y")
    return [x, g, b, y], 8.0 * m * n


# ---- elementwise chains --------------------------------------------------------------------------------

def chain_tanh(te: Any, m: int, n: int) -> tuple[list[Any], float]:
    """tanh(x * a[j] + b[j]) * x: a scale, a shift, a transcendental and a product in one pass."""
    x = te.placeholder((m, n), name="X", dtype="float32")
    a = te.placeholder((n,), name="a", dtype="float32")
    b = te.placeholder((n,), name="b", dtype="float32")
    y = te.compute((m, n), lambda i, j: te.tanh(x[i, j] * a[j] + b[j]) * x[i, j], name="Y")
    return [x, a, b, y], 4.0 * m * n


def chain_silu(te: Any, m: int, n: int) -> tuple[list[Any], float]:
    """silu(x - mu[i]) * s[j] in two stages (a broadcast along each axis)."""
    x = te.placeholder((m, n), name="X", dtype="float32")
    mu = te.placeholder((m,), name="mu", dtype="float32")
    s = te.placeholder((n,), name="s", dtype="float32")
    d = te.compute((m, n), lambda i, j: x[i, j] - mu[i], name="D")
    y = te.compute((m, n), lambda i, j: d[i, j] * te.sigmoid(d[i, j]) * s[j], name="Y")
    return [x, mu, s, y], 4.0 * m * n


def _w(name: str, kind: str, build: Callable, shape: tuple[int, ...], small: tuple[int, ...], twin: Callable,
       allocates: bool, tvm: bool = False) -> GeneralityWorkload:
    return GeneralityWorkload(name, kind, build, shape, small, twin, allocates, tvm)


_ENTRIES = [
    # matmul with each operand transposed: M = 11*47, N = 3*7*23, K = 17*23
    _w("matmul_nn", "matmul", matmul_nn, (517, 483, 391), (17, 13, 11), tw.t_matmul_nn, False, tvm=True),
    _w("matmul_nt", "matmul", matmul_nt, (517, 483, 391), (17, 13, 11), tw.t_matmul_nt, False, tvm=True),
    _w("matmul_tn", "matmul", matmul_tn, (517, 483, 391), (17, 13, 11), tw.t_matmul_tn, False, tvm=True),
    _w("matmul_tt", "matmul", matmul_tt, (517, 483, 391), (17, 13, 11), tw.t_matmul_tt, False),
    # skinny and fat: one side from 1 to 64
    _w("matmul_m1", "skinny_matmul", matmul_nn, (1, 2047, 1531), (1, 19, 13), tw.t_matmul_nn, False),
    _w("matmul_n33", "skinny_matmul", matmul_nn, (1531, 33, 517), (23, 5, 11), tw.t_matmul_nn, False),
    _w("matmul_k17", "skinny_matmul", matmul_nn, (1021, 1023, 17), (19, 13, 3), tw.t_matmul_nn, False),
    _w("batch_matmul_small", "batch_matmul", batch_matmul, (393, 19, 29, 23), (5, 3, 7, 5), tw.t_bmm, False,
       tvm=True),
    _w("dense_bias_relu", "dense_bias_act", dense_bias_relu, (257, 1001, 515), (9, 13, 11), tw.t_dense_bias_relu,
       False, tvm=True),
    # convolutions: (N, C, H, W, K, R, S, stride, pad, dilation)
    _w("conv_c1_5x5_guarded", "conv2d", conv2d_guarded, (1, 1, 127, 127, 31, 5, 5, 1, 2, 1),
       (1, 1, 13, 11, 3, 5, 5, 1, 2, 1), tw.t_conv2d, True),
    _w("conv_c3_7x7_s2", "conv2d", conv2d, (1, 3, 225, 225, 63, 7, 7, 2, 3, 1), (1, 3, 19, 17, 5, 7, 7, 2, 3, 1),
       tw.t_conv2d, True, tvm=True),
    _w("conv_c5_3x3_s3", "conv2d", conv2d, (1, 5, 343, 343, 47, 3, 3, 3, 1, 1), (1, 5, 17, 19, 3, 3, 3, 3, 1, 1),
       tw.t_conv2d, True),
    _w("conv_1x1", "conv2d", conv2d, (1, 67, 57, 57, 131, 1, 1, 1, 0, 1), (1, 7, 9, 11, 5, 1, 1, 1, 0, 1),
       tw.t_conv2d, True, tvm=True),
    _w("conv_3x3_dil2", "conv2d", conv2d, (1, 13, 99, 99, 29, 3, 3, 1, 2, 2), (1, 3, 13, 11, 5, 3, 3, 1, 2, 2),
       tw.t_conv2d, True),
    # depthwise: (N, C, H, W, R, S, stride, pad)
    _w("depthwise_3x3", "depthwise", depthwise, (1, 95, 113, 113, 3, 3, 1, 1), (1, 5, 11, 9, 3, 3, 1, 1),
       tw.t_depthwise, True, tvm=True),
    _w("depthwise_5x5_s2", "depthwise", depthwise, (1, 47, 225, 225, 5, 5, 2, 2), (1, 3, 17, 15, 5, 5, 2, 2),
       tw.t_depthwise, True),
    # pooling: (N, C, H, W, window, stride[, pad])
    _w("max_pool_3x3_s2", "pooling", max_pool, (1, 63, 225, 225, 3, 2, 1), (1, 3, 13, 11, 3, 2, 1), tw.t_max_pool,
       True, tvm=True),
    _w("avg_pool_3x3_s3", "pooling", avg_pool, (1, 61, 231, 231, 3, 3), (1, 3, 13, 11, 3, 3), tw.t_avg_pool, True),
    # reductions along each axis
    _w("reduce_rows", "reduction", reduce_rows, (4099, 1021), (13, 17), tw.t_reduce_rows, False),
    _w("reduce_cols", "reduction", reduce_cols, (1021, 4099), (17, 13), tw.t_reduce_cols, False, tvm=True),
    _w("reduce_mid_max", "reduction", reduce_mid, (63, 127, 383), (3, 11, 7), tw.t_reduce_mid, False),
    _w("reduce_outer_inner", "reduction", reduce_outer_inner, (63, 127, 513), (3, 5, 11), tw.t_reduce_outer_inner,
       False),
    # softmax and layernorm over short, odd and very long rows (softmax_short is deliberately small)
    _w("softmax_short", "softmax", softmax, (17, 37), (3, 5), tw.t_softmax, False),
    _w("softmax_odd", "softmax", softmax, (1023, 517), (7, 13), tw.t_softmax, False, tvm=True),
    _w("softmax_long", "softmax", softmax, (9, 131071), (3, 1031), tw.t_softmax, False),
    _w("layernorm_short", "layernorm", layernorm, (8191, 23), (11, 5), tw.t_layernorm, True),
    _w("layernorm_odd", "layernorm", layernorm, (2047, 517), (7, 13), tw.t_layernorm, True, tvm=True),
    _w("layernorm_long", "layernorm", layernorm, (7, 100003), (3, 1031), tw.t_layernorm, True),
    # two-stage DAGs
    _w("matmul_softmax", "two_stage", matmul_softmax, (257, 517, 131), (7, 13, 5), tw.t_matmul_softmax, False,
       tvm=True),
    _w("matmul_bias_gelu", "two_stage", matmul_bias_gelu, (515, 1001, 257), (9, 13, 7), tw.t_matmul_bias_gelu,
       False),
    # elementwise chains
    _w("chain_tanh", "elementwise", chain_tanh, (1021, 2047), (7, 13), tw.t_chain_tanh, False),
    _w("chain_silu", "elementwise", chain_silu, (3001, 517), (13, 7), tw.t_chain_silu, False),
]
WORKLOADS: dict[str, GeneralityWorkload] = {w.name: w for w in _ENTRIES}
KINDS = ("matmul", "skinny_matmul", "batch_matmul", "dense_bias_act", "conv2d", "depthwise", "pooling",
         "reduction", "softmax", "layernorm", "two_stage", "elementwise")


def unknown(names: list[str] | None) -> list[str]:
    """Names in `names` that are not in the suite."""
    return sorted(set(names or []) - set(WORKLOADS))

