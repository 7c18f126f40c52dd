"""The baseline model: random scores, so "model-guided" search with it is random search.

Scores are a deterministic hash of (seed, feature row) rather than draws from a stream: the same
candidate always gets the same score, which keeps experiments reproducible regardless of call order and
makes save/load exact. It needs no training and is always "trained".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from autosched.cost_model.base import CostModel, hash_scores


class RandomModel(CostModel):
    """Uniform pseudo-random scores in [0, 1); ignores training data (but accumulates it like any model)."""

    kind: ClassVar[str] = "random"

    def __init__(self, *, seed: int = 0, min_samples: int = 0) -> None:
        super().__init__(seed=seed, min_samples=min_samples)

    @property
    def is_trained(self) -> bool:
        return True

    def _train(self, *, warm_start: bool) -> None:
        return None

    def _predict(self, x: np.ndarray) -> np.ndarray:
        return hash_scores(x, self.seed)

    def _save_model(self, path: Path) -> None:
        path.write_text('{"model": "random"}')

    def _load_model(self, path: Path, meta: dict[str, Any]) -> None:
        return None
