"""XGBoost ranker and random baseline on synthetic data with a known nonlinear throughput function."""

from __future__ import annotations

import json

import numpy as np
import pytest

from autosched.cost_model import CostModel, RandomModel, XGBModel, pairwise_accuracy, top_k_recall

N_FEATURES = 24
SMALL = {"num_rounds": 60, "min_samples": 16}  # keeps each fit well under a second on 2 cores


def synthetic(n: int, seed: int, n_groups: int = 3, noise: float = 0.05):
    """Throughput = exp(nonlinear f(features) + noise), times a per-group scale spanning 1000x.

    Only the first 6 of 24 features matter, as with loop-nest features most of which are irrelevant
    to a given workload. Groups (workloads) differ in scale so that only within-group order is learnable.
    """
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, N_FEATURES))
    g = rng.integers(n_groups, size=n)
    f = np.sin(1.5 * x[:, 0]) + 0.6 * x[:, 1] * x[:, 2] + 0.5 * np.abs(x[:, 3]) - 0.3 * x[:, 4] ** 2 + 0.4 * x[:, 5]
    y = np.exp(f + noise * rng.normal(size=n)) * 10.0 ** (3 * g / max(n_groups - 1, 1))
    return x, y, np.array([f"workload-{k}" for k in g])


@pytest.fixture(scope="module")
def train():
    return synthetic(1200, seed=0)


@pytest.fixture(scope="module")
def test():
    return synthetic(400, seed=1)


@pytest.fixture(scope="module")
def trained(train) -> XGBModel:
    m = XGBModel(seed=0, **SMALL)
    m.fit(*train)
    return m


def test_xgb_ranks_held_out_data(trained, test) -> None:
    x, y, g = test
    p = trained.predict(x)
    assert trained.is_trained and p.shape == (len(y),)
    assert pairwise_accuracy(y, p, g) > 0.8
    assert top_k_recall(y, p, 20, g) > 0.35  # random: 20 / ~133 per group = 0.15


def test_ndcg_objective_also_learns(train, test) -> None:
    m = XGBModel(seed=0, objective="rank:ndcg", **SMALL)
    m.fit(*train)
    x, y, g = test
    assert pairwise_accuracy(y, m.predict(x), g) > 0.75


def test_random_model_is_a_coin_flip(train, test) -> None:
    x, y, g = test
    m = RandomModel(seed=3)
    m.fit(*train)
    p = m.predict(x)
    assert abs(pairwise_accuracy(y, p, g) - 0.5) < 0.05
    assert np.array_equal(p, m.predict(x))  # a pure function of (seed, row)
    assert not np.array_equal(p, RandomModel(seed=4).predict(x))
    assert np.all((p >= 0) & (p < 1))


def test_same_seed_same_model(train, test) -> None:
    a, b = XGBModel(seed=5, **SMALL), XGBModel(seed=5, **SMALL)
    a.fit(*train)
    b.fit(*train)
    assert np.array_equal(a.predict(test[0]), b.predict(test[0]))


@pytest.mark.parametrize("include_data", [True, False])
def test_save_load_round_trip(tmp_path, trained, test, include_data: bool) -> None:
    path = tmp_path / "model.json"
    trained.save(path, include_data=include_data)
    meta = json.loads(CostModel.meta_path(path).read_text())
    assert meta["model"] == "xgb" and meta["trained"] and meta["n_features"] == N_FEATURES
    back = CostModel.load(path)  # dispatches on the sidecar
    assert isinstance(back, XGBModel) and back.is_trained
    assert np.array_equal(back.predict(test[0]), trained.predict(test[0]))
    assert back.num_rounds == trained.num_rounds and back.min_samples == trained.min_samples
    assert back.n_samples == (trained.n_samples if include_data else 0)
    if include_data:  # a reloaded model keeps learning from everything it had seen
        back.update(*synthetic(40, seed=9))
        assert back.n_samples == trained.n_samples + 40 and back._g[0] == trained._g[0]
    with pytest.raises(ValueError, match="not a 'random'"):
        RandomModel.load(path)


