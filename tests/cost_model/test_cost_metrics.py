"""Ranking metrics against hand-computed values and a brute-force reference."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autosched.cost_model import ndcg_at_k, pairwise_accuracy, top_k_recall


def test_pairwise_accuracy_extremes() -> None:
    y = np.array([1.0, 2.0, 3.0, 4.0])
    assert pairwise_accuracy(y, y * 10) == 1.0
    assert pairwise_accuracy(y, -y) == 0.0
    assert pairwise_accuracy(y, np.zeros(4)) == 0.5  # ties in the prediction count one half
    assert math.isnan(pairwise_accuracy(np.ones(3), np.arange(3)))  # no pair to judge


def test_pairwise_accuracy_ignores_cross_group_pairs() -> None:
    y = np.array([1.0, 2.0, 100.0, 200.0])
    p = np.array([10.0, 20.0, 1.0, 2.0])  # right within groups, wrong across them
    assert pairwise_accuracy(y, p, ["a", "a", "b", "b"]) == 1.0
    assert pairwise_accuracy(y, p) < 1.0


def _brute_pairwise(y, p, groups) -> float:
    good = total = 0.0
    for i, j in itertools.combinations(range(len(y)), 2):
        if groups[i] != groups[j] or y[i] == y[j]:
            continue
        total += 1
        good += 0.5 if p[i] == p[j] else float((y[i] > y[j]) == (p[i] > p[j]))
    return good / total if total else float("nan")


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 40), st.integers(1, 3), st.integers(0, 2**31))
def test_pairwise_accuracy_matches_brute_force(n: int, n_groups: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 5, n).astype(float)  # ties in the truth
    p = rng.integers(0, 5, n).astype(float)  # ties in the prediction
    g = rng.integers(0, n_groups, n)
    ref = _brute_pairwise(y, p, g)
    got = pairwise_accuracy(y, p, g)
    assert (math.isnan(ref) and math.isnan(got)) or got == pytest.approx(ref)


def test_top_k_recall() -> None:
    y = np.array([5.0, 4.0, 3.0, 2.0, 1.0])
    assert top_k_recall(y, y, 2) == 1.0
    assert top_k_recall(y, -y, 2) == 0.0
    assert top_k_recall(y, np.array([5.0, 1.0, 4.0, 2.0, 3.0]), 2) == 0.5
    assert top_k_recall(y, -y, 10) == 1.0  # k larger than the group: everything is found
    assert top_k_recall(y, np.array([1, 2, 3, 2, 1.0]), 1, groups=[0, 0, 1, 1, 1]) == 0.5
    with pytest.raises(ValueError):
        top_k_recall(y, y, 0)


def test_ndcg_at_k() -> None:
    y = np.array([3.0, 2.0, 1.0, 0.0])
    assert ndcg_at_k(y, y, 4) == pytest.approx(1.0)
    # predicted order: item 1, item 0 -> gains (2/3, 1) at ranks 1, 2 vs ideal (1, 2/3)
    p = np.array([1.0, 2.0, 0.0, -1.0])
    expected = (2 / 3 + 1 / math.log2(3)) / (1 + (2 / 3) / math.log2(3))
    assert ndcg_at_k(y, p, 2) == pytest.approx(expected)
    assert ndcg_at_k(y, -y, 4) < 1.0
    assert ndcg_at_k(np.zeros(3), np.arange(3), 2) == 1.0  # nothing to rank
    with pytest.raises(ValueError):
        ndcg_at_k(y, y[:3], 2)
