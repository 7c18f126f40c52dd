"""Size-relative features: a warm-started ranker compares schedules of one operator at two sizes by
what they do per unit of work, not by how long their loops are."""

from __future__ import annotations

import json

import numpy as np
import pytest

from autosched.cost_model import XGBModel, pairwise_accuracy
from autosched.cost_model.features import (
    FEATURE_NAMES,
    N_FEATURES,
    NONE_PER_FLOP,
    SIZE_SCALED_STORE_FEATURES,
    extract_features,
    size_relative,
)
from autosched.tuning.candidates import lowered_for_features
from tests.support.sched_helpers import matmul_packed, matmul_tiled

SCALED = {f"sum_{n}" for n in SIZE_SCALED_STORE_FEATURES} | {f"max_{n}" for n in SIZE_SCALED_STORE_FEATURES} | \
    {"alloc_bytes", "total_bytes"}


def _features(make, size: int) -> np.ndarray:
    s, args = make(size, size, size)
    return extract_features(lowered_for_features(s, args, "cpu"))


def test_columns_that_grow_with_the_problem_are_taken_per_flop_and_the_others_are_kept() -> None:
    rng = np.random.default_rng(0)
    x = rng.random((5, N_FEATURES)) * 10
    x[0, FEATURE_NAMES.index("max_loads_strided")] = 0.0  # no strided load at all
    before = x.copy()
    out = size_relative(x)
    np.testing.assert_array_equal(x, before)  # the input is not modified
    log_flops = x[:, FEATURE_NAMES.index("total_flops")]
    for j, name in enumerate(FEATURE_NAMES):
        if name in SCALED and name.startswith("sum_") or name == "total_flops":
            assert not out[:, j].any(), name  # sums of logs over stores cannot be made relative
        elif name in SCALED:
            expect = np.where(x[:, j] > 0, x[:, j] - log_flops, NONE_PER_FLOP)
            np.testing.assert_allclose(out[:, j], expect, err_msg=name)
        else:
            np.testing.assert_array_equal(out[:, j], x[:, j], err_msg=name)  # tile extents, fractions...
    assert out[0, FEATURE_NAMES.index("max_loads_strided")] == NONE_PER_FLOP


@pytest.mark.parametrize("make", [matmul_tiled, matmul_packed])
def test_one_schedule_at_two_sizes_is_much_closer_relative_than_absolute(make) -> None:
    small, large = _features(make, 128), _features(make, 256)
    absolute = np.abs(small - large).sum()
    relative = np.abs(size_relative(small[None])[0] - size_relative(large[None])[0]).sum()
    assert relative < 0.5 * absolute, (relative, absolute)


def test_wrong_width_is_refused() -> None:
    with pytest.raises(ValueError, match="size_relative wants rows of"):
        size_relative(np.zeros((3, N_FEATURES - 1)))


def test_a_model_on_relative_columns_ranks_a_size_it_never_saw(tmp_path) -> None:
    """Throughput depends on loads per flop of the innermost store; the transferred size is 8x the
    work. Absolute columns put the two sizes in different places, relative columns do not."""
    rng = np.random.default_rng(1)
    col = FEATURE_NAMES.index("max_loads")

    def records(n: int, log_flops: float):
        x = rng.random((n, N_FEATURES))
        x[:, FEATURE_NAMES.index("total_flops")] = log_flops
        per_flop = rng.random(n)
        x[:, col] = log_flops + per_flop  # a count that grows with the problem
        return x, np.exp(-3 * per_flop)

    xa, ya = records(200, 20.0)
    xb, yb = records(100, 20.0 + np.log(8))
    scores = {}
    for rel in (True, False):
        m = XGBModel(seed=0, min_samples=4, num_rounds=30, size_relative=rel)
        m.fit(xa, ya, ["matmul 512"] * len(ya))
        scores[rel] = pairwise_accuracy(yb, m.predict(xb))
    assert scores[True] > 0.8 and scores[False] < 0.65, scores

    assert not XGBModel().size_relative  # an option: it helped transfer on some records, hurt on others
    m = XGBModel(seed=0, min_samples=4, num_rounds=10, size_relative=True)
    m.fit(xa, ya, ["one"] * len(ya))
    m.save(tmp_path / "m.json")
    back = XGBModel.load(tmp_path / "m.json")
    assert back.size_relative
    np.testing.assert_allclose(back.predict(xb), m.predict(xb), rtol=1e-6)
    # a model saved before the option existed was trained on absolute columns and loads that way
    meta_path = XGBModel.meta_path(tmp_path / "m.json")
    meta = json.loads(meta_path.read_text())
    del meta["hyper"]["size_relative"]
    meta_path.write_text(json.dumps(meta))
    assert not XGBModel.load(tmp_path / "m.json").size_relative
