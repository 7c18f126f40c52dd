"""Bad requests get a `ScheduleError` (or a TypeError/ValueError at call time) naming what was wrong:
the step, the stage and the loop. A refused step leaves the schedule exactly as it was."""

from __future__ import annotations

import json

import numpy as np
import pytest

import autosched as asc
from autosched import te
from autosched.dtypes import DTypeError
from autosched.schedule import step_from_dict
from autosched.schedule.steps import SplitStep
from tests.support.sched_helpers import op


@pytest.fixture()
def mm():
    A, B, C = op("matmul", 8, 12, 6)
    return asc.create_schedule(C), A, B, C


def refused(fn, *patterns: str) -> str:
    with pytest.raises(asc.ScheduleError) as ei:
        fn()
    msg = str(ei.value)
    for p in patterns:
        assert p in msg, f"{p!r} not in {msg!r}"
    return msg


# ---- loops and axes --------------------------------------------------------------------------------


def test_unknown_loop_name(mm) -> None:
    s, A, B, C = mm
    refused(lambda: s[C].split("nope", factor=2), "step 0 (split", "stage 'C'", "loop 'nope'",
            "has no loop 'nope'", "['i', 'j', 'k']")


def test_axis_of_another_stage() -> None:
    X, W, bias, out = op("dense_bias_relu", 4, 4, 4)
    s = asc.create_schedule(out)
    dense_i = s["dense"].op.axis[0]
    refused(lambda: s[out].split(dense_i, factor=2), "axis 'i' belongs to stage 'dense', not stage 'out'")
    ref = s["dense"].split(s["dense"].op.axis[1], factor=2)[0]
    refused(lambda: s[out].parallel(ref), "loop 'j.outer' belongs to stage 'dense', not 'out'")


def test_axis_of_another_dag(mm) -> None:
    s, A, B, C = mm
    other = op("matmul", 8, 12, 6)[2]
    refused(lambda: s[C].split(other.op.axis[0], factor=2), "axis 'i' belongs to another DAG")


def test_unknown_stage(mm) -> None:
    s, A, B, C = mm
    refused(lambda: s["D"], "no stage 'D'", "stages: ['A', 'B', 'C']")
    refused(lambda: s.cache_write("D", "local"), "step 0 (cache_write, stage 'D')", "no stage named 'D'")
    refused(lambda: s[A].split("i", factor=2), "'A' is an input placeholder")


def test_stale_loop_is_named_as_split_away(mm) -> None:
    s, A, B, C = mm
    s[C].split("i", factor=4)
    refused(lambda: s[C].parallel("i"), "step 1 (annotate, stage 'C', loop 'i')", "already split or fused",
            "i.outer")


def test_reorder_duplicate_and_cyclic(mm) -> None:
    s, A, B, C = mm
    i, j = C.op.axis
    refused(lambda: s[C].reorder(i, j, i), "step 0 (reorder, stage 'C'", "names a loop twice", "['i', 'j', 'i']")
    refused(lambda: s[C].reorder("j", "nope"), "no loop 'nope'")


@pytest.mark.parametrize("kw", [{"factor": 0}, {"factor": -3}, {"nparts": 0}, {"nparts": -1}])
def test_split_factor_not_positive(mm, kw) -> None:
    s, A, B, C = mm
    what = "factor" if "factor" in kw else "nparts"
    refused(lambda: s[C].split("i", **kw), "step 0 (split, stage 'C', loop 'i')",
            f"split {what} must be a positive integer, got {kw[what]}")


def test_split_factor_wrong_type_or_both(mm) -> None:
    s, A, B, C = mm
    refused(lambda: s[C].split("i", factor=2.5), "step 'split' of stage 'C'", "'factor' must be an integer")
    refused(lambda: s[C].split("i", factor=True), "'factor' must be an integer")
    refused(lambda: s[C].split("i"), "exactly one of factor or nparts")
    refused(lambda: s[C].split("i", factor=2, nparts=2), "exactly one of factor or nparts")
    s[C].split("i", factor=np.int64(4))  # numpy integers are integers
    assert s.steps[-1].to_dict()["factor"] == 4 and type(s.steps[-1].factor) is int


