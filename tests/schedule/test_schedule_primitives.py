"""Every primitive: a functional test (the built kernel equals the numpy reference) and a JSON round
trip (each step through `to_dict`/`step_from_dict`, and the schedule through `to_json`/`from_json`
lowering to the identical loop nest and C source)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import autosched as asc
from autosched import te
from autosched.schedule import step_from_dict
from tests.support.sched_helpers import check, op, replay_python, roundtrip


def _matmul(M=13, N=17, K=7):
    A, B, C = op("matmul", M, N, K)
    return asc.create_schedule(C), [A, B, C], C


def split_factor():
    s, args, C = _matmul()
    i, j = C.op.axis
    s[C].split(i, factor=4)  # 13 = 3*4 + 1: a guarded tail
    s[C].split(j, factor=32)  # larger than the extent
    s[C].split("k", factor=7)  # exact
    return s, args, "i.inner"


def split_nparts():
    s, args, C = _matmul()
    s[C].split(C.op.axis[1], nparts=3)
    s[C].split("k", nparts=2)
    return s, args, "j.outer"


def fuse():
    A, B, C = op("batch_matmul", 2, 5, 3, 4)
    s = asc.create_schedule(C)
    b, i, j = C.op.axis
    f = s[C].fuse(b, i, j)
    s[C].split(f, factor=8)
    return s, [A, B, C], "b.i.fused.j.fused.outer"


def reorder():
    s, args, C = _matmul()
    i, j = C.op.axis
    (k,) = C.op.reduce_axis
    s[C].reorder(k, j, i)  # the reduction outermost: the init moves out of every loop
    return s, args, "for k in range"


def tile():
    s, args, C = _matmul(17, 13, 5)
    i, j = C.op.axis
    s[C].tile(i, j, 4, 8)
    return s, args, "i.outer"


def parallel():
    s, args, C = _matmul()
    s[C].parallel(C.op.axis[0])
    return s, args, "# parallel"


def vectorize():
    X, Y = op("gelu", 5, 32)
    s = asc.create_schedule(Y)
    s[Y].vectorize(Y.op.axis[1])
    return s, [X, Y], "# vectorized"


def unroll():
    s, args, C = _matmul()
    jo, ji = s[C].split(C.op.axis[1], factor=4)
    s[C].reorder(C.op.axis[0], jo, "k", ji)
    s[C].unroll(ji)
    return s, args, "# unrolled"


def pragma():
    s, args, C = _matmul(8, 8, 8)
    i, j = C.op.axis
    io, ii = s[C].split(i, factor=2)
    s[C].pragma(io, "auto_unroll_max_step", 16)
    return s, args, "for k in range(8):  # unrolled x8"


def cache_read():
    s, args, C = _matmul(16, 16, 9)
    A, B = args[0], args[1]
    BB = s.cache_read(B, "global", [C])
    AA = s.cache_read(A, "local", [C])
    i, j = C.op.axis
    io, ii = s[C].split(i, factor=4)
    s[BB].compute_at(s[C], io)
    s[AA].compute_at(s[C], ii)
    return s, args, "A_local"


def cache_read_transposed():
    """B copied as [N, K] (a packed panel in another layout); C's reads follow the swap."""
    s, args, C = _matmul(16, 12, 9)
    BT = s.cache_read(args[1], "global", [C], layout="transposed")
    assert BT.shape == (12, 9)
    io, ii = s[C].split(C.op.axis[0], factor=4)
    s[BT].compute_at(s[C], io)
    return s, args, "B_global"


def cache_read_outer_last():
    """A [K, C, R] kernel copied as [C, R, K] (output channels innermost); the reader's indices follow
    the rotation."""
    X = te.placeholder((5, 12), name="X", dtype="float32")
    W = te.placeholder((8, 5, 3), name="W", dtype="float32")
    c, r = te.reduce_axis(5, "c"), te.reduce_axis(3, "r")
    out = te.compute((8, 10), lambda f, x: te.sum(X[c, x + r] * W[f, c, r], axis=[c, r]), name="out")
    s = asc.create_schedule(out)
    WP = s.cache_read(W, "global", [out], layout="outer_last")
    assert WP.shape == (5, 3, 8)
    fo, fi = s[out].split(out.op.axis[0], factor=4)
    s[WP].compute_at(s[out], fo)
    return s, [X, W, out], "W_global"