def test_save_load_untrained_and_random(tmp_path, test) -> None:
    m = XGBModel(seed=2, min_samples=100)
    m.update(*synthetic(10, seed=3))
    m.save(tmp_path / "u.json")
    back = XGBModel.load(tmp_path / "u.json")
    assert not back.is_trained and back.n_samples == 10
    assert np.array_equal(back.predict(test[0]), m.predict(test[0]))
    r = RandomModel(seed=7)
    r.save(tmp_path / "r.json")
    assert np.array_equal(CostModel.load(tmp_path / "r.json").predict(test[0]), r.predict(test[0]))


def test_online_update_improves(test) -> None:
    x, y, g = test
    m = XGBModel(seed=0, **SMALL)
    accs = []
    for i in range(6):
        m.update(*synthetic(150, seed=100 + i))
        accs.append(pairwise_accuracy(y, m.predict(x), g))
    assert m.n_samples == 900
    assert accs[-1] > accs[0] + 0.04, accs
    assert accs[-1] > 0.78


def test_warm_start_boosts_more_trees() -> None:
    m = XGBModel(seed=0, warm_start=True, update_rounds=10, **SMALL)
    m.update(*synthetic(200, seed=0))
    first = m.booster.num_boosted_rounds()
    m.update(*synthetic(100, seed=1))
    assert first == SMALL["num_rounds"] and m.booster.num_boosted_rounds() == first + 10
    m.fit(*synthetic(200, seed=2))  # fit always starts over
    assert m.booster.num_boosted_rounds() == SMALL["num_rounds"]


def test_too_little_data_gives_random_ish_scores(test) -> None:
    m = XGBModel(seed=0, min_samples=50)
    m.fit(*synthetic(49, seed=4))
    assert not m.is_trained
    p = m.predict(test[0])
    assert np.array_equal(p, m.predict(test[0])) and len(np.unique(p)) == len(p)
    assert abs(pairwise_accuracy(test[1], p, test[2]) - 0.5) < 0.06
    m.update(*synthetic(1, seed=5))
    assert m.is_trained


def test_nan_and_inf_features_are_replaced(train, test) -> None:
    x, y, g = (a.copy() for a in train)
    rng = np.random.default_rng(0)
    holes = rng.random(x.shape) < 0.02
    x[holes] = np.nan
    x[rng.random(x.shape) < 0.01] = np.inf
    x[0, :] = -np.inf
    y[:5] = [np.nan, np.inf, -1.0, 0.0, np.nan]  # garbage and failures count as throughput 0
    m = XGBModel(seed=0, **SMALL)
    m.fit(x, y, g)
    xt = test[0].copy()
    xt[:, 7] = np.nan
    p = m.predict(xt)
    assert np.all(np.isfinite(p))
    filled = test[0].copy()
    filled[:, 7] = 0.0
    assert np.array_equal(p, m.predict(filled))
    assert pairwise_accuracy(test[1], p, test[2]) > 0.75


def test_groups_are_ranked_within_not_across(train, test) -> None:
    """Per-group normalization: a model trained WITH groups ranks within workloads better than one that
    treats 1000x-apart workloads as one list (which mostly learns the workload scale)."""
    x, y, g = train
    grouped, pooled = XGBModel(seed=0, **SMALL), XGBModel(seed=0, **SMALL)
    grouped.fit(x, y, g)
    pooled.fit(x, y, None)
    xt, yt, gt = test
    assert pairwise_accuracy(yt, grouped.predict(xt), gt) >= pairwise_accuracy(yt, pooled.predict(xt), gt) - 0.01
    # labels seen by XGBoost are normalized per group into [0, 1]
    labels = grouped._dmatrix().get_label()
    assert labels.max() == 1.0 and labels.min() >= 0.0


def test_fit_from_records_matches_fit(train, test) -> None:
    x, y, g = train
    a = XGBModel(seed=0, **SMALL)
    a.fit(x, y, g)
    b = XGBModel(seed=0, **SMALL)
    b.fit_from_records((x[i], y[i], g[i]) for i in range(len(y)))  # one record per candidate
    assert np.array_equal(a.predict(test[0]), b.predict(test[0]))
    c = XGBModel(seed=0, **SMALL)
    c.fit_from_records([(x[:600], y[:600], "w"), (x[600:], y[600:], "v")])  # one record per batch
    assert c.is_trained and c._g[:600] == ["w"] * 600
    with pytest.raises(ValueError, match="throughputs"):
        c.fit_from_records([(x[:3], y[:2], "w")])