def test_fuse_non_adjacent_or_mixed(mm) -> None:
    s, A, B, C = mm
    refused(lambda: s[C].fuse("i", "k"), "step 0 (fuse, stage 'C', loops ['i', 'k'])", "adjacent", "[0, 2]")
    refused(lambda: s[C].fuse("j", "i"), "outer-to-inner order")
    refused(lambda: s[C].fuse("j", "k"), "cannot fuse a spatial loop with a reduction loop")
    refused(lambda: s[C].fuse("i"), "at least two loops")


@pytest.mark.parametrize("ann", ["parallel", "vectorize"])
def test_parallel_vectorize_reduction_loop(mm, ann) -> None:
    s, A, B, C = mm
    refused(lambda: getattr(s[C], ann)("k"), f"step 0 (annotate, stage 'C', loop 'k'): cannot {ann} "
                                             "reduction loop 'k'", "rfactor")


def test_transform_after_annotation(mm) -> None:
    s, A, B, C = mm
    s[C].vectorize("j")
    s[C].pragma("i", "auto_unroll_max_step", 8)
    refused(lambda: s[C].split("j", factor=4), "loop 'j' is annotated 'vectorize'")
    refused(lambda: s[C].fuse("i", "j"), "loop 'i' is given a pragma")


def test_unknown_annotation_pragma_thread(mm) -> None:
    s, A, B, C = mm
    refused(lambda: s[C].pragma("i", "unroll_explicit", 1), "unknown pragma 'unroll_explicit'")
    refused(lambda: s[C].pragma("i", "auto_unroll_max_step", -1), "non-negative integer")
    refused(lambda: s[C].bind("i", "warpIdx.x"), "unknown thread tag 'warpIdx.x'")
    refused(lambda: s._apply(type(s.steps[0])("C", "i", "spin") if s.steps else
                             __import__("autosched.schedule.steps", fromlist=["x"]).AnnotateStep("C", "i", "spin")),
            "unknown annotation 'spin'")


# ---- compute_at / inline ----------------------------------------------------------------------------


def test_compute_at_loop_that_no_longer_exists() -> None:
    X, out = op("softmax", 4, 8)
    s = asc.create_schedule(out)
    i, j = s[out].op.axis
    s["expv"].compute_at(s[out], i)
    s[out].split(i, factor=2)  # the attach loop is split away afterwards
    refused(lambda: asc.lower(s, [X, out]), "stage 'expv' is computed at loop 'i' of 'norm'",
            "no longer a loop of it", "i.outer")
    refused(lambda: s["maxelem"].compute_at(s[out], "i"), "step 2 (compute_at, stage 'maxelem', loop 'i')",
            "already split or fused")


def test_compute_at_cycle() -> None:
    X, out = op("softmax", 4, 8)
    s = asc.create_schedule(out)
    s["maxelem"].compute_at(s["expv"], "i")
    refused(lambda: s["expv"].compute_at(s["maxelem"], "i"), "step 1 (compute_at, stage 'expv', loop 'i')",
            "cycle", "'maxelem' is computed at 'expv'")
    refused(lambda: s["expv"].compute_at(s["expv"], "i"), "its own loop")


def test_compute_at_of_output_and_into_inlined() -> None:
    X, out = op("softmax", 4, 8)
    s = asc.create_schedule(out)
    refused(lambda: s[out].compute_at(s["expv"], "i"), "'norm' is an output")
    s["expv"].compute_inline()
    refused(lambda: s["maxelem"].compute_at(s["expv"], "i"), "target stage 'expv' is inlined")
    refused(lambda: s["maxelem"].compute_at(X, "i"), "target must be s[T]")


