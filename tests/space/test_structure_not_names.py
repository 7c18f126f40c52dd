"""Issue 29: spaces, seeds and rules depend on the DAG's structure and the host's facts only.

Every registered op is written again by hand with `te` (tests/support/renamed_ops.py), with the op,
its tensors and its loops renamed and the placeholders declared (and listed as build arguments) in
another order. The search space must be the same knobs up to the renaming (count, order, kinds,
choices; names mapped), the rule-derived seeds the same configs, and the schedules of those configs
(and of a few others) the same code once identifiers are matched one to one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autosched import te
from autosched.codegen.render import render
from autosched.compile.types import ErrorCode, MeasureInput
from autosched.cost_model.features import extract_features
from autosched.lowering.targets import lower
from autosched.measure.types import MeasureResult
from autosched.schedule.state import ScheduleError
from autosched.space.gpu_sketch import adds, rowwise_seeds
from autosched.space.registry import make_space
from autosched.target.key import Target
from autosched.te.dag import ComputeDAG, structure_key
from autosched.tuning.api import RecordToDB, open_db, register
from autosched.tuning.candidates import CandidateCache
from autosched.tuning.transfer import transfer_seeds
from autosched.workload import Workload
from tests.support import renamed_ops as hand

CPU = Target.parse("cpu")
CASES = {
    # id: (registered op, its args, hand builder, builder args)
    "matmul-prime": ("matmul", (97, 31, 17), hand.matmul, (97, 31, 17)),
    "matmul-even": ("matmul", (64, 96, 128), hand.matmul, (64, 96, 128)),
    "batch_matmul-prime": ("batch_matmul", (3, 97, 31, 17), hand.batch_matmul, (3, 97, 31, 17)),
    "batch_matmul-even": ("batch_matmul", (2, 32, 64, 48), hand.batch_matmul, (2, 32, 64, 48)),
    "dense_bias_relu-prime": ("dense_bias_relu", (97, 31, 17), hand.dense_bias_relu, (97, 31, 17)),
    "dense_bias_relu-even": ("dense_bias_relu", (64, 128, 64), hand.dense_bias_relu, (64, 128, 64)),
    "conv2d-prime": ("conv2d_nchw", (1, 5, 17, 19, 13, 3, 3, 2, 1), hand.conv2d_nchw, (1, 5, 17, 19, 13, 3, 3, 2, 1)),
    "conv2d-even": ("conv2d_nchw", (1, 16, 14, 14, 32, 3, 3, 1, 1), hand.conv2d_nchw, (1, 16, 14, 14, 32, 3, 3, 1, 1)),
    "depthwise-prime": ("depthwise_conv2d_nchw", (1, 7, 17, 19, 3, 3, 1, 1), hand.depthwise_conv2d_nchw,
                        (1, 7, 17, 19, 3, 3, 1, 1)),
    "depthwise-even": ("depthwise_conv2d_nchw", (2, 32, 16, 16, 3, 3, 1, 1), hand.depthwise_conv2d_nchw,
                       (2, 32, 16, 16, 3, 3, 1, 1)),
    "softmax-prime": ("softmax", (97, 31), hand.softmax, (97, 31)),
    "softmax-even": ("softmax", (64, 256), hand.softmax, (64, 256)),
    "layernorm-prime": ("layernorm", (97, 31), hand.layernorm, (97, 31, 1e-5)),
    "layernorm-even": ("layernorm", (64, 256), hand.layernorm, (64, 256, 1e-5)),
    "maxpool-prime": ("pool2d", (1, 3, 17, 19, 3, 2, 1, "max"), hand.pool2d, (1, 3, 17, 19, 3, 2, 1, "max")),
    "avgpool-even": ("pool2d", (2, 16, 32, 32, 2, 2, 0, "avg"), hand.pool2d, (2, 16, 32, 32, 2, 2, 0, "avg")),
    "reduce-prime": ("reduce", ((17, 31, 97), 1), hand.reduce_middle, (17, 31, 97)),
    "reduce-even": ("reduce", ((8, 64, 32), 1), hand.reduce_middle, (8, 64, 32)),
    "gelu-prime": ("gelu", (97, 31), hand.gelu, (97, 31)),
    "transpose-prime": ("transpose", ((17, 31, 97), (2, 0, 1)), hand.transpose_201, (17, 31, 97)),
}

RENAME = {
    # tensors (chosen to sort unlike the originals, so nothing can lean on alphabetical order)
    "A": "w_lhs", "B": "a_rhs", "C": "m_acc", "X": "zsrc_v", "W": "awt", "bias": "shift_b", "dense": "prod_t",
    "out": "res_z", "data": "img_u", "kernel": "aa_filt", "pad": "zpadded", "conv": "feat_h", "pool": "down_s",
    "pool_sum": "down_acc", "maxelem": "row_hi", "expv": "shifted_e", "expsum": "row_tot", "rsum": "row_inv",
    "norm": "probs", "mean": "mu_r", "var": "sig_r", "gamma": "zscale", "beta": "offs_b",
    # loops
    "i": "q", "j": "p", "k": "zz", "b": "bt", "n": "nb", "c": "ch", "h": "hh", "w": "ww", "f": "oc", "y": "yy",
    "x": "xx", "rc": "zc", "ry": "zy", "rx": "zx", "i0": "d2", "i1": "d1", "i2": "d0", "r1": "z1",
}
WORDS = ("tile", "pack", "unroll", "outer_order", "lanes", "vector", "stream", "location", "rfactor", "rows", "split",
         "block", "parallel")
"""The fixed words of the cpu sketch's knob names (`stage.word[.axis or input]`)."""


