"""Searchers over a :class:`~autosched.space.knobs.ConfigSpace` and their registry."""

from autosched.search.annealing import AnnealingSearcher
from autosched.search.base import Predictor, Searcher
from autosched.search.genetic import GeneticSearcher
from autosched.search.grid import GridSearcher
from autosched.search.random_search import RandomSearcher
from autosched.search.registry import SEARCHERS, available, make_searcher, searcher_class
from autosched.search.rl import RLSearcher

__all__ = [
    "SEARCHERS",
    "AnnealingSearcher",
    "GeneticSearcher",
    "GridSearcher",
    "Predictor",
    "RLSearcher",
    "RandomSearcher",
    "Searcher",
    "available",
    "make_searcher",
    "searcher_class",
]
