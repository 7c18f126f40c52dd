"""Helpers shared by the schedule and codegen tests: ops, reference checks and named schedules.

Ops come from the op library (`Workload.create(name, ...).tensors()` gives [inputs..., outputs]);
`check` builds a schedule, runs it on the DAG's random inputs and compares every output with the
numpy reference (`dag.evaluate`) within a tolerance set by the dtype and the reduction length.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

import autosched as asc
from autosched import te
from autosched.dtypes import is_float, np_dtype
from autosched.te.expr import Reduce
from autosched.workload import Workload

# relative error per accumulated term: float16/bfloat16 round at every store
_EPS = {"float64": 1e-13, "float32": 2e-6, "float16": 2e-3, "bfloat16": 1.6e-2}


def op(name: str, *args, **kwargs) -> list[te.Tensor]:
    """Build arguments of a library op: [inputs..., outputs...]."""
    return Workload.create(name, *args, **kwargs).tensors()


def reduction_length(dag: te.ComputeDAG) -> int:
    """Longest chain of accumulated terms any output element depends on (for the tolerance)."""
    n = 1
    for t in dag.computes:
        if isinstance(t.op.body, Reduce):
            n = max(n, int(np.prod([a.extent for a in t.op.reduce_axis])))
    return n


def tolerance(dtype: str, red_len: int) -> tuple[float, float]:
    """(rtol, atol) for an output of `dtype` whose elements sum about `red_len` terms of size ~1."""
    if not is_float(dtype):
        return 0.0, 0.0
    eps = _EPS[dtype]
    tol = eps * 8 * max(1.0, float(red_len)) ** 0.75
    return tol, tol


def output_array(t: te.Tensor) -> np.ndarray:
    """An output buffer filled with garbage, so an element the kernel never writes is caught."""
    dt = np_dtype(t.dtype)
    if is_float(t.dtype):
        return np.full(t.shape, np.nan, dtype=dt)
    return np.full(t.shape, np.iinfo(dt).min + 3, dtype=dt)


def run_kernel(f: asc.BuiltKernel, args: Sequence[te.Tensor], dag: te.ComputeDAG,
               seed: int = 0) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Run `f` on the DAG's random inputs: (got, want) for every output argument, by name."""
    inputs = dag.random_inputs(seed)
    arrays, outs = [], {}
    for t in args:
        if t.name in inputs:
            arrays.append(inputs[t.name])
        else:
            outs[t.name] = output_array(t)
            arrays.append(outs[t.name])
    f(*arrays)
    ref = dag.evaluate(inputs)
    return outs, {n: ref[n] for n in outs}


def assert_matches(got: dict[str, np.ndarray], want: dict[str, np.ndarray], dag: te.ComputeDAG,
                   context: str = "") -> None:
    red = reduction_length(dag)
    for name, g in got.items():
        w = want[name]
        rtol, atol = tolerance(str(g.dtype) if g.dtype != np_dtype("bfloat16") else "bfloat16", red)
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol,
                                   err_msg=f"output {name!r} differs from the reference {context}")


def check(s: asc.Schedule, args: Sequence[te.Tensor] | None = None, seed: int = 0) -> asc.BuiltKernel:
    """Build `s`, run it and compare every output with the numpy reference; returns the kernel."""
    args = list(args) if args is not None else list(s.dag.placeholders) + list(s.dag.outputs)
    f = asc.build(s, args)
    got, want = run_kernel(f, args, s.dag, seed)
    assert_matches(got, want, s.dag, context=f"\n{asc.lower(s, args).show()}")
    return f


def roundtrip(s: asc.Schedule, args: Sequence[te.Tensor] | None = None) -> asc.Schedule:
    """`Schedule.from_json(s.to_json())` lowers to the identical text and renders the identical C."""
    s2 = asc.Schedule.from_json(s.to_json())
    assert s2.to_json() == s.to_json()
    names = [t.name for t in (args if args is not None else list(s.dag.placeholders) + list(s.dag.outputs))]
    args2 = [s2.dag[n] for n in names]
    args1 = [s.dag[n] for n in names]
    assert asc.lower(s2, args2).show() == asc.lower(s, args1).show()
    assert asc.render(s2, args2)[0].code == asc.render(s, args1)[0].code
    return s2


def replay_python(s: asc.Schedule) -> asc.Schedule:
    """Run `s.as_python()` against a fresh schedule of the same DAG (the text is meant to be pasted)."""
    fresh = asc.create_schedule(asc.Schedule.from_json(s.to_json()).dag)
    exec(s.as_python(), {"s": fresh})  # noqa: S102 - our own generated text
    return fresh


# ---- named schedules (golden files, vectorization checks) -----------------------------------------