def _names_of(w: Workload) -> list[str]:
    """Every tensor and loop name of the registered op's DAG."""
    out: list[str] = []
    for t in w.dag.tensors:
        out.append(t.name)
        for ax in (*getattr(t.op, "axis", ()), *getattr(t.op, "reduce_axis", ())):
            out.append(ax.name)
    return list(dict.fromkeys(out))


def _pair(case: str, names: Mapping[str, str] | None, flip: bool) -> tuple[Workload, Workload, dict[str, str]]:
    op, args, build, bargs = CASES[case]
    w = Workload.create(op, *args)
    used = _names_of(w)
    assert not set(used) & set(WORDS)
    mapping = {nm: (names or RENAME)[nm] for nm in used}
    assert len(set(mapping.values())) == len(mapping), "a renaming gives distinct names"
    wn = Workload.from_tensors(build(*bargs, mapping, flip), name=f"{op}_by_hand")
    return w, wn, mapping


def _rename_knob(name: str, mapping: Mapping[str, str]) -> str:
    return ".".join(mapping.get(tok, tok) for tok in name.split("."))


_TOKEN = re.compile(r'"[^"\n]*"|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*|\d+\.?\d*(?:[eE][-+]?\d+)?[fFlL]*|\S')
"""String literals (`extern "C"`) and dotted names (`threadIdx.x`, `tl.arange`) are single tokens."""
_IDENT = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


def same_modulo_identifiers(a: str, b: str, entry: str = "default_function") -> str | None:
    """None when `b` is `a` with the kernel's identifiers renamed one to one (a bijection), else where
    they part. What precedes the kernel (fixed helpers, with their own local names) must be equal."""
    ka, kb = a.rfind("\n", 0, a.find(entry + "(")) + 1, b.rfind("\n", 0, b.find(entry + "(")) + 1
    if a[:ka] != b[:kb]:
        return "the code before the kernel differs"
    ta, tb = _TOKEN.findall(a[ka:]), _TOKEN.findall(b[kb:])
    fwd: dict[str, str] = {}
    bwd: dict[str, str] = {}
    for k, (x, y) in enumerate(zip(ta, tb)):
        if _IDENT.fullmatch(x) and _IDENT.fullmatch(y):
            if fwd.setdefault(x, y) == y and bwd.setdefault(y, x) == x:
                continue
        elif x == y:
            continue
        return f"token {k}: {' '.join(ta[max(0, k - 12):k + 4])!r} vs {' '.join(tb[max(0, k - 12):k + 4])!r}"
    return None if len(ta) == len(tb) else f"{len(ta)} tokens vs {len(tb)}"


