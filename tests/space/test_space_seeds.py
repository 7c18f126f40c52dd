"""The cpu sketch space carries rule-derived GEMM seeds (`autosched.space.cpu_seeds`): a packed B
panel two vectors wide serving every row, with mr x nr register tiles sized to this host's vectors.
Each seed is a config of the space that builds and matches numpy at every vector width; operators
the rule does not fit get none; a tuning run measures the seeds in its first batch."""

from __future__ import annotations

import numpy as np
import pytest

import autosched as asc
from autosched.space.cpu_seeds import accumulator_budget
from autosched.space.registry import make_space
from autosched.target.host_isa import VECTOR_BYTES_ENV
from autosched.target.key import Target
from autosched.tuning.tuner import TaskTuner, TuneOptions
from autosched.workload import Workload
from tests.support.recording import RecordingMeasurer


def _run(w: Workload, s) -> float:
    f = asc.build(s, [w.dag[a] for a in w.args_order])
    x = w.dag.random_inputs(0)
    outs = {t.name: np.zeros(t.shape, t.dtype) for t in w.dag.outputs}
    f(*[x[a] if a in x else outs[a] for a in w.args_order])
    ref = w.dag.evaluate(x)
    return max(float(np.abs(outs[o] - ref[o]).max()) for o in outs)


@pytest.mark.parametrize("nbytes", [16, 32, 64])
@pytest.mark.parametrize("op,args", [("matmul", (64, 96, 128)), ("batch_matmul", (2, 32, 64, 48))])
def test_gemm_seeds_pack_b_in_panels_of_two_vectors_and_match_numpy(monkeypatch, nbytes, op, args) -> None:
    monkeypatch.setenv(VECTOR_BYTES_ENV, str(nbytes))
    w = Workload.create(op, *args)
    space = make_space(w, "cpu")
    lanes = nbytes // 4
    assert space.seeds, "a GEMM gets rule-derived seeds"
    for v in space.seeds:
        mid, nr = v["C.tile.j"]
        assert mid == 1 and nr in (2 * lanes, 4 * lanes)
        mr = v["C.tile.i"][1]
        assert mr * nr // lanes <= accumulator_budget(lanes)  # accumulators fit the register file
        assert {k for k, x in v.items() if ".pack." in k and x} == {"C.pack.B"}  # the right operand
        assert v["C.outer_order"] == "reversed"
        assert _run(w, space.apply(space.space.index_of(v))) < 1e-3


def test_avx2_seeds_use_the_ragged_six_row_tile(monkeypatch) -> None:
    """16 ymm registers: 6x16 (12 accumulators) is the AVX2 tile, offered although 6 does not divide
    64 rows (its last tile is peeled off by lowering); 8x16 (16 accumulators) is not a seed there."""
    monkeypatch.setenv(VECTOR_BYTES_ENV, "32")
    w = Workload.create("matmul", 64, 96, 128)
    space = make_space(w, "cpu")
    tiles = {(v["C.tile.i"][1], v["C.tile.j"][1]) for v in space.seeds}
    assert (6, 16) in tiles and (8, 16) not in tiles
    six = next(v for v in space.seeds if v["C.tile.i"][1] == 6)
    assert six["C.tile.i"] == (11, 6)  # one block of all 11 tiles (66 rows, the last has 4)
    assert _run(w, space.apply(space.space.index_of(six))) < 1e-3


def test_seeds_depend_on_the_host_vector_width(monkeypatch) -> None:
    w = Workload.create("matmul", 64, 64, 64)
    widths = {}
    for nbytes in (32, 64):
        monkeypatch.setenv(VECTOR_BYTES_ENV, str(nbytes))
        widths[nbytes] = {make_space(w, "cpu").seeds[0]["C.tile.j"][1]}
    assert widths == {32: {16}, 64: {32}}


@pytest.mark.parametrize("op,args", [("softmax", (64, 128)), ("layernorm", (64, 128)),
                                     ("conv2d_nchw", (1, 8, 10, 10, 8, 3, 3)), ("gelu", (64, 128))])
def test_operators_the_rule_does_not_fit_get_no_seeds(op, args) -> None:
    assert make_space(Workload.create(op, *args), "cpu").seeds == ()


def test_a_matrix_too_narrow_for_two_vectors_gets_panels_of_one_vector(monkeypatch) -> None:
    monkeypatch.setenv(VECTOR_BYTES_ENV, "64")
    """24 columns: no 32-wide panel; panels of 16 with a peeled 8, and one tile across the row whose
    second vector is partial (masked in registers)."""
    w = Workload.create("matmul", 64, 24, 64)
    space = make_space(w, "cpu")
    row_seeds = [v for v in space.seeds if v["C.lanes"] == "last"]
    assert row_seeds and {v["C.tile.j"] for v in row_seeds} == {(1, 16), (1, 24)}
    for v in space.seeds:
        assert _run(w, space.apply(space.space.index_of(v))) < 1e-3


