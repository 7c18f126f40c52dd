"""Row-wise neural-network ops: softmax, layernorm, gelu.

Each is written as the small pipeline of stages a hand-written kernel would fuse (reductions
must be the whole body of a stage), so the search decides what to inline and where to fuse.
"""

from __future__ import annotations

import math

from autosched import te
from autosched.ops import _args as a
from autosched.te import Tensor
from autosched.workload import workload


@workload("softmax")
def softmax(M: int, N: int, dtype: str = "float32") -> list[Tensor]:
    """Softmax over the last axis of X [M, N], in the numerically safe form: row max,
    exp(x - max), row sum, its reciprocal, normalize.

    The normalization multiplies by the row's reciprocal sum, as torch's kernel does: without
    -ffast-math the compiler must keep a division per element, and vector division has a
    fraction of the multiplier's throughput (see docs/decisions/softmax-reciprocal.md).
    """
    M, N = a.pos_int("softmax", "M", M), a.pos_int("softmax", "N", N)
    dtype = a.dtype("softmax", dtype, float_only=True)
    X = te.placeholder((M, N), "X", dtype)
    k = te.reduce_axis(N, "k")
    mx = te.compute((M,), lambda i: te.max(X[i, k], axis=k), "maxelem")
    ex = te.compute((M, N), lambda i, j: te.exp(X[i, j] - mx[i]), "expv")
    k2 = te.reduce_axis(N, "k")
    sm = te.compute((M,), lambda i: te.sum(ex[i, k2], axis=k2), "expsum")
    rs = te.compute((M,), lambda i: 1.0 / sm[i], "rsum")
    out = te.compute((M, N), lambda i, j: ex[i, j] * rs[i], "norm")
    return [X, out]


@workload("layernorm")
def layernorm(M: int, N: int, eps: float = 1e-5, dtype: str = "float32") -> list[Tensor]:
    """LayerNorm over the last axis of X [M, N] with gamma, beta [N] (torch's layer_norm).

    Variance is the two-pass (biased) form, sum((x - mean)^2) / N: it loses no precision to
    cancellation, unlike E[x^2] - E[x]^2.
    """
    op = "layernorm"
    M, N = a.pos_int(op, "M", M), a.pos_int(op, "N", N)
    if isinstance(eps, bool) or not isinstance(eps, int | float) or not eps > 0 or math.isinf(eps):
        raise ValueError(f"{op}: argument 'eps' must be a positive finite float, got {eps!r}")
    eps = float(eps)
    dtype = a.dtype(op, dtype, float_only=True)
    X = te.placeholder((M, N), "X", dtype)
    gamma = te.placeholder((N,), "gamma", dtype)
    beta = te.placeholder((N,), "beta", dtype)
    inv_n = 1.0 / N
    k = te.reduce_axis(N, "k")
    mean = te.compute((M,), lambda i: te.sum(X[i, k] * inv_n, axis=k), "mean")
    k2 = te.reduce_axis(N, "k")

    def sq_dev(i, kk):
        d = X[i, kk] - mean[i]
        return d * d

    var = te.compute((M,), lambda i: te.sum(sq_dev(i, k2) * inv_n, axis=k2), "var")
    out = te.compute(
        (M, N), lambda i, j: (X[i, j] - mean[i]) * te.rsqrt(var[i] + eps) * gamma[j] + beta[j], "out"
    )
    return [X, gamma, beta, out]


@workload("gelu")
def gelu(*shape: int, dtype: str = "float32") -> list[Tensor]:
    """GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), elementwise over
    X of `shape` (`gelu(1024)`, `gelu(8, 768)` or `gelu((8, 768))`). Same as torch's
    `gelu(approximate="tanh")`."""
    dims = a.shape("gelu", "shape", shape[0] if len(shape) == 1 else shape)
    dtype = a.dtype("gelu", dtype, float_only=True)
    X = te.placeholder(dims, "X", dtype)
    c = math.sqrt(2.0 / math.pi)

    def f(*idx):
        x = X[idx]
        return 0.5 * x * (1.0 + te.tanh(c * (x + 0.044715 * (x * x * x))))

    out = te.compute(dims, f, "out", axis_names=[f"i{d}" for d in range(len(dims))])
    return [X, out]