def matmul_naive(M: int = 64, N: int = 64, K: int = 64) -> tuple[asc.Schedule, list[te.Tensor]]:
    A, B, C = op("matmul", M, N, K)
    return asc.create_schedule(C), [A, B, C]


def matmul_tiled(M: int = 64, N: int = 64, K: int = 64) -> tuple[asc.Schedule, list[te.Tensor]]:
    """Tiled 16x32, outer tile loop parallel, k split, inner column loop vectorized."""
    A, B, C = op("matmul", M, N, K)
    s = asc.create_schedule(C)
    i, j = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    io, jo, ii, ji = s[C].tile(i, j, 16, 32)
    ko, ki = s[C].split(k, factor=4)
    s[C].reorder(io, jo, ko, ii, ki, ji)
    s[C].parallel(io)
    s[C].vectorize(ji)
    return s, [A, B, C]


def matmul_packed(M: int = 64, N: int = 64, K: int = 64, mr: int = 8, nr: int = 32,
                  pack: bool = True) -> tuple[asc.Schedule, list[te.Tensor]]:
    """Register tile (mr x nr) in a local cache, B packed per column block (unless not `pack`),
    explicit vector code."""
    A, B, C = op("matmul", M, N, K)
    s = asc.create_schedule(C)
    CL = s.cache_write(C, "local")
    BP = s.cache_read(B, "global", [CL]) if pack else None
    i, j = s[C].op.axis
    jo, ji = s[C].split(j, factor=nr)
    io, ii = s[C].split(i, factor=mr)
    s[C].reorder(jo, io, ii, ji)
    s[C].parallel(jo)
    s[C].vectorize(ji)
    s[C].unroll(ii)
    s[CL].compute_at(s[C], io)
    ci, cj, ck = s[CL].op.axis[0], s[CL].op.axis[1], s[CL].op.reduce_axis[0]
    s[CL].reorder(ck, ci, cj)
    s[CL].unroll(ci)
    s[CL].vectorize(cj)
    if BP is not None:
        s[BP].compute_at(s[C], jo)
    return s, [A, B, C]


def softmax_fused(M: int = 8, N: int = 48) -> tuple[asc.Schedule, list[te.Tensor]]:
    """Row reductions computed at the row loop of the output, exp and the reciprocal inlined."""
    X, out = op("softmax", M, N)
    s = asc.create_schedule(out)
    i, j = s[out].op.axis
    s[out].parallel(i)
    s["expv"].compute_inline()
    s["rsum"].compute_inline()
    s["maxelem"].compute_at(s[out], i)
    s["expsum"].compute_at(s[out], i)
    return s, [X, out]


def softmax_streaming(M: int = 8, N: int = 48) -> tuple[asc.Schedule, list[te.Tensor]]:
    """Softmax rows: reductions and exp at the row loop, the normalized row streamed out 16 at a time."""
    X, out = op("softmax", M, N)
    s = asc.create_schedule(out)
    i, j = s[out].op.axis
    s[out].parallel(i)
    _, ji = s[out].split(j, factor=16)
    s[out].vectorize(ji)
    s[out].pragma(ji, "nontemporal", 1)
    s["rsum"].compute_inline()
    for name in ("maxelem", "expv", "expsum"):
        s[name].compute_at(s[out], i)
    return s, [X, out]


def conv2d_padded(N: int = 1, C: int = 3, H: int = 10, W: int = 10, K: int = 4,
                  R: int = 3) -> tuple[asc.Schedule, list[te.Tensor]]:
    """A padded conv2d with the pad stage inlined into the window loops."""
    data, kernel, conv = op("conv2d_nchw", N, C, H, W, K, R, R, padding=1)
    s = asc.create_schedule(conv)
    s["pad"].compute_inline()
    n, f, y, x = s[conv].op.axis
    s[conv].parallel(f)
    return s, [data, kernel, conv]


def split_tail(n: int = 17, factor: int = 4) -> tuple[asc.Schedule, list[te.Tensor]]:
    """An elementwise op whose loop is split by a factor that does not divide it (a guarded tail)."""
    X = te.placeholder((n,), "X")
    Y = te.compute((n,), lambda i: X[i] * 2.0 + 1.0, "Y")
    s = asc.create_schedule(Y)
    s[Y].split(Y.op.axis[0], factor=factor)
    return s, [X, Y]


NAMED: dict[str, Callable[[], tuple[asc.Schedule, list[te.Tensor]]]] = {
    "matmul_naive": matmul_naive,
    "matmul_tiled": matmul_tiled,
    "matmul_packed": matmul_packed,
    "softmax_fused": softmax_fused,
    "softmax_streaming": softmax_streaming,
    "conv2d_padded": conv2d_padded,
    "split_tail_17_4": split_tail,
}