def test_reader_not_inside_compute_at_loop() -> None:
    X, out = op("softmax", 4, 8)
    s = asc.create_schedule(out)
    s["expv"].compute_at(s["expsum"], "i")  # but 'norm' reads expv too, outside expsum's loops
    refused(lambda: asc.build(s, [X, out]), "stage 'expv' is computed at 'expsum' loop 'i'",
            "its reader 'norm' is not computed inside that loop")


def test_inline_output_or_reduction() -> None:
    X, out = op("softmax", 4, 8)
    s = asc.create_schedule(out)
    refused(lambda: s[out].compute_inline(), "step 0 (compute_inline, stage 'norm')", "output")
    refused(lambda: s["maxelem"].compute_inline(), "'maxelem' is a reduction and cannot be inlined")
    s["maxelem"].compute_at(s["expv"], "i")
    refused(lambda: s["expv"].compute_inline(), "stage 'maxelem' is computed at 'expv'")


@pytest.mark.parametrize("layout", ["transposed", "outer_last"])
def test_a_cache_read_layout_needs_two_axes(layout) -> None:
    X = te.placeholder((8,), name="X", dtype="float32")
    Y = te.compute((8,), lambda i: X[i] * 2.0, name="Y")
    s = asc.create_schedule(Y)
    refused(lambda: s.cache_read(X, "global", [Y], layout=layout),
            f"cannot cache_read 'X' with layout {layout!r}: it has 1 axis, not two or more")


def test_cache_errors(mm) -> None:
    s, A, B, C = mm
    refused(lambda: s.cache_read(A, "texture", [C]), "unknown scope 'texture'")
    refused(lambda: s.cache_read(A, "local", []), "at least one reader")
    refused(lambda: s.cache_read(C, "local", [C]), "stage 'C' does not read 'C'")
    refused(lambda: s.cache_read(A, "global", [C], layout="diagonal"), "unknown cache_read layout 'diagonal'")
    s[C].split("i", factor=2)
    refused(lambda: s.cache_write(C, "local"), "step 1 (cache_write, stage 'C')", "before any transform")


def test_rfactor_errors(mm) -> None:
    s, A, B, C = mm
    refused(lambda: s.rfactor(C, "i"), "step 0 (rfactor, stage 'C', loop 'i')", "not a reduction loop")
    refused(lambda: s.rfactor(C, "k", factor_axis=5), "factor_axis 5 out of range [0, 2]")
    X = op("gelu", 4, 4)[1]
    s2 = asc.create_schedule(X)
    refused(lambda: s2.rfactor(X, "i0"), "has no reduction to factor")


@pytest.mark.parametrize("before,pattern", [
    (lambda s, C: s[C].unroll("k"), "before annotating the stage's loops (loop 'k' is annotated)"),
    (lambda s, C: s[C].pragma("i", "auto_unroll_max_step", 4), "before annotating"),
    (lambda s, C: s[C].split("j", factor=4), "before splitting or fusing the stage's spatial loops"),
    (lambda s, C: s[C].reorder("j", "i"), "before reordering the stage's spatial loops"),
])
def test_rfactor_after_other_steps_would_drop_them(mm, before, pattern) -> None:
    """rfactor rebuilds the stage: steps on it that would be lost are refused, not dropped silently."""
    s, A, B, C = mm
    before(s, C)
    refused(lambda: s.rfactor(C, "k"), "rfactor", "stage 'C', loop 'k'", pattern)
    s3 = asc.create_schedule(C)
    s3[C].split("k", factor=2)  # splits of the reduction loops are kept
    s3.rfactor(C, "k.inner")


