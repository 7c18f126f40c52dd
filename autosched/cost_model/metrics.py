"""Ranking-quality metrics for cost models: what a searcher needs from a model is the ORDER.

All take true throughputs (higher = better) and predicted scores (higher = better), and an optional
group label per row: pairs and top-k sets are only formed within a group (one workload), and the result
is averaged over groups (weighted by their number of pairs for pairwise accuracy).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

_BLOCK = 1024


def _groups(n: int, groups: Sequence[Hashable] | np.ndarray | None) -> list[np.ndarray]:
    if groups is None:
        return [np.arange(n)]
    labels = np.asarray(groups)
    if labels.shape[0] != n:
        raise ValueError(f"{n} rows but {labels.shape[0]} group labels")
    return [np.flatnonzero(labels == g) for g in np.unique(labels)]


def _check(y_true: Sequence[float], y_pred: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    t = np.asarray(y_true, dtype=np.float64).reshape(-1)
    p = np.asarray(y_pred, dtype=np.float64).reshape(-1)
    if t.shape != p.shape:
        raise ValueError(f"{t.shape[0]} true values but {p.shape[0]} predictions")
    return np.nan_to_num(t, nan=0.0), np.nan_to_num(p, nan=-1e300, neginf=-1e300, posinf=1e300)


def pairwise_accuracy(y_true, y_pred, groups=None) -> float:
    """Fraction of pairs with different true values that the prediction orders the same way.

    Tied predictions count one half (a constant model scores 0.5, as does a random one on average).
    Returns nan when no pair has distinct true values.
    """
    t, p = _check(y_true, y_pred)
    correct = total = 0.0
    for idx in _groups(t.shape[0], groups):
        tg, pg = t[idx], p[idx]
        for lo in range(0, idx.size, _BLOCK):
            dt = np.sign(tg[lo : lo + _BLOCK, None] - tg[None, :])
            dp = np.sign(pg[lo : lo + _BLOCK, None] - pg[None, :])
            mask = dt != 0
            total += mask.sum()
            correct += (dt == dp)[mask].sum() + 0.5 * ((dp == 0) & mask).sum()
    return float(correct / total) if total else float("nan")


def top_k_recall(y_true, y_pred, k: int, groups=None) -> float:
    """Fraction of the true top-k (per group) that also appear in the predicted top-k; mean over groups."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    t, p = _check(y_true, y_pred)
    out = []
    for idx in _groups(t.shape[0], groups):
        kk = min(k, idx.size)
        true_top = set(idx[np.argsort(-t[idx], kind="stable")[:kk]].tolist())
        pred_top = set(idx[np.argsort(-p[idx], kind="stable")[:kk]].tolist())
        out.append(len(true_top & pred_top) / kk)
    return float(np.mean(out))


def ndcg_at_k(y_true, y_pred, k: int, groups=None) -> float:
    """NDCG@k with the true throughput normalized by its group's best as the gain; mean over groups.

    Normalizing makes groups of very different speeds count equally. A group with no positive
    throughput contributes 1 (nothing could be ranked better or worse).
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    t, p = _check(y_true, y_pred)
    out = []
    for idx in _groups(t.shape[0], groups):
        gain = np.clip(t[idx], 0.0, None)
        if gain.max() <= 0:
            out.append(1.0)
            continue
        gain = gain / gain.max()
        kk = min(k, idx.size)
        disc = 1.0 / np.log2(np.arange(2, kk + 2))
        dcg = np.sum(gain[np.argsort(-p[idx], kind="stable")[:kk]] * disc)
        idcg = np.sum(np.sort(gain)[::-1][:kk] * disc)
        out.append(float(dcg / idcg))
    return float(np.mean(out))