def cache_write():
    s, args, C = _matmul(16, 17, 9)
    CL = s.cache_write(C, "local")
    i, j = s[C].op.axis
    jo, ji = s[C].split(j, factor=8)
    s[C].reorder(jo, i, ji)
    s[CL].compute_at(s[C], i)
    return s, args, "C_local"


def compute_at():
    X, out = op("softmax", 7, 13)
    s = asc.create_schedule(out)
    i, j = s[out].op.axis
    s[out].parallel(i)
    for name in ("maxelem", "expv", "expsum", "rsum"):
        s[name].compute_at(s[out], i)
    return s, [X, out], "allocate maxelem[1]"


def compute_inline():
    data, kernel, conv = op("conv2d_nchw", 1, 2, 7, 6, 3, 3, 3, padding=1)
    s = asc.create_schedule(conv)
    s["pad"].compute_inline()
    return s, [data, kernel, conv], "select("


def compute_root():
    X, out = op("softmax", 4, 9)
    s = asc.create_schedule(out)
    s["expv"].compute_at(s[out], s[out].op.axis[0])
    s["expv"].compute_root()
    return s, [X, out], "allocate expv[4, 9] float32 (global)"


def rfactor():
    s, args, C = _matmul(5, 7, 24)
    ko, ki = s[C].split("k", factor=4)
    CF = s.rfactor(C, ki, factor_axis=1)
    s[CF].parallel(s[CF].op.axis[0])
    return s, args, "C_rf"


def rfactor_full_reduce():
    X, out = op("reduce", (6, 17), (0, 1), kind="max")
    s = asc.create_schedule(out)
    fused = s[out].fuse("r0", "r1")
    fo, fi = s[out].split(fused, nparts=4)
    s.rfactor(out, fo)
    s["out.rf"].parallel(s["out.rf"].op.axis[0])
    return s, [X, out], "out_rf"


CASES: dict[str, Callable] = {f.__name__: f for f in (
    split_factor, split_nparts, fuse, reorder, tile, parallel, vectorize, unroll, pragma, cache_read,
    cache_read_transposed, cache_read_outer_last, cache_write,
    compute_at, compute_inline, compute_root, rfactor, rfactor_full_reduce)}


@pytest.mark.parametrize("name", sorted(CASES))
def test_primitive_functional(name: str) -> None:
    s, args, marker = CASES[name]()
    assert marker in asc.lower(s, args).show()
    check(s, args)


@pytest.mark.parametrize("name", sorted(CASES))
def test_primitive_json_roundtrip(name: str) -> None:
    s, args, _ = CASES[name]()
    for step in s.steps:
        d = step.to_dict()
        assert step_from_dict(d) == step
        assert step_from_dict(__import__("json").loads(__import__("json").dumps(d))) == step
    s2 = roundtrip(s, args)
    assert s2.steps == s.steps
    assert s2.as_python() == s.as_python()
    assert replay_python(s).steps == s.steps


def test_bind_refused_on_cpu_with_clear_error() -> None:
    s, args, C = _matmul()
    s[C].bind(C.op.axis[0], "blockIdx.x")
    step = s.steps[-1]
    assert step_from_dict(step.to_dict()) == step
    assert replay_python(s).steps == s.steps
    s2 = asc.Schedule.from_json(s.to_json())
    for sch in (s, s2):
        for fn in (asc.lower, asc.build):
            with pytest.raises(asc.ScheduleError, match=r"stage 'C', loop 'i': bind to 'blockIdx.x' is not "
                                                        r"supported on target cpu"):
                fn(sch, [sch.dag[t.name] for t in args])


def test_pragma_limits_unrolling() -> None:
    """auto_unroll_max_step unrolls the inner loops whose expanded body fits the limit, no more."""
    s, args, C = _matmul(8, 8, 8)
    i, j = C.op.axis
    s[C].pragma(i, "auto_unroll_max_step", 8)
    text = asc.lower(s, args).show()
    assert "for k in range(8):  # unrolled x8" in text
    assert "for j in range(8):  # unrolled" not in text  # 8 * (init + 8) > 8
    check(s, args)


