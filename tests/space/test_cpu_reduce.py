"""The cpu sketch rule for reductions without reuse (`autosched.space.cpu_reduce`): row, column,
whole-tensor and several-axis reductions, max/min and custom reducers, pooling and te-written DAGs, at
extents that no vector, lane, block or chunk size divides. Every config picked (each choice of each
knob at least once) is built and run in the measurement sandbox against the numpy reference."""

from __future__ import annotations

import importlib.util
import itertools
import sys
from pathlib import Path

import numpy as np
import pytest

import autosched as asc
from autosched import te
from autosched.space.registry import make_space
from autosched.workload import Workload

ROOT = Path(__file__).resolve().parents[2]


def _col_prod(m: int, n: int) -> list[te.Tensor]:
    """Column products (a custom reducer, identity 1) over a leading axis."""
    prod = te.comm_reducer(lambda x, y: x * y, 1.0, "prod")
    X = te.placeholder((m, n), "X")
    r = te.reduce_axis(m, "r")
    return [X, te.compute((n,), lambda j: prod(1.0 + X[r, j] * 0.01, axis=r), "out")]


def _sumsq_listed_inner_first(a: int, b: int, c: int) -> list[te.Tensor]:
    """Sum of squares over axes 0 and 2, the reduction axes listed innermost first."""
    X = te.placeholder((a, b, c), "X")
    r0, r2 = te.reduce_axis(a, "r0"), te.reduce_axis(c, "r2")
    return [X, te.compute((b,), lambda j: te.sum(X[r0, j, r2] * X[r0, j, r2], axis=[r2, r0]), "out")]


def _row_mean(m: int, n: int) -> list[te.Tensor]:
    """mean = sum * const: the reduction feeds an element-wise output."""
    X = te.placeholder((m, n), "X")
    k = te.reduce_axis(n, "k")
    s = te.compute((m,), lambda i: te.sum(X[i, k], axis=k), "s")
    return [X, te.compute((m,), lambda i: s[i] * (1.0 / n), "out")]


def _col_absmax(m: int, n: int) -> list[te.Tensor]:
    """Column max of |x|: an injective producer of a leading-axis max, inlined or computed at the output."""
    X = te.placeholder((m, n), "X")
    A = te.compute((m, n), lambda i, j: te.abs(X[i, j]), "A")
    r = te.reduce_axis(m, "r")
    return [X, te.compute((n,), lambda j: te.max(A[r, j], axis=r), "out")]


WORKLOADS: dict[str, Workload] = {
    "rows_sum": Workload.create("reduce", (23, 517), 1, kind="sum"),
    "rows_max_1031": Workload.create("reduce", (5, 1031), 1, kind="max"),
    "cols_sum": Workload.create("reduce", (517, 37), 0, kind="sum"),
    "cols_min_wide": Workload.create("reduce", (97, 1031), 0, kind="min"),
    "whole_1d": Workload.create("reduce", (4099,), 0, kind="sum"),
    "whole_2d_f64": Workload.create("reduce", (31, 97), (0, 1), kind="sum", dtype="float64"),
    "axes_0_2_max_keep": Workload.create("reduce", (13, 7, 33), (0, 2), kind="max", keepdims=True),
    "axes_0_1_min": Workload.create("reduce", (9, 31, 19), (0, 1), kind="min"),
    "int_rows_sum": Workload.create("reduce", (7, 131), 1, kind="sum", dtype="int32"),
    "int_whole_max": Workload.create("reduce", (37, 29), (0, 1), kind="max", dtype="int64"),
    "pool_max": Workload.create("pool2d", 1, 3, 17, 17, 3, stride=2, padding=1, kind="max"),
    "te_col_prod": Workload.from_tensors(_col_prod(97, 45), name="test_col_prod"),
    "te_sumsq_0_2": Workload.from_tensors(_sumsq_listed_inner_first(7, 5, 97), name="test_sumsq_0_2"),
    "te_row_mean": Workload.from_tensors(_row_mean(17, 97), name="test_row_mean"),
    "te_col_absmax": Workload.from_tensors(_col_absmax(101, 19), name="test_col_absmax"),
}


def covering_configs(space, seed: int = 0) -> list[tuple[int, ...]]:
    """Configs such that every choice of every knob appears in at least one (the other knobs drawn at
    random): a small set that still builds each knob value once."""
    rng = np.random.default_rng(seed)
    knobs = space.space.knobs
    out: list[tuple[int, ...]] = []
    for k, knob in enumerate(knobs):
        for c in range(len(knob.choices)):
            cfg = [int(rng.integers(len(x.choices))) for x in knobs]
            cfg[k] = c
            if tuple(cfg) not in out:
                out.append(tuple(cfg))
    return out


