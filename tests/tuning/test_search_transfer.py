"""Transferred cost-model knowledge is hedged and checked: while the model knows only other
workloads' records, half of a batch is random; once this workload's own measurements come in, a
model that ranks them poorly forgets the other workloads' records (they steered dense+bias+relu's
guided search to worse-than-random candidates in the efficiency benchmark)."""

from __future__ import annotations

import numpy as np
import pytest

from autosched.compile.types import ErrorCode
from autosched.cost_model.xgb_model import XGBModel
from autosched.measure.types import MeasureResult
from autosched.search.random_search import RandomSearcher
from autosched.target.key import Target
from autosched.tuning.candidates import CandidateCache, features_of_steps
from autosched.tuning.tuner import TRANSFER_MIN_PAIRWISE, TaskTuner, TuneOptions
from autosched.workload import Workload

W = Workload.create("matmul", 64, 64, 64)


class _FeatureMeasurer:
    """Times a candidate by a fixed function of one feature column: a model can learn it."""

    def __init__(self, column: int) -> None:
        self.column = column

    def measure(self, inputs):
        out = []
        for inp in inputs:
            f = features_of_steps(W, inp.steps_json)
            out.append(MeasureResult((1e-3 / (1.0 + f[self.column]),), ErrorCode.NO_ERROR))
        return out


def _pool(n: int = 120):
    tuner = TaskTuner(W, Target.parse("cpu"), None, TuneOptions(trials=1, batch_size=1, searcher="random",
                                                                 cost_model=None))
    cands = CandidateCache(W, tuner.space, "cpu")
    rng = np.random.default_rng(0)
    feats = []
    for _ in range(n):
        c = cands.get(tuner.space.space.sample(rng))
        if c.ok:
            feats.append(features_of_steps(W, c.steps_json))
    x = np.array(feats)
    column = int(np.argmax([len(np.unique(x[:, j])) for j in range(x.shape[1])]))
    return x, column


@pytest.mark.slow
@pytest.mark.parametrize("misleading", [True, False])
def test_a_model_warm_started_from_misleading_records_forgets_them(misleading: bool) -> None:
    x, column = _pool()
    truth = 1.0 + x[:, column]
    foreign = 1.0 / truth if misleading else truth  # the other workload ranks them the opposite way
    model = XGBModel(seed=0, min_samples=16, num_rounds=40)
    model.fit(x, foreign, ["another workload"] * len(x))
    tuner = TaskTuner(W, Target.parse("cpu"), _FeatureMeasurer(column),
                      TuneOptions(trials=32, batch_size=16, searcher="random", cost_model="xgb"), model=model)
    tuner.step()
    assert tuner.transfer_checks, "the first batch was not checked against the transferred model"
    if misleading:
        assert tuner.transfer_checks[0] < TRANSFER_MIN_PAIRWISE and tuner.transfer_dropped
        assert model.count_group("another workload") == 0 and model.count_group(W.key) == model.n_samples
    else:
        assert tuner.transfer_checks[0] >= TRANSFER_MIN_PAIRWISE and not tuner.transfer_dropped
        assert model.count_group("another workload") == len(x)
    assert tuner.trials == 8  # a model-guided run starts with a small batch
    tuner.run()  # the run goes on with the model it kept
    assert tuner.trials == 32


def test_a_model_shared_by_a_scheduler_is_not_checked() -> None:
    x, column = _pool(60)
    model = XGBModel(seed=0, min_samples=16, num_rounds=20)
    model.fit(x, 1.0 / (1.0 + x[:, column]), ["another task"] * len(x))
    tuner = TaskTuner(W, Target.parse("cpu"), _FeatureMeasurer(column),
                      TuneOptions(trials=16, batch_size=16, searcher="random", cost_model="xgb"), model=model,
                      check_transfer=False)
    tuner.step()
    assert not tuner.transfer_checks and model.count_group("another task") == len(x)


def test_explore_floor_sets_the_random_share_of_a_guided_batch() -> None:
    x, _ = _pool(8)
    s = RandomSearcher(TaskTuner(W, Target.parse("cpu"), None, TuneOptions(1, 1, "random", None)).space.space,
                       seed=0, predictor=lambda cs: np.zeros(len(cs)))
    assert s._n_random_share(16) <= 1  # eps-greedy alone: 5%
    s.explore_floor = 0.5
    assert s._n_random_share(16) == 8


def test_keep_only_group_retrains_on_that_group() -> None:
    rng = np.random.default_rng(1)
    m = XGBModel(seed=0, min_samples=4, num_rounds=5)
    m.fit(rng.random((30, 5)), rng.random(30), ["a"] * 10 + ["b"] * 20)
    assert m.count_group("a") == 10 and m.count_group("b") == 20
    m.keep_only_group("a")
    assert m.n_samples == 10 and m.is_trained
    m.keep_only_group("missing")
    assert m.n_samples == 0 and not m.is_trained


def test_a_floor_of_one_picks_random_buildable_configs_without_the_guided_proposer() -> None:
    """While the model knows nothing the whole batch is random, and configs the predictor marks as
    failing to build (`UNBUILDABLE_SCORE`) are left out."""
    from autosched.search.base import UNBUILDABLE_SCORE
    from autosched.search.genetic import GeneticSearcher

    space = TaskTuner(W, Target.parse("cpu"), None, TuneOptions(1, 1, "random", None)).space.space
    scored: list[int] = []

    def predictor(cs):
        scored.append(len(cs))
        return np.array([UNBUILDABLE_SCORE if c[0] % 2 else 0.0 for c in cs])

    s = GeneticSearcher(space, seed=0, predictor=predictor)
    s.explore_floor = 1.0
    s._propose = lambda n: pytest.fail("the guided proposer ran with a floor of 1")
    batch = s.propose(8)
    assert len(batch) == 8 and len(set(batch)) == 8
    assert all(c[0] % 2 == 0 for c in batch)  # only buildable ones
    assert scored and scored[0] >= 8  # drawn from a larger random pool


@pytest.mark.slow
def test_an_untrained_model_gets_a_random_first_batch() -> None:
    """Evolving candidates on an untrained model's hash scores collapses a batch onto one family: the
    tuner sets the floor to 1 until the model is fitted, then back to the guided share."""
    model = XGBModel(seed=0, min_samples=8, num_rounds=5)
    x, column = _pool(40)
    tuner = TaskTuner(W, Target.parse("cpu"), _FeatureMeasurer(column),
                      TuneOptions(trials=48, batch_size=16, searcher="genetic", cost_model="xgb"), model=model)
    assert not model.is_trained
    tuner.step()
    assert tuner.searcher.explore_floor == 1.0
    assert model.is_trained  # fitted on the first batch
    tuner.step()
    assert tuner.searcher.explore_floor == 0.0