@pytest.mark.parametrize("searcher", ["random", "annealing", "genetic", "rl", "grid"])
def test_a_tuning_run_measures_the_rule_seeds_first(searcher) -> None:
    w = Workload.create("matmul", 64, 64, 64)
    m = RecordingMeasurer()
    task = TaskTuner(w, Target.parse("cpu"), m, TuneOptions(trials=8, batch_size=8, searcher=searcher,
                                                            cost_model=None, verify=0))
    task.run()
    seeds = [task.cands.get(task.space.space.index_of(v)).steps_json for v in task.space.seeds]
    assert seeds and m.order[: len(seeds)] == seeds


@pytest.mark.parametrize("nbytes", [16, 32, 64])
def test_dense_seeds_pack_the_weight_transposed_and_match_numpy(monkeypatch, nbytes) -> None:
    """nn.Linear's weight is [N, K]: the seed packs it as [K, nr] panels (`cache_read(...,
    layout="transposed")`), so the register tile reads whole vectors along N, as matmul's does."""
    monkeypatch.setenv(VECTOR_BYTES_ENV, str(nbytes))
    w = Workload.create("dense_bias_relu", 48, 64, 80)
    space = make_space(w, "cpu")
    assert space.seeds
    for v in space.seeds:
        assert {k for k, x in v.items() if ".pack." in k and x} == {"out.pack.W"}
        s = space.apply(space.space.index_of(v))
        packs = [st for st in s.steps if st.kind == "cache_read"]
        assert [(p.tensor, p.layout) for p in packs] == [("W", "transposed")]
        assert _run(w, s) < 1e-3


def test_only_a_weight_read_along_the_vectorized_axis_is_packed_transposed() -> None:
    from autosched.space.cpu_seeds import pack_layout

    def acc(op, *args):
        return next(t.op for t in Workload.create(op, *args).dag.computes if t.op.reduce_axis)

    dense, mm = acc("dense_bias_relu", 8, 16, 32), acc("matmul", 8, 16, 32)
    assert (pack_layout(dense, "W"), pack_layout(dense, "X")) == ("transposed", "")
    assert (pack_layout(mm, "A"), pack_layout(mm, "B")) == ("", "")


def _acc(op, *args):
    return next(t.op for t in Workload.create(op, *args).dag.computes if t.op.reduce_axis)


def test_a_channel_axis_is_offered_only_where_lanes_along_rows_fit_badly() -> None:
    from autosched.space.cpu_seeds import channel_axis

    assert channel_axis(_acc("conv2d_nchw", 1, 16, 56, 56, 64, 3, 3, 1, 1), 16) == 1  # 56-wide rows
    assert channel_axis(_acc("conv2d_nchw", 1, 16, 64, 64, 64, 3, 3, 1, 1), 16) is None  # 64 = 4 lines
    assert channel_axis(_acc("conv2d_nchw", 1, 16, 130, 130, 64, 3, 3, 2, 1), 16) == 1  # 64 wide, stride 2
    assert channel_axis(_acc("conv2d_nchw", 1, 16, 14, 14, 24, 3, 3, 1, 1), 16) == 1  # 24 channels: 16 + 8
    assert channel_axis(_acc("conv2d_nchw", 1, 16, 14, 14, 12, 3, 3, 1, 1), 16) is None  # not one line
    assert channel_axis(_acc("depthwise_conv2d_nchw", 1, 32, 14, 14, 3, 3, 1, 1), 16) is None  # data[c]
    assert channel_axis(_acc("matmul", 16, 24, 32), 16) == 0  # 24 columns: lanes along i, A packed [K, M]
    assert channel_axis(_acc("matmul", 12, 24, 32), 16) is None  # nor 12 rows
    for op, args in [("matmul", (64, 64, 64)), ("dense_bias_relu", (48, 64, 80)),
                     ("conv2d_nchw", (1, 8, 16, 16, 16, 3, 3, 1, 1))]:
        assert not any(k.name.endswith(".lanes") for k in make_space(Workload.create(op, *args), "cpu").space.knobs)