def _configs(space, extra: int, seed: int = 0) -> list[tuple[int, ...]]:
    cs = space.space
    out = [cs.index_of(v) for v in space.seeds] + [tuple([0] * len(cs.knobs))]
    rng = np.random.default_rng(seed)
    out += [cs.sample(rng) for _ in range(extra)]
    return list(dict.fromkeys(out))


def _code(space, config, target: str) -> tuple[str, str | None]:
    """('ok', source) of a config's schedule rendered with the arguments in the DAG's own (structural)
    order, not the author's (the kernel's interface, which is theirs to choose), or ('error', exception
    type) when the config does not apply."""
    dag = space.dag
    args = dag.placeholders + [t for t in dag.tensors if any(t is o for o in dag.outputs)]
    try:
        s = space.apply(config)
        src, _ = render(s, args, target)
    except (ScheduleError, ValueError, KeyError) as exc:
        return "error", type(exc).__name__
    return "ok", src.code


def check_same_space(w: Workload, wn: Workload, mapping: Mapping[str, str] | None, kind: str, extra: int = 4) -> None:
    """`wn`'s space on `kind` is `w`'s: knob names mapped by `mapping` (None: not compared), the same
    choices and kinds, the same seeds, the same code for the seeds and a few other configs."""
    a, b = make_space(w, kind), make_space(wn, kind)
    assert len(a.space.knobs) == len(b.space.knobs)
    if mapping is not None:
        rename = (lambda s: _rename_knob(s, mapping)) if kind == "cpu" else (lambda s: s)
        assert [rename(k.name) for k in a.space.knobs] == [k.name for k in b.space.knobs]
    for ka, kb in zip(a.space.knobs, b.space.knobs):
        assert (ka.choices, ka.kind, ka.ordered) == (kb.choices, kb.kind, kb.ordered), ka.name
    seeds_a = [a.space.index_of(v) for v in a.seeds]
    seeds_b = [b.space.index_of(v) for v in b.seeds]
    assert seeds_a == seeds_b
    rendered = 0
    for config in _configs(a, extra):
        assert a.space.valid(config) == b.space.valid(config), config
        (sa, ca), (sb, cb) = _code(a, config, kind), _code(b, config, kind)
        assert sa == sb and (sa == "ok" or ca == cb), (config, ca, cb)
        rendered += sa == "ok"
        if sa == "ok":
            where = same_modulo_identifiers(ca, cb)
            assert where is None, f"config {config}: {where}"
        if sa == "ok" and kind == "cpu":
            fa = extract_features(lower(a.apply(config), w.tensors()))
            fb = extract_features(lower(b.apply(config), wn.tensors()))
            np.testing.assert_array_equal(fa, fb)
    assert rendered, "no config of the space rendered: nothing was compared"


# ---- the hand copies are the op library's computations ------------------------------------------
@pytest.mark.parametrize("case", sorted(CASES))
def test_hand_copy_with_the_op_librarys_names_is_the_registered_dag(case) -> None:
    op, args, build, bargs = CASES[case]
    w = Workload.create(op, *args)
    same = {nm: nm for nm in _names_of(w)}
    assert Workload.from_tensors(build(*bargs, same, False)).dag.to_json() == w.dag.to_json()


# ---- cpu: knobs, seeds and code ------------------------------------------------------------------
@pytest.mark.parametrize("case", sorted(CASES))
def test_cpu_space_seeds_and_code_follow_structure_not_names(case) -> None:
    w, wn, mapping = _pair(case, None, flip=True)
    assert wn.args_order != w.args_order or len(w.dag.placeholders) == 1
    check_same_space(w, wn, mapping, "cpu")


