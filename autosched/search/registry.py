"""Searcher names -> classes, so a tuner, the CLI and the HTTP API pick a searcher by a string.

The table is a plain module-level dict built from imports (no self-registration side effects), so a
remote worker that imports this module gets exactly the same table.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from autosched.search.annealing import AnnealingSearcher
from autosched.search.base import Predictor, Searcher
from autosched.search.genetic import GeneticSearcher
from autosched.search.grid import GridSearcher
from autosched.search.random_search import RandomSearcher
from autosched.search.rl import RLSearcher
from autosched.space.knobs import ConfigSpace

SEARCHERS: Mapping[str, type[Searcher]] = {
    cls.name: cls for cls in (RandomSearcher, GridSearcher, AnnealingSearcher, GeneticSearcher, RLSearcher)
}


def searcher_class(name: str) -> type[Searcher]:
    try:
        return SEARCHERS[name]
    except KeyError:
        raise ValueError(f"unknown searcher {name!r}; valid names: {sorted(SEARCHERS)}") from None


def make_searcher(
    name: str,
    space: ConfigSpace,
    *,
    seed: int = 0,
    predictor: Predictor | None = None,
    options: Mapping[str, Any] | None = None,
) -> Searcher:
    return searcher_class(name)(space, seed=seed, predictor=predictor, options=options)


def available() -> list[str]:
    return sorted(SEARCHERS)