@pytest.mark.parametrize("nbytes", [16, 32, 64])
def test_conv_seeds_take_their_lanes_along_output_channels_and_match_numpy(monkeypatch, nbytes) -> None:
    """14-wide rows are not whole vectors, 32 output channels are: the seeds vectorize the register tile
    along the channels, its local buffer stored channel-last, the kernel packed `outer_last` (channels
    innermost) and read as whole vectors, each padded input value broadcast."""
    monkeypatch.setenv(VECTOR_BYTES_ENV, str(nbytes))
    lanes = nbytes // 4
    w = Workload.create("conv2d_nchw", 1, 8, 14, 14, 32, 3, 3, 1, 1)
    space = make_space(w, "cpu")
    assert space.seeds
    for v in space.seeds:
        assert v["conv.lanes"] == "channel" and v["conv.tile.f"][1] in (lanes, 2 * lanes)
        s = space.apply(space.space.index_of(v))
        assert [(p.tensor, p.layout) for p in s.steps if p.kind == "cache_read"] == [("kernel", "outer_last")]
        text = asc.lower(s, [w.dag[a] for a in w.args_order]).show()
        fi = v["conv.tile.f"][1]
        assert f"allocate conv_local[1, {v['conv.tile.y'][1]}, {v['conv.tile.x'][1]}, {fi}]" in text
        source = asc.build(s, [w.dag[a] for a in w.args_order]).source
        assert f"asc_ld_asc_f32x{lanes}(&kernel_global[" in source  # whole vectors of packed channels
        assert _run(w, s) < 1e-3


def test_either_lanes_choice_matches_numpy_with_any_tile(monkeypatch) -> None:
    """Both choices of the lanes knob, with tiles drawn at random (tails, several rows, inlined or
    materialized padding), against numpy; a matmul too narrow for whole lines takes its lanes along
    its rows, A packed [K, M]."""
    monkeypatch.setenv(VECTOR_BYTES_ENV, "64")
    rng = np.random.default_rng(0)
    for op, args, knob in [("conv2d_nchw", (1, 4, 7, 7, 16, 3, 3, 1, 1), "conv.lanes"),
                           ("matmul", (32, 24, 16), "C.lanes")]:
        w = Workload.create(op, *args)
        space = make_space(w, "cpu")
        knobs = space.space.knobs
        for _ in range(6):
            v = {k.name: k.choices[rng.integers(len(k.choices))] for k in knobs}
            for choice in ("last", "channel"):
                v[knob] = choice
                assert _run(w, space.apply(space.space.index_of(v))) < 1e-3, v


@pytest.mark.parametrize("nbytes", [32, 64])
@pytest.mark.parametrize("op,args", [("matmul", (97, 131, 53)), ("matmul", (3, 517, 31)), ("matmul", (1, 45, 77)),
                                     ("dense_bias_relu", (31, 83, 29))])
def test_sizes_that_divide_nothing_get_ragged_seeds_that_match_numpy(monkeypatch, nbytes, op, args) -> None:
    """Vector tiles need not divide the columns: the seeds keep whole-vector panels and lowering peels
    the partial last one; fewer rows than a row tile take them all."""
    monkeypatch.setenv(VECTOR_BYTES_ENV, str(nbytes))
    w = Workload.create(op, *args)
    space = make_space(w, "cpu")
    lanes = nbytes // 4
    assert space.seeds, f"{op}{args}: no seeds"
    for v in space.seeds:
        tile_j = [k for k in v if k.endswith(".tile.j")][0]
        assert v[tile_j][1] % lanes == 0 or v[tile_j] == (1, args[1])  # whole vectors, or the whole row
        assert _run(w, space.apply(space.space.index_of(v))) < 1e-3


def _user_conv(c: int, hw: int, k: int, ksize: int, stride: int, pad: int, dilation: int = 1) -> Workload:
    """A convolution as a user writes it with `te`: a padded copy of the input, then the reduction."""
    from autosched import te

    x = te.placeholder((1, c, hw, hw), name="X")
    wt = te.placeholder((k, c, ksize, ksize), name="Wt")
    size = hw + 2 * pad
    p = te.compute((1, c, size, size), lambda n, ci, h, w: te.if_then_else(
        te.all(h >= pad, h < hw + pad, w >= pad, w < hw + pad), x[n, ci, h - pad, w - pad],
        te.const(0.0, "float32")), name="P")
    out = (size - dilation * (ksize - 1) - 1) // stride + 1
    rc, rr, rs = te.reduce_axis((0, c), "rc"), te.reduce_axis((0, ksize), "rr"), te.reduce_axis((0, ksize), "rs")
    y = te.compute((1, k, out, out), lambda n, f, h, w: te.sum(
        p[n, rc, h * stride + rr * dilation, w * stride + rs * dilation] * wt[f, rc, rr, rs], axis=[rc, rr, rs]),
        name="Y")
    return Workload.from_tensors([x, wt, y], name="user_conv")


