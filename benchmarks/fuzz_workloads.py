"""The workloads `fuzz_schedules.py` draws configs for: every library op and a few custom DAGs.

Shapes are small (a kernel runs in well under a millisecond) and include sizes that divide
nothing (1, 17, 31, 97 and mixes), since tails and partial tiles are where schedules go wrong.
`library_workloads` fails loudly when an op is registered without a row here, so a new op is
never silently left out of the fuzz.
"""

from __future__ import annotations

from collections.abc import Callable

from autosched import te
from autosched.workload import Workload, registered_workloads

# op name -> the (args, kwargs) of each shape it is fuzzed at
LIBRARY_SHAPES: dict[str, list[tuple[tuple, dict]]] = {
    "matmul": [((17, 31, 97), {}), ((1, 64, 31), {}), ((32, 32, 32), {}), ((97, 17, 5), {})],
    "batch_matmul": [((2, 17, 31, 13), {}), ((1, 8, 16, 32), {}), ((3, 1, 97, 7), {})],
    "dense_bias_relu": [((17, 31, 97), {}), ((16, 64, 32), {}), ((1, 97, 17), {})],
    "conv2d_nchw": [((1, 3, 17, 17, 8, 3, 3), {"stride": 1, "padding": 1}),
                    ((1, 4, 13, 11, 5, 3, 3), {"stride": 2, "padding": 0}),
                    ((1, 1, 7, 9, 3, 1, 1), {})],
    "depthwise_conv2d_nchw": [((1, 5, 17, 13, 3, 3), {"stride": 1, "padding": 1}),
                              ((1, 8, 16, 16, 3, 3), {"stride": 2, "padding": 1}),
                              ((1, 1, 1, 31, 1, 3), {})],
    "pool2d": [((1, 3, 17, 17, 3), {"stride": 2, "padding": 1, "kind": "max"}),
               ((1, 4, 13, 8, 2), {"stride": 2, "kind": "avg"}),
               ((1, 2, 31, 5, 3), {"stride": 1, "padding": 1, "kind": "avg"})],
    "softmax": [((17, 31), {}), ((1, 97), {}), ((32, 64), {})],
    "layernorm": [((17, 31), {}), ((1, 97), {}), ((8, 64), {})],
    "gelu": [((17, 31), {}), ((97,), {}), ((2, 3, 17), {})],
    "reduce": [(((17, 31), 1), {"kind": "sum"}), (((8, 17, 5), (0, 2)), {"kind": "max", "keepdims": True}),
               (((97,), 0), {"kind": "min"}), (((4, 32, 16), (1, 2)), {"kind": "sum"})],
    "transpose": [(((17, 31), (1, 0)), {}), (((4, 17, 5), (2, 0, 1)), {}), (((8, 16, 32), (0, 2, 1)), {})],
}


def library_workloads() -> list[Workload]:
    """One workload per (op, shape) of LIBRARY_SHAPES; every registered op must have a row."""
    ops = [n for n in registered_workloads() if not n.startswith(("docs_", "test_"))]
    missing = [n for n in ops if n not in LIBRARY_SHAPES]
    if missing:
        raise SystemExit(f"fuzz_workloads: registered ops without fuzz shapes: {missing} (add them to LIBRARY_SHAPES)")
    return [Workload.create(name, *args, **kwargs) for name in ops for args, kwargs in LIBRARY_SHAPES[name]]


# ---- custom DAGs written with asc.te ---------------------------------------------------------
def ewise_bcast(m: int, n: int) -> list[te.Tensor]:
    """An element-wise chain with broadcasting: a row vector, a column vector, then two more stages."""
    A = te.placeholder((m, n), "A")
    b = te.placeholder((n,), "b")
    c = te.placeholder((m, 1), "c")
    t1 = te.compute((m, n), lambda i, j: A[i, j] * b[j] + c[i, 0], "t1")
    t2 = te.compute((m, n), lambda i, j: te.tanh(t1[i, j]) * 2.0, "t2")
    out = te.compute((m, n), lambda i, j: t2[i, j] + A[i, j] * c[i, 0], "out")
    return [A, b, c, out]


