"""Matrix products: matmul, batch_matmul and dense + bias + relu.

These are the workloads multi-level tiling is built for; their bodies are plain
`sum(A[..] * B[..])` so the reference evaluates them through `np.einsum`.
"""

from __future__ import annotations

from autosched import te
from autosched.ops import _args as a
from autosched.te import Tensor
from autosched.workload import workload


@workload("matmul")
def matmul(M: int, N: int, K: int, dtype: str = "float32") -> list[Tensor]:
    """C[i, j] = sum_k A[i, k] * B[k, j]; A is [M, K], B is [K, N]."""
    M, N, K = (a.pos_int("matmul", n, v) for n, v in (("M", M), ("N", N), ("K", K)))
    dtype = a.dtype("matmul", dtype)
    A = te.placeholder((M, K), "A", dtype)
    B = te.placeholder((K, N), "B", dtype)
    k = te.reduce_axis(K, "k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), "C")
    return [A, B, C]


@workload("batch_matmul")
def batch_matmul(B: int, M: int, N: int, K: int, dtype: str = "float32") -> list[Tensor]:
    """C[b, i, j] = sum_k A[b, i, k] * Bm[b, k, j] (torch.bmm's layout: the right operand is not
    transposed; TVM's `batch_matmul` transposes it by default)."""
    op = "batch_matmul"
    B, M, N, K = (a.pos_int(op, n, v) for n, v in (("B", B), ("M", M), ("N", N), ("K", K)))
    dtype = a.dtype(op, dtype)
    X = te.placeholder((B, M, K), "A", dtype)
    Y = te.placeholder((B, K, N), "B", dtype)
    k = te.reduce_axis(K, "k")
    C = te.compute((B, M, N), lambda b, i, j: te.sum(X[b, i, k] * Y[b, k, j], axis=k), "C")
    return [X, Y, C]


@workload("dense_bias_relu")
def dense_bias_relu(M: int, N: int, K: int, dtype: str = "float32") -> list[Tensor]:
    """out = relu(X · W^T + bias) with X [M, K], W [N, K] (nn.Linear's layout), bias [N].

    The product and the bias+relu epilogue are separate stages on purpose: whether the epilogue
    is inlined, fused at some loop level or kept apart is a schedule decision, not the op's.
    """
    op = "dense_bias_relu"
    M, N, K = (a.pos_int(op, n, v) for n, v in (("M", M), ("N", N), ("K", K)))
    dtype = a.dtype(op, dtype)
    X = te.placeholder((M, K), "X", dtype)
    W = te.placeholder((N, K), "W", dtype)
    bias = te.placeholder((N,), "bias", dtype)
    k = te.reduce_axis(K, "k")
    D = te.compute((M, N), lambda i, j: te.sum(X[i, k] * W[j, k], axis=k), "dense")
    out = te.compute((M, N), lambda i, j: te.maximum(D[i, j] + bias[j], 0), "out")
    return [X, W, bias, out]