def test_the_dividing_shapes_exercise_the_seed_rules() -> None:
    """Not vacuous: the GEMM seeds (packed panel) and the channel seeds (conv) are among those compared."""
    for case in ("matmul-even", "batch_matmul-even", "dense_bias_relu-even", "conv2d-even"):
        op, args, *_ = CASES[case]
        assert make_space(Workload.create(op, *args), "cpu").seeds, case


# ---- gpu spaces are built without a device ----------------------------------------------------------
@pytest.mark.parametrize("kind", ["cuda", "triton"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_gpu_space_seeds_and_code_follow_structure_not_names(case, kind) -> None:
    w, wn, mapping = _pair(case, None, flip=True)
    check_same_space(w, wn, mapping, kind, extra=2)


# ---- random renamings ------------------------------------------------------------------------------
_ident = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,11}", fullmatch=True)


def _renamings(case: str):
    op, args, *_ = CASES[case]
    used = _names_of(Workload.create(op, *args))
    return st.lists(_ident, min_size=len(used), max_size=len(used), unique=True).map(
        lambda fresh: dict(zip(used, fresh)))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(names=_renamings("dense_bias_relu-even"), flip=st.booleans())
def test_random_renamings_of_dense_bias_relu(names, flip) -> None:
    w, wn, mapping = _pair("dense_bias_relu-even", names, flip)
    check_same_space(w, wn, mapping, "cpu", extra=1)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(names=_renamings("layernorm-prime"), flip=st.booleans())
def test_random_renamings_of_layernorm(names, flip) -> None:
    w, wn, mapping = _pair("layernorm-prime", names, flip)
    check_same_space(w, wn, mapping, "cpu", extra=2)


# ---- what the comparison found, fixed ----------------------------------------------------------------
@pytest.mark.parametrize("case", ["matmul-even", "dense_bias_relu-prime", "conv2d-even", "layernorm-prime"])
def test_renamed_and_reordered_dags_have_one_canonical_form(case) -> None:
    w, wn, _ = _pair(case, None, flip=True)
    assert wn.dag.to_json() != w.dag.to_json()
    assert wn.dag.canonical().to_json() == w.dag.canonical().to_json()
    assert structure_key(wn.dag.outputs[0]) == structure_key(w.dag.outputs[0])


def _two_outputs(names: Mapping[str, str], first: str) -> list:
    """A DAG with two outputs (a row sum and an element-wise map of one input), listed `first` first."""
    X = te.placeholder((64, 48), names["X"])
    k = te.reduce_axis(48, names["k"])
    rows = te.compute((64,), lambda i: te.sum(X[i, k], axis=k), names["rowsum"], axis_names=[names["i"]])
    twice = te.compute((64, 48), lambda i, j: X[i, j] * 2.0, names["twice"], axis_names=[names["i"], names["j"]])
    return [X, rows, twice] if first == "rows" else [X, twice, rows]


def test_the_outputs_of_a_dag_are_walked_in_the_order_of_their_structure_not_their_listing() -> None:
    """Found: with several outputs, the stages (so the knobs and the code) followed the order the author
    listed the outputs in. Now `ComputeDAG` walks them in the order of their `structure_key`."""
    names = {"X": "X", "k": "k", "rowsum": "rowsum", "twice": "twice", "i": "i", "j": "j"}
    other = {"X": "inp", "k": "red", "rowsum": "zsum", "twice": "adouble", "i": "r", "j": "c"}
    w = Workload.from_tensors(_two_outputs(names, "rows"))
    for first in ("rows", "twice"):
        wn = Workload.from_tensors(_two_outputs(other, first))
        assert [t.op.body.dtype for t in wn.dag.computes] == [t.op.body.dtype for t in w.dag.computes]
        check_same_space(w, wn, {names[n]: other[n] for n in names}, "cpu")


def test_an_epilogue_loop_named_like_the_products_reduction_loop_still_has_a_space() -> None:
    """Found: the cpu sketch names the tiles of an output's loops and of its fused product's reduction
    loops `<stage>.tile.<loop>`, so an epilogue whose loop shares the reduction loop's name made two knobs
    of one name and the space failed to build. The second is now `~2`-suffixed: the same space."""
    X = te.placeholder((64, 32), "X")
    W = te.placeholder((48, 32), "W")
    bias = te.placeholder((48,), "bias")
    k = te.reduce_axis(32, "k")
    D = te.compute((64, 48), lambda i, j: te.sum(X[i, k] * W[j, k], axis=k), "dense")
    out = te.compute((64, 48), lambda k, j: te.maximum(D[k, j] + bias[j], 0), "out")  # `k` again
    wn = Workload.from_tensors([X, W, bias, out])
    assert len(set(make_space(wn, "cpu").space.names)) == len(make_space(wn, "cpu").space.names)
    check_same_space(Workload.create("dense_bias_relu", 64, 48, 32), wn, None, "cpu")


def test_a_reducer_is_a_sum_by_what_it_does_not_by_its_name() -> None:
    """Found: the triton rowwise seeds counted reductions whose reducer is *named* "sum"."""
    times = te.comm_reducer(lambda x, y: x * y, 1.0, "sum")
    plus = te.comm_reducer(lambda x, y: x + y, 0.0, "acc")
    assert adds(te.sum) and adds(plus) and not adds(times) and not adds(te.max)

    def rowwise(red) -> ComputeDAG:
        X = te.placeholder((8, 2048), "X")
        k, k2 = te.reduce_axis(2048, "k"), te.reduce_axis(2048, "k2")
        a = te.compute((8,), lambda i: red(X[i, k], axis=k), "a")
        b = te.compute((8,), lambda i: red(X[i, k2] * X[i, k2], axis=k2), "b")
        return ComputeDAG(te.compute((8, 2048), lambda i, j: X[i, j] * a[i] + b[i], "out"))

    welford = [[v for v in rowwise_seeds(rowwise(r)) if v["welford"]] for r in (te.sum, plus, times)]
    assert welford[0] and welford[1] == welford[0] and not welford[2]


def _store(db, w: Workload, configs_and_costs) -> None:
    space = make_space(w, "cpu")
    register(db, w, CPU)
    cc = CandidateCache(w, space)
    ins = [MeasureInput(w.key, w.to_json(), CPU.key, cc.get(c).steps_json) for c, _ in configs_and_costs]
    RecordToDB(db)(ins, [MeasureResult((cost,), ErrorCode.NO_ERROR) for _, cost in configs_and_costs])


def test_transfer_seeds_move_between_workloads_whatever_their_names(tmp_path) -> None:
    """Found: transfer matched two workloads' knobs by name, so the same operator written with other
    names shared no schedule. It now matches them by `structural_names` (the canonical DAG's knobs)."""
    stored = {"registered": Workload.create("matmul", 128, 128, 128),
              "by_hand": Workload.from_tensors(hand.matmul(128, 128, 128, RENAME, True), "mm")}
    space = make_space(stored["registered"], "cpu")
    rng = np.random.default_rng(0)
    configs = list(dict.fromkeys(space.space.sample_valid(rng) for _ in range(8)))[:4]
    seeds = {}
    for which, w in stored.items():
        db = open_db(f"sqlite:///{tmp_path}/{which}.db")
        _store(db, w, list(zip(configs, [4e-3, 1e-3, 3e-3, 2e-3])))
        for target in (Workload.create("matmul", 64, 64, 64),
                       Workload.from_tensors(hand.matmul(64, 64, 64, RENAME, True), "small_mm")):
            seeds[which, target.custom] = transfer_seeds(db, target, CPU, make_space(target, "cpu"))
    assert seeds["registered", False], "a stored matmul seeds a smaller one"
    assert len(set(map(tuple, seeds.values()))) == 1, seeds
