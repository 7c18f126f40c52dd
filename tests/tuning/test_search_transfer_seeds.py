"""A guided run starts from the best stored schedules of the same operator at other shapes: a stored
record's config is recovered from its steps, moved onto the new shape's knobs, and measured first."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autosched.compile.types import ErrorCode, MeasureInput
from autosched.measure.types import MeasureResult
from autosched.space.knobs import ConfigSpace, Knob
from autosched.space.registry import make_space
from autosched.target.key import Target
from autosched.tuning.api import RecordToDB, add_transfer_seeds, open_db, register
from autosched.tuning.candidates import CandidateCache
from autosched.tuning.transfer import (
    config_of_steps,
    diverse_first,
    families_first,
    register_tile,
    transfer_seeds,
    transplant,
)
from autosched.tuning.tuner import TaskTuner, TuneOptions
from autosched.workload import Workload
from tests.support.recording import RecordingMeasurer

CPU = Target.parse("cpu")
SMALL = Workload.create("matmul", 64, 64, 64)
SMALL_SPACE = make_space(SMALL, "cpu")


def _valid_config(seed: int):
    return SMALL_SPACE.space.sample_valid(np.random.default_rng(seed))


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000))
def test_a_config_is_recovered_from_its_steps(seed: int) -> None:
    cfg = _valid_config(seed)
    steps = SMALL_SPACE.apply(cfg).steps_json()
    back = config_of_steps(SMALL_SPACE, steps)
    assert back is not None
    assert SMALL_SPACE.apply(back).steps_json() == steps  # the same schedule (two configs may give it)


def test_steps_no_config_yields_are_not_matched() -> None:
    steps = SMALL_SPACE.apply(_valid_config(1)).steps_json()
    steps.append({"kind": "annotate", "v": 1, "stage": "C", "loop": "nowhere", "annotation": "parallel"})
    assert config_of_steps(SMALL_SPACE, steps) is None


def test_transplant_keeps_a_choice_that_exists_and_takes_the_nearest_one_otherwise() -> None:
    space = ConfigSpace((Knob("t", ((1, 1), (2, 4), (4, 4), (8, 8)), "tile"), Knob("u", (0, 16, 64), "unroll"),
                         Knob("f", (False, True), "flag")))
    assert space.values(transplant({"t": (2, 4), "u": 64, "f": True}, space)) == {"t": (2, 4), "u": 64, "f": True}
    # (4, 8) is one step from (4, 4) and from (8, 8); the innermost (register) factor weighs more, so
    # (8, 8) keeps it; 20 is nearest 16
    got = space.values(transplant({"t": (4, 8), "u": 20, "f": False}, space))
    assert got == {"t": (8, 8), "u": 16, "f": False}
    assert transplant({"t": (2, 4), "u": 0}, space) is None  # no value for knob "f"
    assert transplant({"t": (2, 4), "u": 0, "f": "maybe"}, space) is None  # nothing near a non-number


def test_a_register_tile_moved_to_a_smaller_matmul_keeps_its_rows() -> None:
    """matmul 512^3's 8x32 tile over all rows, (64, 8), does not fit 256 rows: the middle level
    shrinks to (32, 8), not the register tile to (64, 4); (128, 4) likewise becomes (64, 4)."""
    from autosched.space.registry import make_space

    space = make_space(Workload.create("matmul", 256, 256, 256), "cpu").space
    base = {k.name: k.choices[0] for k in space.knobs}
    for old, new in [((64, 8), (32, 8)), ((128, 4), (64, 4)), ((8, 8), (8, 8))]:
        assert space.values(transplant(dict(base, **{"C.tile.i": old}), space))["C.tile.i"] == new


def test_seeds_prefer_configs_that_differ_from_those_already_taken() -> None:
    pool = [(0, 0, 0, 0), (0, 0, 0, 1), (0, 0, 1, 1), (1, 1, 1, 0), (2, 2, 2, 2)]
    # (0,0,0,1) and (0,0,1,1) are variations of the first; (1,1,1,0) differs in 3 knobs, (2,2,2,2) in 4
    assert diverse_first(pool, 3, min_different=3) == [(0, 0, 0, 0), (1, 1, 1, 0), (2, 2, 2, 2)]
    # too few diverse ones: the best of the rest fill up, in pool order
    assert diverse_first(pool[:3], 3, min_different=3) == [(0, 0, 0, 0), (0, 0, 0, 1), (0, 0, 1, 1)]
    assert diverse_first(pool, 1) == [(0, 0, 0, 0)] and diverse_first([], 2) == []


def test_seeds_take_the_best_of_each_register_tile_first() -> None:
    pool = [(0, 0, 0, 0), (0, 0, 1, 1), (0, 1, 1, 1), (5, 5, 0, 0), (6, 6, 6, 6), (7, 7, 7, 7)]
    fams = [("4x64",), ("4x64",), ("4x64",), ("8x32",), None, ("4x32",)]
    # the 4x64 leader, the 8x32 leader (4th best), the 4x32 leader; a family of None never leads
    assert families_first(pool, fams, 3) == [(0, 0, 0, 0), (5, 5, 0, 0), (7, 7, 7, 7)]
    # fewer families than seeds: the rest by knob diversity, counted against the leaders too:
    # (0,0,1,1) differs from the first leader in 2 knobs, (0,1,1,1) in 3
    assert families_first(pool, fams, 4) == [(0, 0, 0, 0), (5, 5, 0, 0), (7, 7, 7, 7), (0, 1, 1, 1)]
    assert families_first(pool, [("a",)] * 6, 2) == [(0, 0, 0, 0), (0, 1, 1, 1)]  # one family: diversity
    space = make_space(Workload.create("matmul", 512, 512, 512), "cpu").space
    values = {k.name: k.choices[0] for k in space.knobs} | {"C.tile.i": (128, 4), "C.tile.j": (2, 64)}
    assert register_tile(space, values) == (4, 64)  # C.tile.k is one level: not part of the tile


def _store(db, w: Workload, space, configs_and_costs) -> list[str]:
    register(db, w, CPU)
    cc = CandidateCache(w, space)
    inputs, results = [], []
    for cfg, cost in configs_and_costs:
        inputs.append(MeasureInput(w.key, w.to_json(), CPU.key, cc.get(cfg).steps_json))
        results.append(MeasureResult((cost,), ErrorCode.NO_ERROR))
    RecordToDB(db)(inputs, results)
    return [i.steps_json for i in inputs]


def _distinct_configs(space, n: int, seed: int = 0):
    rng, out, seen = np.random.default_rng(seed), [], set()
    while len(out) < n:
        c = space.space.sample_valid(rng)
        h = json.dumps(space.apply(c).steps_json())
        if h not in seen:
            seen.add(h)
            out.append(c)
    return out


@pytest.fixture()
def db(tmp_path):
    return open_db(f"sqlite:///{tmp_path}/t.db")


def test_seeds_come_from_the_same_operators_best_schedules_moved_to_the_new_shape(db) -> None:
    big = Workload.create("matmul", 128, 128, 128)
    big_space = make_space(big, "cpu")
    configs = _distinct_configs(big_space, 6)
    costs = [5e-3, 1e-3, 4e-3, 2e-3, 3e-3, 6e-3]  # best: configs[1], then [3], then [4]
    _store(db, big, big_space, zip(configs, costs))
    other_op = Workload.create("dense_bias_relu", 64, 64, 64)  # other knobs: never a seed for matmul
    dense_space = make_space(other_op, "cpu")
    _store(db, other_op, dense_space, [(dense_space.space.sample_valid(np.random.default_rng(3)), 1e-5)])
    seeds = transfer_seeds(db, SMALL, CPU, SMALL_SPACE, per_workload=3)
    assert 1 <= len(seeds) <= 3
    ranked = [transplant(big_space.space.values(configs[i]), SMALL_SPACE.space) for i in (1, 3, 4, 2, 0, 5)]
    pool = list(dict.fromkeys(c for c in ranked if SMALL_SPACE.space.valid(c)))
    assert seeds[0] == pool[0]  # the best one always leads
    assert set(seeds) <= set(pool)
    assert transfer_seeds(db, big, CPU, big_space) == []  # its own records are not transfer
    assert transfer_seeds(db, other_op, CPU, dense_space) == []  # no other dense_bias_relu stored


def test_a_record_of_an_unreadable_format_is_skipped_not_fatal(db) -> None:
    big = Workload.create("matmul", 128, 128, 128)
    big_space = make_space(big, "cpu")
    register(db, big, CPU)
    bad = MeasureInput(big.key, big.to_json(), CPU.key, json.dumps([{"kind": "warp_speed", "v": 9}]))
    RecordToDB(db)([bad], [MeasureResult((1e-6,), ErrorCode.NO_ERROR)])
    good = _distinct_configs(big_space, 1)[0]
    _store(db, big, big_space, [(good, 1e-3)])
    seeds = transfer_seeds(db, SMALL, CPU, SMALL_SPACE)
    assert seeds == [transplant(big_space.space.values(good), SMALL_SPACE.space)]


def test_a_stored_workload_that_breaks_is_skipped_with_a_warning(db, monkeypatch) -> None:
    import autosched.space.registry as spaces

    big = Workload.create("matmul", 128, 128, 128)
    big_space = make_space(big, "cpu")
    good = _distinct_configs(big_space, 1)[0]
    _store(db, big, big_space, [(good, 1e-3)])
    broken = Workload.create("matmul", 96, 96, 96)  # nearer 64^3 than 128^3: visited first
    _store(db, broken, make_space(broken, "cpu"), [(_distinct_configs(make_space(broken, "cpu"), 1)[0], 1e-3)])
    real = spaces.make_space

    def make(w, kind):
        if w.key == broken.key:
            raise RuntimeError("planted failure")
        return real(w, kind)

    monkeypatch.setattr(spaces, "make_space", make)
    with pytest.warns(UserWarning, match="planted failure"):
        seeds = transfer_seeds(db, SMALL, CPU, SMALL_SPACE)
    assert seeds == [transplant(big_space.space.values(good), SMALL_SPACE.space)]


@pytest.mark.parametrize("cost_model,transfer,expect", [("xgb", True, True), ("xgb", False, False),
                                                         (None, True, False)])
def test_only_a_guided_run_with_transfer_on_measures_the_seeds_first(db, cost_model, transfer, expect) -> None:
    big = Workload.create("matmul", 128, 128, 128)
    big_space = make_space(big, "cpu")
    _store(db, big, big_space, zip(_distinct_configs(big_space, 4), [1e-3, 2e-3, 3e-3, 4e-3]))
    m = RecordingMeasurer()
    space = make_space(SMALL, "cpu")
    space.seeds = ()  # the space's rule-derived GEMM seeds would come first (tests/schedule/test_space_seeds.py)
    task = TaskTuner(SMALL, CPU, m, TuneOptions(trials=8, batch_size=8, searcher="random", cost_model=cost_model,
                                                 transfer=transfer, verify=0), space=space)
    add_transfer_seeds(task, db)
    r = task.run()
    seeds = transfer_seeds(db, SMALL, CPU, SMALL_SPACE)
    assert seeds
    firsts = [task.cands.get(c).steps_json for c in seeds]
    assert (m.order[: len(firsts)] == firsts) is expect
    assert r.transferred == (len(seeds) if expect else 0)


def test_a_near_best_register_tile_deep_in_the_ranking_is_a_seed(db) -> None:
    """The other shape's best 8 schedules share one register tile; a second tile at 0.9 of the best
    is a seed, and one at 0.5 is not (its family is too slow to lead)."""
    big = Workload.create("matmul", 128, 128, 128)
    big_space = make_space(big, "cpu")
    base = {k.name: k.choices[0] for k in big_space.space.knobs} | {"C.pack.B": True}

    def cfg(ti, tj, k, unroll, order):
        v = base | {"C.tile.i": ti, "C.tile.j": tj, "C.tile.k": k, "C.unroll": unroll, "C.outer_order": order}
        return tuple(kn.choices.index(v[kn.name]) for kn in big_space.space.knobs)

    variants = [cfg((32, 4), (2, 64), k, u, o) for k in (1, 32) for u in (0, 16) for o in ("natural", "reversed")]
    eight = cfg((16, 8), (1, 32), 1, 0, "reversed")
    sixteen = cfg((8, 16), (1, 8), 1, 0, "reversed")
    stored = [(c, 1e-3 * (1 + 0.01 * i)) for i, c in enumerate(variants)] + [(eight, 1.1e-3), (sixteen, 2e-3)]
    _store(db, big, big_space, stored)
    seeds = transfer_seeds(db, SMALL, CPU, SMALL_SPACE, per_workload=3)
    tiles = [register_tile(SMALL_SPACE.space, SMALL_SPACE.space.values(c)) for c in seeds]
    assert tiles[0] == (4, 64) and (8, 32) in tiles and (16, 8) not in tiles, tiles
