"""Behaviour particular to one searcher: grid orders, RL policy, annealing temperature, rare validity."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autosched.search import AnnealingSearcher, GridSearcher, RLSearcher, make_searcher
from autosched.search.grid import coprime_stride
from autosched.space.knobs import ConfigSpace, Knob
from tests.support.sim_objectives import run_search, tile_objective


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 10**9))
def test_coprime_stride_gives_a_permutation(size: int) -> None:
    s = coprime_stride(size)
    assert 0 < s <= max(size - 1, 1) and math.gcd(s, size) == 1


def test_grid_lexicographic_order_is_the_space_order() -> None:
    obj = tile_objective(small=True)
    g = GridSearcher(obj.space, seed=0, options={"order": "lexicographic"})
    trace = run_search(g, obj, obj.space.size, 7)
    assert [c for c, _ in trace] == list(obj.space)
    assert g.exhausted and g.propose(1) == []


def test_grid_strided_covers_everything_and_spreads_early() -> None:
    obj = tile_objective(small=True)
    g = GridSearcher(obj.space, seed=0, options={"order": "strided"})
    trace = run_search(g, obj, obj.space.size, 16)
    configs = [c for c, _ in trace]
    assert sorted(configs) == sorted(obj.space)
    first = configs[:16]
    assert len({c[0] for c in first}) == obj.space.dims[0]  # every tile_i value already in batch one


def test_grid_with_predictor_reorders_but_stays_exhaustive() -> None:
    obj = tile_objective(small=True)
    pred = obj.predictor(0.0, 0)
    g = GridSearcher(obj.space, seed=0, predictor=pred, options={"order": "lexicographic", "lookahead": 4})
    first = g.propose(10)
    window = list(obj.space)[:40]
    best_in_window = sorted(window, key=obj.cost)[:10]
    assert set(first) == set(best_in_window)
    g.update(first, obj.costs(first))
    rest = run_search(g, obj, obj.space.size, 10)
    assert sorted(first + [c for c, _ in rest]) == sorted(obj.space)


def test_rl_policy_is_a_distribution_and_learns() -> None:
    obj = tile_objective(small=True)
    rl = RLSearcher(obj.space, seed=0)
    p0 = rl.probabilities([obj.best_config])
    offsets = np.concatenate([[0], np.cumsum(obj.space.dims)])
    for k in range(len(obj.space.dims)):
        assert p0[0, offsets[k] : offsets[k + 1]].sum() == pytest.approx(1.0)
    run_search(rl, obj, 150, 10)
    p1 = rl.probabilities([obj.best_config])
    chosen = offsets[:-1] + np.array(obj.best_config)
    # the policy moved probability mass toward the optimum's choices
    assert np.prod(p1[0, chosen]) > 3 * np.prod(p0[0, chosen])


def test_annealing_cools_down() -> None:
    obj = tile_objective(small=True)
    sa = AnnealingSearcher(obj.space, seed=0, options={"t0": 0.5, "cooling": 0.98, "t_min": 0.01})
    assert sa.temperature == pytest.approx(0.5)
    run_search(sa, obj, 50, 10)
    assert sa.temperature == pytest.approx(max(0.01, 0.5 * 0.98**50))


@pytest.mark.parametrize("name", ["random", "annealing", "genetic", "rl"])
def test_rare_valid_configs_are_still_found(name: str) -> None:
    """A huge space (10^8) where one config in ~2000 is valid: no enumeration possible, only sampling."""
    space = ConfigSpace(
        tuple(Knob(f"k{i}", tuple(range(10))) for i in range(8)),
        is_valid=lambda c: c[0] == 3 and c[1] == 7 and c[2] % 5 == 0,
    )
    s = make_searcher(name, space, seed=0)
    got = s.propose(4)
    assert len(got) == 4 and all(space.valid(c) for c in got)
    s.update(got, [1.0 + sum(c) for c in got])
    assert not s.exhausted