def _fuzz_module():
    spec = importlib.util.spec_from_file_location("fuzz_schedules", ROOT / "benchmarks" / "fuzz_schedules.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("fuzz_schedules", mod)  # its dataclasses look their module up by name
    spec.loader.exec_module(mod)
    return mod


def run_configs(configs: dict[str, list[tuple[int, ...]]], jobs: int = 1) -> list:
    """Build and run `configs` (label -> configs of WORKLOADS[label]'s space) in the sandbox."""
    fz = _fuzz_module()
    spaces = {lab: make_space(WORKLOADS[lab], "cpu") for lab in configs}
    cases = []
    for lab, cfgs in configs.items():
        sp = spaces[lab].space
        for cfg in cfgs:
            vals = {k: (list(v) if isinstance(v, tuple) else v) for k, v in sp.values(cfg).items()}
            cases.append(fz.Case(WORKLOADS[lab].name, lab, cfg, vals))
    done, crashes = fz.run_cases(cases, {lab: WORKLOADS[lab] for lab in configs}, spaces, jobs, log=lambda m: None)
    assert crashes == 0
    return done


def _space(label: str):
    return make_space(WORKLOADS[label], "cpu")


# ---- the space holds the kernels the rule promises ---------------------------------------------
def test_row_reduction_offers_lanes_and_rows_not_a_vector_across_rows() -> None:
    names = _space("rows_sum").space.names
    assert {"out.lanes", "out.rows", "out.split"} <= set(names)
    assert "out.vector" not in names


def test_rows_are_held_at_one_without_lanes_so_no_two_configs_are_one_schedule() -> None:
    sp = _space("rows_sum").space
    rows = sp.knob("out.rows").choices
    assert len(rows) > 1
    for config in sp.iter_configs():
        v = sp.values(config)
        assert sp.valid(config) == (v["out.lanes"] != 0 or v["out.rows"] == rows[0]), v
    rng = np.random.default_rng(0)
    drawn = [sp.values(sp.sample_valid(rng)) for _ in range(200)]
    assert all(v["out.lanes"] or v["out.rows"] == rows[0] for v in drawn)
    assert any(v["out.lanes"] and v["out.rows"] > 1 for v in drawn)


def test_column_reduction_offers_output_vectors_blocks_and_a_split() -> None:
    sp = _space("cols_min_wide").space
    assert {"out.vector", "out.block", "out.split"} <= set(sp.names)
    assert 1 in sp.knob("out.split").choices and 1031 in sp.knob("out.block").choices


def test_whole_tensor_reductions_get_the_split_rule_not_tiling() -> None:
    for label in ("whole_1d", "whole_2d_f64", "axes_0_2_max_keep"):
        names = set(_space(label).space.names)
        assert "out.split" in names and not any(".tile." in n for n in names), (label, names)


def test_large_outputs_get_no_split() -> None:
    w = Workload.create("reduce", (8, 4096 * 2), 0)
    assert "out.split" not in _space_of(w).space.names


def _space_of(w: Workload):
    return make_space(w, "cpu")


def test_split_of_a_whole_sum_is_parallel_partials_then_a_serial_combine() -> None:
    sp = _space("whole_1d")
    v = {k.name: k.choices[0] for k in sp.space.knobs}
    v.update({"out.split": 4, "out.lanes": max(sp.space.knob("out.lanes").choices), "parallel": True})
    s = sp.apply(sp.space.index_of(v))
    code = asc.render(s, WORKLOADS["whole_1d"].tensors(), "cpu")[0].code
    assert code.count("#pragma omp parallel for") == 1  # the partials; the 4-term combine stays serial
    f = asc.build(s, WORKLOADS["whole_1d"].tensors())
    assert f.not_vectorized == []


@pytest.mark.parametrize("label", ["rows_max_1031", "cols_min_wide", "whole_1d"])
def test_main_loops_vectorize_where_nothing_divides(label: str) -> None:
    """Lanes (rows) and output vectors (columns) that do not divide 1031 or 4099: the lowering peels
    the tail, and gcc vectorizes every loop marked vectorize."""
    sp = _space(label)
    v = {k.name: k.choices[-1] if k.name != "parallel" else True for k in sp.space.knobs}
    if "out.lanes" in v:
        assert v["out.lanes"] > 0
    f = asc.build(sp.apply(sp.space.index_of(v)), WORKLOADS[label].tensors())
    assert f.not_vectorized == [], f.source


# ---- every config is right ---------------------------------------------------------------------
@pytest.mark.slow
def test_covering_configs_of_every_reduction_kind_match_the_reference() -> None:
    configs = {lab: covering_configs(_space(lab), seed=k) for k, lab in enumerate(WORKLOADS)}
    done = run_configs(configs)
    bad = [(c.label, c.knobs, c.outcome, c.message[:300]) for c in done if c.outcome != "ok"]
    assert not bad, bad
    assert len(done) == sum(map(len, configs.values()))


def test_a_sample_of_configs_matches_the_reference() -> None:
    """The fast tier: one config per workload (the last choice of every knob, then the first)."""
    configs = {}
    for lab in WORKLOADS:
        knobs = _space(lab).space.knobs
        configs[lab] = [tuple(len(k.choices) - 1 for k in knobs), tuple(itertools.repeat(0, len(knobs)))]
    done = run_configs(configs)
    bad = [(c.label, c.knobs, c.outcome, c.message[:300]) for c in done if c.outcome != "ok"]
    assert not bad, bad
