"""Random search: the baseline every other searcher must beat, and a strong one on rugged spaces.

Without a predictor it samples fresh configs uniformly. With one it becomes "random sampling + model
filtering": draw many fresh candidates, keep the best predicted, plus an epsilon-greedy random share so
a wrong model cannot starve regions it undervalues.
"""

from __future__ import annotations

from typing import Any, ClassVar

from autosched.search.base import Searcher
from autosched.space.knobs import Config


class RandomSearcher(Searcher):
    """Uniform sampling without replacement; model-filtered when a predictor is given."""

    name: ClassVar[str] = "random"
    OPTIONS: ClassVar[dict[str, tuple[Any, str]]] = {
        "n_candidates": (512, "with a predictor: fresh random candidates scored per batch (at least 4 n)"),
        "eps_greedy": (0.05, "with a predictor: share of each batch drawn at random, unscored"),
        "diversity": (0.0, "with a predictor: weight of knob values new to the batch against score rank"),
    }

    @classmethod
    def _check_options(cls, opts: dict[str, Any]) -> None:
        super()._check_options(opts)
        cls._require(opts["n_candidates"] >= 1, "n_candidates", "must be >= 1")

    def _propose(self, n: int) -> list[Config]:
        if self.predictor is None:
            return self._random_fresh(n)
        candidates = self._random_fresh(max(self.options["n_candidates"], 4 * n))
        return self._pick_guided(candidates, None, n)