def test_input_validation(trained) -> None:
    with pytest.raises(ValueError, match="columns"):
        trained.predict(np.zeros((2, N_FEATURES + 1)))
    with pytest.raises(ValueError, match="throughputs"):
        XGBModel().fit(np.zeros((3, 4)), np.ones(2))
    with pytest.raises(ValueError, match="group labels"):
        XGBModel().fit(np.zeros((3, 4)), np.ones(3), ["a"])
    with pytest.raises(ValueError, match="objective"):
        XGBModel(objective="reg:squarederror")
    assert trained.predict(np.zeros((0, N_FEATURES))).shape == (0,)
    one_row = trained.predict(np.zeros(N_FEATURES))  # a single 1-D row is accepted
    assert one_row.shape == (1,)
    assert trained.predict([np.zeros(N_FEATURES), np.ones(N_FEATURES)]).shape == (2,)


def test_transferred_groups_weigh_no_more_than_the_workloads_own_records() -> None:
    rng = np.random.default_rng(0)
    m = XGBModel(seed=0, min_samples=4, num_rounds=5)
    m.fit_from_records([(rng.random((60, 5)), rng.random(60), "other-a"),
                        (rng.random((20, 5)), rng.random(20), "other-b")])
    table, gid = {"other-a": 0, "other-b": 1}, np.array([0] * 60 + [1] * 20)
    assert m.focus_group is None
    np.testing.assert_allclose(m.group_weights(gid, table), [1.0, 1.0])  # pure transfer: all groups alike
    m.update(rng.random((16, 5)), rng.random(16), ["mine"] * 16)
    assert m.focus_group == "mine" and m.is_trained
    table["mine"] = 2
    gid = np.array([0] * 60 + [1] * 20 + [2] * 16)
    np.testing.assert_allclose(m.group_weights(gid, table), [0.2, 0.2, 1.0])  # 16 own vs 80 foreign
    gid = np.array([0] * 60 + [1] * 20 + [2] * 200)
    np.testing.assert_allclose(m.group_weights(gid, table), [1.0, 1.0, 1.0])  # own data outnumbers: capped at 1


def test_size_free_transfer_ranks_several_workloads_on_size_free_columns_only(tmp_path) -> None:
    from autosched.cost_model.features import FEATURE_NAMES, N_FEATURES, SIZE_FREE_COLUMNS

    assert SIZE_FREE_COLUMNS and all(FEATURE_NAMES[i].endswith(("_per_flop", "_fraction")) for i in SIZE_FREE_COLUMNS)
    rng = np.random.default_rng(0)
    free, sized = SIZE_FREE_COLUMNS[0], next(i for i in range(N_FEATURES) if i not in SIZE_FREE_COLUMNS)

    def records(n: int, scale: float):
        x = rng.random((n, N_FEATURES))
        x[:, sized] *= scale  # an extent that grows with the problem size
        return x, np.exp(-3 * x[:, free])  # lower loads-per-flop -> faster, whatever the size

    m = XGBModel(seed=0, min_samples=4, num_rounds=30, transfer_columns="size_free")
    xa, ya = records(80, 1.0)
    m.fit(xa, ya, ["one"] * 80)
    assert m.columns is None  # one workload: every column
    xb, yb = records(80, 8.0)
    m.fit(np.concatenate([xa, xb]), np.concatenate([ya, yb]), ["one"] * 80 + ["two"] * 80)
    assert m.columns == list(SIZE_FREE_COLUMNS)
    xc, yc = records(60, 3.0)
    p = m.predict(xc)
    assert pairwise_accuracy(yc, p) > 0.85
    xc2 = xc.copy()
    xc2[:, sized] = 1e6  # columns outside the size-free set cannot move the ranking
    np.testing.assert_allclose(m.predict(xc2), p)
    m.save(tmp_path / "m.json")
    back = XGBModel.load(tmp_path / "m.json")
    assert back.columns == m.columns
    np.testing.assert_allclose(back.predict(xc), p, rtol=1e-6)
    with pytest.raises(ValueError, match="transfer_columns"):
        XGBModel(transfer_columns="some")
    allc = XGBModel(seed=0, min_samples=4, num_rounds=5)  # the default: every column
    allc.fit(np.concatenate([xa, xb]), np.concatenate([ya, yb]), ["one"] * 80 + ["two"] * 80)
    assert allc.columns is None
