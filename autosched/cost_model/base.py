"""The cost-model interface: learn to rank candidate schedules from their features.

Features are fixed-width float vectors extracted from the *lowered* loop nest (one row per candidate),
so a model trained on one workload can rank another. Throughputs are "higher is better" (1 / seconds,
or FLOP/s; only ratios within a group matter) and 0 for failed candidates. A group is one workload:
throughputs of different operators are not comparable, so models normalize and rank within groups.

Everything that must behave the same in every model lives here: input sanitation (NaN/inf features are
replaced, never passed on), group-id mapping, data accumulation for online updates, the "too little data
to say anything" fallback (deterministic pseudo-random scores, so search degrades to random search rather
than to a constant ranking), and save/load dispatch through a sidecar metadata file.
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

FEATURE_CLIP = 1e30
"""+-inf features become +-FEATURE_CLIP: "huge" keeps its order, but stays finite for tree splits."""

FeatureInput = np.ndarray | Sequence[np.ndarray]


def sanitize_features(features: FeatureInput) -> np.ndarray:
    """A 2-D float64 array with NaN -> 0 and +-inf -> +-FEATURE_CLIP; a single 1-D row becomes 2-D."""
    if isinstance(features, np.ndarray):
        x = features
    elif len(features) == 0:
        return np.zeros((0, 0))
    else:
        x = np.stack([np.asarray(f, dtype=np.float64).reshape(-1) for f in features])
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 1:
        x = x.reshape(1, -1)
    if x.ndim != 2:
        raise ValueError(f"features must be 2-D (one row per candidate), got shape {x.shape}")
    return np.nan_to_num(x, nan=0.0, posinf=FEATURE_CLIP, neginf=-FEATURE_CLIP)


def sanitize_throughputs(throughputs: Sequence[float] | np.ndarray, n: int) -> np.ndarray:
    """Throughputs as float64; NaN/inf/negative (failures, garbage) become 0."""
    y = np.asarray(throughputs, dtype=np.float64).reshape(-1)
    if y.shape[0] != n:
        raise ValueError(f"{n} feature rows but {y.shape[0]} throughputs")
    return np.where(np.isfinite(y) & (y > 0), y, 0.0)


def group_ids(groups: Sequence[Hashable] | np.ndarray | None, n: int) -> np.ndarray:
    """Arbitrary group labels (workload keys, ints) -> dense int ids; None -> one group."""
    if groups is None:
        return np.zeros(n, dtype=np.int64)
    labels = list(groups.tolist() if isinstance(groups, np.ndarray) else groups)
    if len(labels) != n:
        raise ValueError(f"{n} feature rows but {len(labels)} group labels")
    table: dict[Any, int] = {}
    return np.array([table.setdefault(g, len(table)) for g in labels], dtype=np.int64)


def normalize_per_group(y: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Throughput / best throughput of its group, in [0, 1]; a group with no success is all 0."""
    out = np.zeros_like(y)
    for g in np.unique(groups):
        m = groups == g
        best = y[m].max()
        if best > 0:
            out[m] = y[m] / best
    return out


def hash_scores(x: np.ndarray, seed: int) -> np.ndarray:
    """Deterministic pseudo-random scores in [0, 1), one per row, a pure function of (seed, row).

    Used before a model has enough data: the same candidate always gets the same score (so save/load
    and repeated calls agree) while distinct candidates are ranked at random.
    """
    out = np.empty(x.shape[0])
    salt = str(int(seed)).encode()
    for i, row in enumerate(np.ascontiguousarray(x, dtype=np.float64)):
        h = hashlib.blake2b(row.tobytes(), digest_size=8, key=salt).digest()
        out[i] = int.from_bytes(h, "little") / 2**64
    return out


