"""XGBoost ranking model over lowered-loop-nest features.

Why a ranker: the searcher only needs to know which candidates are faster than which, and absolute
throughputs of different operators span orders of magnitude. So labels are throughput normalized by
the best of its group (workload), and the objective is pairwise (``rank:pairwise``, default) or NDCG
(``rank:ndcg``, which wants integer relevance: we use per-group quantile levels) with one query group per
workload. Pairs are sampled uniformly per document (``pair_method="mean"``), which orders the whole
candidate list, as annealing and evolution need; ``"topk"`` focuses on the head of each group instead
(better top-k recall, worse global order). ``hist`` trees and a fixed seed make training deterministic.
When the training data holds several groups (warm start from other workloads' records, or one
model shared by a task scheduler), the ranker sees every feature column by default; the transferred
groups weigh no more than the focus workload's own records once it has some (``group_weights``).
``transfer_columns="size_free"`` restricts a multi-group model to the size-free columns instead.
``size_relative=True`` takes the columns that grow with the problem size relative to its flops
(`features.size_relative`); it is off by default, as it helped transfer on some records and hurt it
on others. Every column by default because transferred records picked better with them than with the
size-free ones (see docs/decisions/cost-model-transfer-columns.md).
One thread by default: OpenMP threads thrash when builders share the cores
(see docs/decisions/xgboost-one-thread.md).

Online updates retrain from scratch on all accumulated data by default (labels are renormalized as
groups find better schedules, so old trees would be fitted to stale labels); ``warm_start=True``
instead boosts ``update_rounds`` more trees on top of the current booster, which is cheaper per batch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import xgboost as xgb

from autosched.cost_model.base import CostModel, normalize_per_group
from autosched.cost_model.features import N_FEATURES, SIZE_FREE_COLUMNS, size_relative

OBJECTIVES = ("rank:pairwise", "rank:ndcg")


class XGBModel(CostModel):
    """XGBoost ranker; groups = workloads; labels = throughput / best throughput of the group."""

    kind: ClassVar[str] = "xgb"

    def __init__(
        self,
        *,
        seed: int = 0,
        min_samples: int = 32,
        objective: str = "rank:pairwise",
        num_rounds: int = 150,
        max_depth: int = 6,
        eta: float = 0.2,
        nthread: int = 1,
        max_bin: int = 64,
        pair_method: str = "mean",
        pairs_per_sample: int = 16,
        ndcg_levels: int = 16,
        warm_start: bool = False,
        update_rounds: int = 20,
        transfer_columns: str = "all",
        size_relative: bool = False,
        extra_params: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(seed=seed, min_samples=min_samples)
        if objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
        if num_rounds < 1 or update_rounds < 1:
            raise ValueError("num_rounds and update_rounds must be >= 1")
        if not 1 <= ndcg_levels <= 31:
            raise ValueError(f"ndcg_levels must be in [1, 31] (XGBoost's exponential gain), got {ndcg_levels}")
        self.objective = objective
        self.num_rounds = num_rounds
        self.max_depth = max_depth
        self.eta = eta
        self.nthread = nthread
        self.max_bin = max_bin
        if pair_method not in ("mean", "topk"):
            raise ValueError(f"pair_method must be 'mean' or 'topk', got {pair_method!r}")
        self.pair_method = pair_method
        self.pairs_per_sample = pairs_per_sample
        self.ndcg_levels = ndcg_levels
        self.warm_start = warm_start
        self.update_rounds = update_rounds
        if transfer_columns not in ("size_free", "all"):
            raise ValueError(f"transfer_columns must be 'size_free' or 'all', got {transfer_columns!r}")
        self.transfer_columns = transfer_columns
        self.size_relative = size_relative
        """Train and predict on `features.size_relative` columns (problem size taken out)."""
        self.columns: list[int] | None = None
        """Feature columns the booster was trained on (None: all of them)."""
        self.extra_params = dict(extra_params or {})
        self.booster: xgb.Booster | None = None

    # ---- training ------------------------------------------------------------------------------------
    @property
    def params(self) -> dict[str, Any]:
        return {
            "objective": self.objective,
            "tree_method": "hist",
            "max_depth": self.max_depth,
            "eta": self.eta,
            "min_child_weight": 0,  # ranking hessians are tiny: the default of 1 blocks every split
            "max_bin": self.max_bin,
            "nthread": self.nthread,
            "seed": self.seed,
            "lambdarank_pair_method": self.pair_method,
            "lambdarank_num_pair_per_sample": self.pairs_per_sample,
            "verbosity": 0,
            **self.extra_params,
        }

    def _labels(self, y: np.ndarray, groups: np.ndarray) -> np.ndarray:
        norm = normalize_per_group(y, groups)
        if self.objective != "rank:ndcg":
            return norm
        labels = np.zeros_like(norm)
        for g in np.unique(groups):
            m = np.flatnonzero(groups == g)
            ok = m[norm[m] > 0]
            if ok.size:
                rank = np.argsort(np.argsort(norm[ok], kind="stable"), kind="stable")
                labels[ok] = 1 + np.floor(rank / max(ok.size, 1) * (self.ndcg_levels - 1))
        return labels

    def group_weights(self, gid: np.ndarray, table: dict[Any, int]) -> np.ndarray:
        """One weight per group id (0..n-1). Transferred groups together weigh no more than the focus
        group's own records once it has some: warm-start data then guides the first batches, and the
        workload's own measurements take over as they come (records of another operator otherwise
        outnumber them and keep steering the search to what was fast *there*)."""
        w = np.ones(len(table))
        focus = table.get(self.focus_group) if self.focus_group is not None else None
        if focus is None:
            return w
        counts = np.bincount(gid, minlength=len(table)).astype(np.float64)
        own, foreign = counts[focus], counts.sum() - counts[focus]
        if foreign > 0:
            w[:] = min(1.0, own / foreign)
            w[focus] = 1.0
        return w

    def _select(self, x: np.ndarray) -> np.ndarray:
        if self.size_relative and x.shape[1] == N_FEATURES:
            x = size_relative(x)
        return x if self.columns is None else x[:, self.columns]

    def _dmatrix(self) -> xgb.DMatrix:
        table: dict[Any, int] = {}
        gid = np.array([table.setdefault(g, len(table)) for g in self._g], dtype=np.int64)
        multi = len(table) > 1 and self.transfer_columns == "size_free" and self._x.shape[1] == N_FEATURES
        self.columns = list(SIZE_FREE_COLUMNS) if multi else None
        order = np.argsort(gid, kind="stable")  # XGBoost wants each query group contiguous
        labels = self._labels(self._y, gid)
        return xgb.DMatrix(self._select(self._x[order]).astype(np.float32), label=labels[order], qid=gid[order],
                           weight=self.group_weights(gid, table), nthread=self.nthread)

    def _train(self, *, warm_start: bool) -> None:
        if self.n_samples < max(self.min_samples, 2):
            self.booster = None
            return
        dtrain = self._dmatrix()
        if warm_start and self.warm_start and self.booster is not None:
            self.booster = xgb.train(self.params, dtrain, self.update_rounds, xgb_model=self.booster)
        else:
            self.booster = xgb.train(self.params, dtrain, self.num_rounds)

    @property
    def is_trained(self) -> bool:
        return self.booster is not None

    def _predict(self, x: np.ndarray) -> np.ndarray:
        assert self.booster is not None
        x = self._select(x)
        if x.shape[1] != self.booster.num_features():
            raise ValueError(f"features have {x.shape[1]} columns, the model expects {self.booster.num_features()}")
        return self.booster.predict(xgb.DMatrix(x.astype(np.float32), nthread=self.nthread))

    # ---- persistence -----------------------------------------------------------------------------------
    _HYPER = (
        "objective",
        "num_rounds",
        "max_depth",
        "eta",
        "nthread",
        "max_bin",
        "pair_method",
        "pairs_per_sample",
        "ndcg_levels",
        "warm_start",
        "update_rounds",
        "transfer_columns",
        "size_relative",
        "extra_params",
    )

    def _meta(self) -> dict[str, Any]:
        return {
            **super()._meta(),
            "hyper": {k: getattr(self, k) for k in self._HYPER},
            "trained": self.is_trained,
            "n_features": self.n_features,
            "columns": self.columns,
            "xgboost": xgb.__version__,
        }

    @classmethod
    def _from_meta(cls, meta: dict[str, Any]) -> XGBModel:
        # models saved before `size_relative` existed were trained on absolute columns
        hyper = {"size_relative": False, **meta["hyper"]}
        return cls(seed=meta["seed"], min_samples=meta["min_samples"], **hyper)

    def _save_model(self, path: Path) -> None:
        if self.booster is not None:
            self.booster.save_model(str(path))
        else:
            path.write_text("{}")  # untrained: the sidecar says so

    def _load_model(self, path: Path, meta: dict[str, Any]) -> None:
        self.columns = meta.get("columns")
        if meta.get("trained"):
            self.booster = xgb.Booster(params={"nthread": self.nthread})
            self.booster.load_model(str(path))
        else:
            self.booster = None