def prod_rows(m: int, n: int) -> list[te.Tensor]:
    """A reduction whose init is not zero (a product, identity 1) and one with a `where` filter."""
    prod = te.comm_reducer(lambda x, y: x * y, 1.0, "prod")
    A = te.placeholder((m, n), "A")
    k = te.reduce_axis(n, "k")
    p = te.compute((m,), lambda i: prod(1.0 + A[i, k] * 0.25, axis=k), "p")
    k2 = te.reduce_axis(n, "k2")
    s = te.compute((m,), lambda i: te.sum(A[i, k2], axis=k2, where=te.ne(k2 % 3, 1)), "s")
    out = te.compute((m,), lambda i: p[i] + s[i], "out")
    return [A, out]


def stencil(m: int, n: int) -> list[te.Tensor]:
    """A padded 3x3 stencil: the padding is an if_then_else stage, the stencil a reduction."""
    A = te.placeholder((m, n), "A")
    w = te.placeholder((3, 3), "w")
    P = te.compute((m + 2, n + 2), lambda i, j: te.if_then_else(
        te.all(i >= 1, i < m + 1, j >= 1, j < n + 1), A[i - 1, j - 1], 0.0), "P")
    di, dj = te.reduce_axis(3, "di"), te.reduce_axis(3, "dj")
    out = te.compute((m, n), lambda i, j: te.sum(P[i + di, j + dj] * w[di, dj], axis=[di, dj]), "out")
    return [A, w, out]


def transpose_matmul(m: int, n: int, k: int) -> list[te.Tensor]:
    """C = A @ B with B first transposed by its own stage (B is [K, N], BT is [N, K])."""
    A = te.placeholder((m, k), "A")
    B = te.placeholder((k, n), "B")
    BT = te.compute((n, k), lambda j, r: B[r, j], "BT")
    r = te.reduce_axis(k, "r")
    C = te.compute((m, n), lambda i, j: te.sum(A[i, r] * BT[j, r], axis=r), "C")
    return [A, B, C]


def logsumexp(m: int, n: int) -> list[te.Tensor]:
    """A softmax-like two-pass op: the row max, then log(sum(exp(x - max))) + max."""
    X = te.placeholder((m, n), "X")
    k = te.reduce_axis(n, "k")
    mx = te.compute((m,), lambda i: te.max(X[i, k], axis=k), "mx")
    k2 = te.reduce_axis(n, "k2")
    s = te.compute((m,), lambda i: te.sum(te.exp(X[i, k2] - mx[i]), axis=k2), "s")
    out = te.compute((m,), lambda i: te.log(s[i]) + mx[i], "out")
    return [X, out]


CUSTOM: dict[str, tuple[Callable[..., list[te.Tensor]], list[tuple[int, ...]]]] = {
    "fuzz_ewise_bcast": (ewise_bcast, [(17, 31), (1, 97), (8, 64)]),
    "fuzz_prod_rows": (prod_rows, [(17, 31), (1, 97), (5, 64)]),
    "fuzz_stencil": (stencil, [(17, 13), (1, 31), (16, 16)]),
    "fuzz_transpose_matmul": (transpose_matmul, [(17, 31, 13), (1, 16, 97), (32, 32, 8)]),
    "fuzz_logsumexp": (logsumexp, [(17, 31), (1, 97), (8, 64)]),
}


def custom_workloads() -> list[tuple[str, Workload]]:
    """(label, workload) of each custom DAG at each of its shapes."""
    out = []
    for name, (fn, shapes) in CUSTOM.items():
        for shape in shapes:
            out.append((f"{name}{shape}", Workload.from_tensors(fn(*shape), name=name)))
    return out


def all_workloads() -> list[tuple[str, Workload]]:
    """(label, workload) of every fuzzed workload: the library's first, then the custom DAGs."""
    lib = [(label(w), w) for w in library_workloads()]
    return lib + custom_workloads()


def label(w: Workload) -> str:
    kw = "".join(f", {k}={v!r}" for k, v in w.kwargs)
    return f"{w.name}({', '.join(map(repr, w.args))}{kw})"