class CostModel(ABC):
    """Predicts a "higher is faster" score per feature row; trained and updated on measured throughputs."""

    kind: ClassVar[str] = "base"
    _registry: ClassVar[dict[str, type[CostModel]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.kind != "base":
            CostModel._registry[cls.kind] = cls

    def __init__(self, *, seed: int = 0, min_samples: int = 32) -> None:
        if min_samples < 0:
            raise ValueError(f"min_samples must be >= 0, got {min_samples}")
        self.seed = int(seed)
        self.min_samples = int(min_samples)
        self._x = np.zeros((0, 0))
        self._y = np.zeros(0)
        self._g: list[Hashable] = []
        self.focus_group: Hashable | None = None
        """The group (workload) whose candidates are being ranked: the last one `update` saw. Models
        may weigh other groups' (transferred) records down as this group's own records accumulate."""

    # ---- data ----------------------------------------------------------------------------------------
    @property
    def n_samples(self) -> int:
        return int(self._y.shape[0])

    @property
    def n_features(self) -> int | None:
        return int(self._x.shape[1]) if self.n_samples else None

    def _check_width(self, x: np.ndarray) -> None:
        if self.n_features is not None and x.shape[0] and x.shape[1] != self.n_features:
            raise ValueError(f"features have {x.shape[1]} columns, the model was trained on {self.n_features}")

    def _append(self, features: FeatureInput, throughputs: Any, groups: Any) -> None:
        x = sanitize_features(features)
        y = sanitize_throughputs(throughputs, x.shape[0])
        g = list(groups.tolist() if isinstance(groups, np.ndarray) else groups) if groups is not None else None
        if g is not None:
            g = [v.item() if isinstance(v, np.generic) else v for v in g]
        if g is not None and len(g) != x.shape[0]:
            raise ValueError(f"{x.shape[0]} feature rows but {len(g)} group labels")
        if not x.shape[0]:
            return
        self._check_width(x)
        self._x = x if self.n_samples == 0 else np.concatenate([self._x, x])
        self._y = np.concatenate([self._y, y])
        self._g.extend(g if g is not None else [None] * x.shape[0])

    def count_group(self, group: Hashable) -> int:
        """How many accumulated records belong to `group`."""
        return sum(1 for g in self._g if g == group)

    def keep_only_group(self, group: Hashable) -> None:
        """Forget every other group's records and retrain: transferred records that were found to
        mislead on this group's own measurements must not keep steering its search."""
        keep = np.array([g == group for g in self._g], dtype=bool)
        if keep.all():
            return
        if not keep.any():
            self._clear()
        else:
            self._x, self._y = self._x[keep], self._y[keep]
            self._g = [g for g, k in zip(self._g, keep) if k]
        self._train(warm_start=False)

    def _clear(self) -> None:
        self._x, self._y, self._g = np.zeros((0, 0)), np.zeros(0), []

    # ---- interface -------------------------------------------------------------------------------------
    def fit(self, features: FeatureInput, throughputs: Any, groups: Any = None) -> None:
        """Train from scratch on exactly this data (previous data is dropped)."""
        self._clear()
        self._append(features, throughputs, groups)
        self._train(warm_start=False)

    def update(self, features: FeatureInput, throughputs: Any, groups: Any = None) -> None:
        """Online step after a measured batch: add the batch to the accumulated data and retrain."""
        self._append(features, throughputs, groups)
        if self._g:
            self.focus_group = self._g[-1]
        self._train(warm_start=True)

    def fit_from_records(self, records: Iterable[tuple[Any, Any, Hashable]]) -> None:
        """Warm start from stored records: (features, throughput(s), group id) triples.

        A triple holds one candidate (1-D features, scalar throughput) or one workload's batch (2-D
        features, 1-D throughputs); the group id is typically the workload key.
        """
        xs, ys, gs = [], [], []
        for features, throughput, group in records:
            x = sanitize_features(np.asarray(features, dtype=np.float64))
            y = np.atleast_1d(np.asarray(throughput, dtype=np.float64))
            if y.shape[0] != x.shape[0]:
                raise ValueError(f"record with {x.shape[0]} feature rows but {y.shape[0]} throughputs")
            xs.append(x)
            ys.append(y)
            gs.extend([group] * x.shape[0])
        if not xs:
            self._clear()
            self._train(warm_start=False)
            return
        self.fit(np.concatenate(xs), np.concatenate(ys), gs)

    def predict(self, features: FeatureInput) -> np.ndarray:
        """One score per row, higher = predicted faster. Random-ish until the model is trained."""
        x = sanitize_features(features)
        if x.shape[0] == 0:
            return np.zeros(0)
        if not self.is_trained:
            return hash_scores(x, self.seed)
        self._check_width(x)
        return np.asarray(self._predict(x), dtype=np.float64)

    @property
    @abstractmethod
    def is_trained(self) -> bool:
        """True once predictions carry information (enough samples seen)."""

    @abstractmethod
    def _train(self, *, warm_start: bool) -> None:
        """(Re)train on the accumulated data in ``self._x``, ``self._y``, ``self._g``."""

    @abstractmethod
    def _predict(self, x: np.ndarray) -> np.ndarray: ...

    # ---- persistence ---------------------------------------------------------------------------------
    @staticmethod
    def meta_path(path: str | Path) -> Path:
        return Path(str(path) + ".meta.json")

    @staticmethod
    def data_path(path: str | Path) -> Path:
        return Path(str(path) + ".data.npz")

    def _meta(self) -> dict[str, Any]:
        return {"model": self.kind, "format": 1, "seed": self.seed, "min_samples": self.min_samples}

    def save(self, path: str | Path, *, include_data: bool = True) -> None:
        """Write the model to ``path`` plus ``path.meta.json`` (and ``path.data.npz`` with the training
        data, so a reloaded model can keep updating online without forgetting)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._save_model(path)
        self.meta_path(path).write_text(json.dumps(self._meta(), indent=1, sort_keys=True))
        if include_data:
            groups = json.dumps(self._g)  # workload keys are strings or ints: JSON keeps their type
            np.savez(self.data_path(path), x=self._x, y=self._y, groups=np.array(groups))

    @classmethod
    def load(cls, path: str | Path) -> CostModel:
        """Load any saved model; the sidecar says which class (``CostModel.load`` dispatches)."""
        meta = json.loads(cls.meta_path(path).read_text())
        target = CostModel._registry.get(meta.get("model", ""))
        if target is None:
            raise ValueError(f"{path}: unknown model kind {meta.get('model')!r}")
        if cls is not CostModel and not issubclass(target, cls):
            raise ValueError(f"{path} holds a {meta['model']!r} model, not a {cls.kind!r} one")
        model = target._from_meta(meta)
        data = cls.data_path(path)
        if data.exists():
            with np.load(data) as z:
                model._x, model._y, model._g = z["x"], z["y"], json.loads(str(z["groups"]))
        model._load_model(Path(path), meta)
        return model

    @classmethod
    def _from_meta(cls, meta: dict[str, Any]) -> CostModel:
        return cls(seed=meta["seed"], min_samples=meta["min_samples"])

    @abstractmethod
    def _save_model(self, path: Path) -> None: ...

    @abstractmethod
    def _load_model(self, path: Path, meta: dict[str, Any]) -> None: ...
