"""The registered ops written again by hand with `te`, every name and the declaration order chosen
by the caller: what issue 29's "structure, never names" test compares the op library against.

Each builder takes the op's arguments, `n` (the op library's name of each tensor and axis -> the
name to use) and `flip` (declare the placeholders, and the computes that do not depend on each
other, in another order, and list the build arguments in that order). With the identity names and
no flip a builder gives the registered op's DAG exactly (checked by the test), so the copies cannot
drift from the op library unnoticed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from autosched import te
from autosched.te import Tensor

Names = Mapping[str, str]
Builder = Callable[..., list[Tensor]]


def matmul(M: int, N: int, K: int, n: Names, flip: bool) -> list[Tensor]:
    if flip:
        B = te.placeholder((K, N), n["B"])
        A = te.placeholder((M, K), n["A"])
    else:
        A = te.placeholder((M, K), n["A"])
        B = te.placeholder((K, N), n["B"])
    k = te.reduce_axis(K, n["k"])
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), n["C"], axis_names=[n["i"], n["j"]])
    return [B, A, C] if flip else [A, B, C]


def batch_matmul(Bt: int, M: int, N: int, K: int, n: Names, flip: bool) -> list[Tensor]:
    if flip:
        Y = te.placeholder((Bt, K, N), n["B"])
        X = te.placeholder((Bt, M, K), n["A"])
    else:
        X = te.placeholder((Bt, M, K), n["A"])
        Y = te.placeholder((Bt, K, N), n["B"])
    k = te.reduce_axis(K, n["k"])
    C = te.compute((Bt, M, N), lambda b, i, j: te.sum(X[b, i, k] * Y[b, k, j], axis=k), n["C"],
                   axis_names=[n["b"], n["i"], n["j"]])
    return [Y, X, C] if flip else [X, Y, C]


def dense_bias_relu(M: int, N: int, K: int, n: Names, flip: bool) -> list[Tensor]:
    if flip:
        bias = te.placeholder((N,), n["bias"])
        W = te.placeholder((N, K), n["W"])
        X = te.placeholder((M, K), n["X"])
    else:
        X = te.placeholder((M, K), n["X"])
        W = te.placeholder((N, K), n["W"])
        bias = te.placeholder((N,), n["bias"])
    k = te.reduce_axis(K, n["k"])
    ij = [n["i"], n["j"]]
    D = te.compute((M, N), lambda i, j: te.sum(X[i, k] * W[j, k], axis=k), n["dense"], axis_names=ij)
    out = te.compute((M, N), lambda i, j: te.maximum(D[i, j] + bias[j], 0), n["out"], axis_names=ij)
    return [W, bias, X, out] if flip else [X, W, bias, out]


def _pad(data: Tensor, pad: tuple[int, int, int, int], value: float, n: Names) -> Tensor:
    top, left, bottom, right = pad
    if not any(pad):
        return data
    N_, C, H, W = data.shape

    def f(b, c, h, w):
        inside = te.all(h >= top, h < H + top, w >= left, w < W + left)
        return te.if_then_else(inside, data[b, c, h - top, w - left], te.const(value, data.dtype))

    return te.compute((N_, C, H + top + bottom, W + left + right), f, n["pad"],
                      axis_names=[n["n"], n["c"], n["h"], n["w"]])


def _out(size: int, pad: int, kernel: int, stride: int) -> int:
    return (size + pad - (kernel - 1) - 1) // stride + 1


def conv2d_nchw(N: int, C: int, H: int, W: int, K: int, R: int, S: int, stride: int, padding: int, n: Names,
                flip: bool) -> list[Tensor]:
    if flip:
        kernel = te.placeholder((K, C, R, S), n["kernel"])
        data = te.placeholder((N, C, H, W), n["data"])
    else:
        data = te.placeholder((N, C, H, W), n["data"])
        kernel = te.placeholder((K, C, R, S), n["kernel"])
    p = _pad(data, (padding,) * 4, 0, n)
    rc, ry, rx = te.reduce_axis(C, n["rc"]), te.reduce_axis(R, n["ry"]), te.reduce_axis(S, n["rx"])
    oh, ow = _out(H, 2 * padding, R, stride), _out(W, 2 * padding, S, stride)
    sh = sw = stride
    dh = dw = 1
    conv = te.compute(
        (N, K, oh, ow),
        lambda b, f, y, x: te.sum(p[b, rc, y * sh + ry * dh, x * sw + rx * dw] * kernel[f, rc, ry, rx],
                                  axis=[rc, ry, rx]),
        n["conv"], axis_names=[n["n"], n["f"], n["y"], n["x"]],
    )
    return [kernel, data, conv] if flip else [data, kernel, conv]


def depthwise_conv2d_nchw(N: int, C: int, H: int, W: int, R: int, S: int, stride: int, padding: int, n: Names,
                          flip: bool) -> list[Tensor]:
    if flip:
        kernel = te.placeholder((C, R, S), n["kernel"])
        data = te.placeholder((N, C, H, W), n["data"])
    else:
        data = te.placeholder((N, C, H, W), n["data"])
        kernel = te.placeholder((C, R, S), n["kernel"])
    p = _pad(data, (padding,) * 4, 0, n)
    ry, rx = te.reduce_axis(R, n["ry"]), te.reduce_axis(S, n["rx"])
    oh, ow = _out(H, 2 * padding, R, stride), _out(W, 2 * padding, S, stride)
    sh = sw = stride
    dh = dw = 1
    conv = te.compute(
        (N, C, oh, ow),
        lambda b, c, y, x: te.sum(p[b, c, y * sh + ry * dh, x * sw + rx * dw] * kernel[c, ry, rx], axis=[ry, rx]),
        n["conv"], axis_names=[n["n"], n["c"], n["y"], n["x"]],
    )
    return [kernel, data, conv] if flip else [data, kernel, conv]


def pool2d(N: int, C: int, H: int, W: int, kernel: int, stride: int, padding: int, kind: str, n: Names,
           flip: bool) -> list[Tensor]:
    data = te.placeholder((N, C, H, W), n["data"])
    low = te.max.identity("float32").value
    p = _pad(data, (padding,) * 4, low if kind == "max" else 0, n)
    ry, rx = te.reduce_axis(kernel, n["ry"]), te.reduce_axis(kernel, n["rx"])
    red = te.max if kind == "max" else te.sum
    oh, ow = _out(H, 2 * padding, kernel, stride), _out(W, 2 * padding, kernel, stride)
    axes = [n["n"], n["c"], n["y"], n["x"]]
    pooled = te.compute((N, C, oh, ow), lambda b, c, y, x: red(p[b, c, y * stride + ry, x * stride + rx],
                                                               axis=[ry, rx]),
                        n["pool" if kind == "max" else "pool_sum"], axis_names=axes)
    if kind == "avg":
        count = float(kernel * kernel)
        pooled = te.compute((N, C, oh, ow), lambda b, c, y, x: pooled[b, c, y, x] / count, n["pool"], axis_names=axes)
    return [data, pooled]


def softmax(M: int, N: int, n: Names, flip: bool) -> list[Tensor]:
    X = te.placeholder((M, N), n["X"])
    k = te.reduce_axis(N, n["k"])
    mx = te.compute((M,), lambda i: te.max(X[i, k], axis=k), n["maxelem"], axis_names=[n["i"]])
    ex = te.compute((M, N), lambda i, j: te.exp(X[i, j] - mx[i]), n["expv"], axis_names=[n["i"], n["j"]])
    k2 = te.reduce_axis(N, n["k"])
    sm = te.compute((M,), lambda i: te.sum(ex[i, k2], axis=k2), n["expsum"], axis_names=[n["i"]])
    rs = te.compute((M,), lambda i: 1.0 / sm[i], n["rsum"], axis_names=[n["i"]])
    out = te.compute((M, N), lambda i, j: ex[i, j] * rs[i], n["norm"], axis_names=[n["i"], n["j"]])
    return [X, out]


def layernorm(M: int, N: int, eps: float, n: Names, flip: bool) -> list[Tensor]:
    if flip:
        beta = te.placeholder((N,), n["beta"])
        gamma = te.placeholder((N,), n["gamma"])
        X = te.placeholder((M, N), n["X"])
    else:
        X = te.placeholder((M, N), n["X"])
        gamma = te.placeholder((N,), n["gamma"])
        beta = te.placeholder((N,), n["beta"])
    inv_n = 1.0 / N
    k = te.reduce_axis(N, n["k"])
    mean = te.compute((M,), lambda i: te.sum(X[i, k] * inv_n, axis=k), n["mean"], axis_names=[n["i"]])
    k2 = te.reduce_axis(N, n["k"])

    def sq_dev(i, kk):
        d = X[i, kk] - mean[i]
        return d * d

    var = te.compute((M,), lambda i: te.sum(sq_dev(i, k2) * inv_n, axis=k2), n["var"], axis_names=[n["i"]])
    out = te.compute((M, N), lambda i, j: (X[i, j] - mean[i]) * te.rsqrt(var[i] + eps) * gamma[j] + beta[j],
                     n["out"], axis_names=[n["i"], n["j"]])
    return [beta, X, gamma, out] if flip else [X, gamma, beta, out]


def gelu(M: int, N: int, n: Names, flip: bool) -> list[Tensor]:
    X = te.placeholder((M, N), n["X"])
    c = math.sqrt(2.0 / math.pi)

    def f(*idx):
        x = X[idx]
        return 0.5 * x * (1.0 + te.tanh(c * (x + 0.044715 * (x * x * x))))

    return [X, te.compute((M, N), f, n["out"], axis_names=[n["i0"], n["i1"]])]


def reduce_middle(D0: int, D1: int, D2: int, n: Names, flip: bool) -> list[Tensor]:
    """`reduce((D0, D1, D2), axes=1, kind="sum")`."""
    X = te.placeholder((D0, D1, D2), n["X"])
    r1 = te.reduce_axis(D1, n["r1"])
    out = te.compute((D0, D2), lambda a, c: te.sum(X[a, r1, c], axis=[r1]), n["out"],
                     axis_names=[n["i0"], n["i2"]])
    return [X, out]


def transpose_201(D0: int, D1: int, D2: int, n: Names, flip: bool) -> list[Tensor]:
    """`transpose((D0, D1, D2), perm=(2, 0, 1))`."""
    X = te.placeholder((D0, D1, D2), n["X"])
    out = te.compute((D2, D0, D1), lambda a, b, c: X[b, c, a], n["out"], axis_names=[n["i0"], n["i1"], n["i2"]])
    return [X, out]