def test_primitives_on_a_compute_at_chain() -> None:
    """dense + bias + relu: the product computed at the epilogue's row tile, cached and split."""
    X, W, bias, out = op("dense_bias_relu", 9, 20, 11)
    s = asc.create_schedule(out)
    DL = s.cache_write("dense", "local")
    i, j = s[out].op.axis
    io, ii = s[out].split(i, factor=4)
    jo, ji = s[out].split(j, factor=16)
    s[out].reorder(io, jo, ii, ji)
    s[out].vectorize(ji)
    s["dense"].compute_at(s[out], jo)
    s[DL].compute_at(s["dense"], s["dense"].op.axis[0])
    s[out].parallel(io)
    check(s, [X, W, bias, out])
    roundtrip(s, [X, W, bias, out])


@pytest.mark.parametrize("dtype", ["float64", "float16", "bfloat16", "int32", "int64"])
def test_tiled_matmul_other_dtypes(dtype: str) -> None:
    A, B, C = op("matmul", 9, 20, 6, dtype)
    s = asc.create_schedule(C)
    CL = s.cache_write(C, "local")
    i, j = s[C].op.axis
    io, jo, ii, ji = s[C].tile(i, j, 4, 16)
    s[C].vectorize(ji)
    s[CL].compute_at(s[C], jo)
    check(s, [A, B, C])


def test_steps_record_names_not_positions() -> None:
    s, args, C = _matmul()
    i, j = C.op.axis
    io, ii = s[C].split(i, factor=4)
    s[C].reorder(j, io, ii)
    assert [st.to_dict() for st in s.steps] == [
        {"kind": "split", "v": 1, "stage": "C", "loop": "i", "factor": 4, "nparts": None},
        {"kind": "reorder", "v": 1, "stage": "C", "order": ["j", "i.outer", "i.inner"]},
    ]
    assert s.as_python() == "s['C'].split('i', factor=4)\ns['C'].reorder('j', 'i.outer', 'i.inner')"


def test_elementwise_chain_inline_and_compute_at() -> None:
    X = te.placeholder((7, 13), "X")
    Y = te.compute((7, 13), lambda i, j: X[i, j] * 2.0, "Y")
    Z = te.compute((7, 13), lambda i, j: Y[i, j] + X[i, (j + 1) % 13], "Z")
    W = te.compute((7, 13), lambda i, j: Z[i, j] - Z[(i + 3) % 7, j], "W")
    s = asc.create_schedule(W)
    s[Y].compute_inline()
    wo, wi = s[W].split(W.op.axis[1], factor=4)
    s[Z].compute_at(s[W], wo)
    check(s, [X, W])
    roundtrip(s, [X, W])


def test_rfactor_axis_names_do_not_clash() -> None:
    """The factored loop `k.inner` becomes an axis `k_inner`; a spatial axis already called that keeps
    its name and the new one gets another (loops are looked up by name)."""
    A = te.placeholder((3, 24), "A")
    k = te.reduce_axis(24, "k")
    C = te.compute((3,), lambda k_inner: te.sum(A[k_inner, k], axis=k), "C")
    s = asc.create_schedule(C)
    ko, ki = s[C].split(k, factor=8)
    s.rfactor(C, ki)
    assert [lp.name for lp in s.state.stage("C.rf").leaf_loops] == ["k_inner_2", "k_inner", "k_outer"]
    check(s)
    roundtrip(s)


def test_cache_read_steps_stored_before_layouts_existed_keep_their_json_and_hash() -> None:
    """`layout` is left out of a cache_read's JSON at its default: the records of every schedule that
    does not transpose keep their steps hash, so a resumed run finds them measured."""
    from autosched.schedule.steps import CacheReadStep
    from tuning_db.canonical import steps_hash

    old = {"kind": "cache_read", "v": 1, "tensor": "B", "scope": "global", "readers": ["C"]}
    step = step_from_dict(old)
    assert step == CacheReadStep("B", "global", ("C",)) and step.layout == ""
    assert step.to_dict() == old and steps_hash([step.to_dict()]) == steps_hash([old])
    moved = CacheReadStep("B", "global", ("C",), "transposed").to_dict()
    assert moved["layout"] == "transposed" and step_from_dict(moved).layout == "transposed"