def test_vectorize_around_compute_at_and_nested_parallel() -> None:
    X, out = op("softmax", 4, 16)
    s = asc.create_schedule(out)
    i, j = s[out].op.axis
    s[out].vectorize(i)
    s["rsum"].compute_inline()
    s["expsum"].compute_at(s[out], i)
    refused(lambda: asc.lower(s, [X, out]), "stage 'norm', loop 'i': cannot vectorize",
            "contains another stage's computation")
    s2 = asc.create_schedule(out)
    s2[out].vectorize(i)
    s2[out].parallel(j)
    refused(lambda: asc.lower(s2, [X, out]), "stage 'norm', loop 'j': parallel loop nested inside a vectorized "
                                             "loop ('i' of stage 'norm')")
    s3 = asc.create_schedule(out)
    s3[out].parallel(i)
    s3["rsum"].compute_inline()
    s3["expsum"].compute_at(s3[out], i)
    s3["expsum"].parallel(s3["expsum"].op.axis[0])
    refused(lambda: asc.lower(s3, [X, out]), "stage 'expsum', loop 'i': parallel loop nested inside another "
                                             "parallel loop ('i' of stage 'norm')")


def test_a_refused_step_leaves_the_schedule_unchanged(mm) -> None:
    s, A, B, C = mm
    s[C].vectorize("j")
    before = asc.lower(s, [A, B, C]).show()
    refused(lambda: s[C].tile("i", "j", 4, 4), "loop 'j' is annotated")  # i is split before j is refused
    refused(lambda: s[C].split("j", factor=4), "loop 'j' is annotated")
    assert [lp.name for lp in s.state.stage("C").leaf_loops] == ["i", "j", "k"]
    assert asc.lower(s, [A, B, C]).show() == before
    assert asc.lower(asc.Schedule.from_json(s.to_json())).show() == before


# ---- build arguments and call time ---------------------------------------------------------------------


def test_build_argument_errors(mm) -> None:
    s, A, B, C = mm
    refused(lambda: asc.build(s, [A, B]), "output 'C' is not in the argument list")
    refused(lambda: asc.build(s, [A, C]), "input 'B' is read by the kernel but is not in the argument list")
    refused(lambda: asc.build(s, [A, A, B, C]), "argument 'A' appears twice")
    other = te.placeholder((3,), "Q")
    refused(lambda: asc.build(s, [A, B, C, other]), "argument 'Q' is not a tensor of this schedule's DAG")
    with pytest.raises(ValueError, match="unknown target 'fpga'"):
        asc.build(s, [A, B, C], target="fpga")
    with pytest.raises(TypeError, match="expects a Schedule"):
        asc.lower("not a schedule")


def test_call_time_errors() -> None:
    A, B, C = op("matmul", 4, 5, 3)
    f = asc.build(asc.create_schedule(C), [A, B, C])
    a, b, c = np.zeros((4, 3), "float32"), np.zeros((3, 5), "float32"), np.zeros((4, 5), "float32")
    f(a, b, c)
    with pytest.raises(TypeError, match=r"kernel takes 3 arrays \(A, B, C\), got 2"):
        f(a, b)
    with pytest.raises(ValueError, match=r"argument 1 \(B\): shape \(5, 3\), expected \(3, 5\)"):
        f(a, b.T.copy(), c)
    with pytest.raises(TypeError, match=r"argument 2 \(C\): dtype float64, expected float32"):
        f(a, b, c.astype("float64"))
    with pytest.raises(TypeError, match=r"argument 0 \(A\): expected a numpy array, got list"):
        f(a.tolist(), b, c)
    with pytest.raises(ValueError, match="C-contiguous"):
        f(np.zeros((3, 4), "float32").T, b, c)
    ro = np.zeros((4, 5), "float32")
    ro.flags.writeable = False
    with pytest.raises(ValueError, match=r"argument 2 \(C\): output array is read-only"):
        f(a, b, ro)


def test_unsupported_dtype() -> None:
    with pytest.raises(DTypeError, match="unsupported dtype of placeholder 'A' 'int8'"):
        te.placeholder((4,), "A", "int8")
    with pytest.raises(ValueError, match="argument .dtype. must be one of .*got .complex64."):
        op("matmul", 4, 4, 4, "complex64")