@pytest.mark.parametrize("nbytes", [32, 64])
@pytest.mark.parametrize("c,hw,k,ksize,stride,pad,dilation", [
    (3, 37, 24, 7, 2, 3, 1),   # few input channels, large kernel, stride 2, padded: rows of 19 outputs
    (1, 29, 17, 5, 3, 2, 1),   # one input channel, stride 3, channels that fill no whole vector twice
    (5, 23, 40, 3, 1, 2, 2),   # dilation 2
])
def test_strided_and_few_channel_convolutions_get_channel_seeds_that_match_numpy(
        monkeypatch, nbytes, c, hw, k, ksize, stride, pad, dilation) -> None:
    """Lanes along the output channels wherever lanes along the row fit badly (partial lines, or a
    stride that makes the row's reads gathers); channel counts and columns that divide nothing are
    ragged tiles."""
    monkeypatch.setenv(VECTOR_BYTES_ENV, str(nbytes))
    w = _user_conv(c, hw, k, ksize, stride, pad, dilation)
    space = make_space(w, "cpu")
    assert space.seeds, "a convolution with at least one vector of output channels gets channel seeds"
    for v in space.seeds:
        assert v["Y.lanes"] == "channel"
        assert _run(w, space.apply(space.space.index_of(v))) < 1e-3


@pytest.mark.parametrize("nbytes", [32, 64])
def test_a_partial_block_of_channels_keeps_its_accumulators_whole(monkeypatch, nbytes) -> None:
    """19 or 45 output channels in blocks of whole vectors end in a partial block: its tile is computed
    at full width on the stack accumulator (its extra lanes are dead), the packed kernel is read
    masked and the output written only where it exists; every block matches numpy."""
    from autosched.codegen.vector_c import vtype

    monkeypatch.setenv(VECTOR_BYTES_ENV, str(nbytes))
    vt = vtype("float32")
    for k in (19, 45):
        w = _user_conv(3, 23, k, 3, 2, 1)
        space = make_space(w, "cpu")
        for v in space.seeds:
            f = asc.build(space.apply(space.space.index_of(v)), [w.dag[a] for a in w.args_order])
            assert f"asc_stm_{vt}(&Y_local" not in f.source  # the accumulator is never masked
            assert f"asc_ldm_{vt}(&Wt_" in f.source  # the packed kernel's missing channels read as zero
            assert _run(w, space.apply(space.space.index_of(v))) < 1e-3


def test_channel_seeds_split_rows_into_tasks_for_every_core(monkeypatch) -> None:
    """Three blocks of 16 channels (the last of 15) on 115 rows and 2 cores: one task per block leaves
    a core idle for a third of the kernel, so the seed splits the rows into at least
    CHANNEL_TASKS_PER_CORE tasks per core."""
    from autosched.space import cpu_seeds

    monkeypatch.setenv(VECTOR_BYTES_ENV, "64")
    monkeypatch.setattr(cpu_seeds, "cores", lambda: 2)
    w = _user_conv(5, 345, 47, 3, 3, 1)
    space = make_space(w, "cpu")
    for v in space.seeds:
        fi, (mid, rows) = v["Y.tile.f"][1], v["Y.tile.h"]
        assert -(-47 // fi) * -(-115 // (mid * rows)) >= cpu_seeds.CHANNEL_TASKS_PER_CORE * 2


def test_gemm_seeds_split_rows_only_to_even_out_the_cores(monkeypatch) -> None:
    """Column panels that 2 cores share evenly keep all rows in one task (a packed panel serves them
    all); one full panel and a one-column tail split the rows so that, run as OpenMP's static schedule
    runs them (full panels, then the tail, each a parallel loop), the busiest core does at most
    IDLE_SHARE more than an even split."""
    from autosched.space import cpu_seeds

    monkeypatch.setenv(VECTOR_BYTES_ENV, "64")
    monkeypatch.setattr(cpu_seeds, "cores", lambda: 2)
    even = make_space(Workload.create("matmul", 512, 128, 64), "cpu")
    assert all(v["C.tile.i"][0] * v["C.tile.i"][1] >= 512 for v in even.seeds if v.get("C.lanes", "last") == "last")
    space = make_space(Workload.create("matmul", 1531, 33, 517), "cpu")
    for v in space.seeds:
        nr, (mid, mr) = v["C.tile.j"][1], v["C.tile.i"]
        groups = -(-1531 // (mid * mr))
        full, part = 33 // nr, (33 % nr) / nr
        busiest = -(-full * groups // 2) + -(-groups // 2) * part  # contiguous chunks of each loop
        assert busiest <= (full + part) * groups / 2 * (1 + cpu_seeds.IDLE_SHARE)