# ---- malformed step and schedule JSON -----------------------------------------------------------------


@pytest.mark.parametrize("d,pattern", [
    ({"kind": "splat", "v": 1}, "unknown step kind 'splat'"),
    ({"kind": ["split"]}, "unknown step kind ['split']"),
    ({"stage": "C"}, "expected an object with a 'kind'"),
    ([1, 2], "expected an object with a 'kind'"),
    ({"kind": "split", "v": 2, "stage": "C", "loop": "i", "factor": 4}, "step format version 2 is not supported"),
    ({"kind": "split", "v": True, "stage": "C", "loop": "i", "factor": 4}, "step format version True"),
    ({"kind": "split", "v": 1, "stage": "C", "loop": "i", "factor": "4"}, "field 'factor' must be an integer"),
    ({"kind": "split", "v": 1, "stage": 3, "loop": "i", "factor": 4}, "field 'stage' must be a string"),
    ({"kind": "split", "v": 1, "stage": "C", "factor": 4}, "step 'split' lacks field 'loop'"),
    ({"kind": "split", "v": 1, "stage": "C", "loop": "i", "factor": 4, "speed": 9}, "unknown fields ['speed']"),
    ({"kind": "fuse", "v": 1, "stage": "C", "loops": "ij"}, "field 'loops' must be a list of names"),
    ({"kind": "fuse", "v": 1, "stage": "C", "loops": ["i", 1]}, "field 'loops' must be a list of names"),
    ({"kind": "rfactor", "v": 1, "stage": "C", "loop": "k", "factor_axis": None}, "'factor_axis' must be an integer"),
    ({"kind": "pragma", "v": 1, "stage": "C", "loop": "i", "key": "auto_unroll_max_step", "value": 1.5},
     "field 'value' must be an integer"),
])
def test_malformed_step_json(d, pattern) -> None:
    refused(lambda: step_from_dict(d), pattern)


def test_malformed_schedule_json(mm) -> None:
    s, A, B, C = mm
    s[C].split("i", factor=4)
    good = json.loads(s.to_json())
    refused(lambda: asc.Schedule.from_json("{not json"), "not valid JSON")
    refused(lambda: asc.Schedule.from_json(json.dumps({**good, "version": 7})), "format version 7")
    refused(lambda: asc.Schedule.from_json(json.dumps({"format": "other"})), "not an autosched schedule")
    refused(lambda: asc.Schedule.from_json(json.dumps({**good, "steps": {"a": 1}})), "'steps' must be a list")
    refused(lambda: asc.Schedule.from_json(json.dumps(good["steps"])), "needs the DAG")
    bad_steps = [{**good["steps"][0], "loop": "q"}]
    refused(lambda: asc.Schedule.from_json(json.dumps({**good, "steps": bad_steps})), "step 0 (split, stage 'C', "
                                                                                       "loop 'q')")
    # a bare step list applies to a DAG given separately
    s2 = asc.Schedule.from_json(json.dumps(good["steps"]), dag=s.dag)
    assert s2.steps == s.steps


def test_step_constructors_validate() -> None:
    refused(lambda: SplitStep("C", 5, 4), "step 'split' of stage 'C': field 'loop' must be a string, got 5")
    assert SplitStep("C", "i", np.int32(3)).factor == 3


def test_duplicate_axis_names_refused() -> None:
    """Steps name loops, so two axes of one compute with one name would be ambiguous (and were lowered
    with the wrong extent)."""
    A = te.placeholder((3, 4), "A")
    k1, k2 = te.reduce_axis(3, "k"), te.reduce_axis(4, "k")
    C = te.compute((1,), lambda i: te.sum(A[k1, k2], axis=[k1, k2]), "C")
    refused(lambda: asc.create_schedule(C), "stage 'C' has two axes named 'k'")
