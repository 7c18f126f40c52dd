"""Searchers over a :class:`~autosched.schedule.knobs.ConfigSpace`, their registry, and the task scheduler."""

from autosched.search.annealing import AnnealingSearcher
from autosched.search.base import Predictor, Searcher
from autosched.search.genetic import GeneticSearcher
from autosched.search.grid import GridSearcher
from autosched.search.random_search import RandomSearcher
from autosched.search.registry import SEARCHERS, available, make_searcher, searcher_class
from autosched.search.rl import RLSearcher
from autosched.search.task_scheduler import TaskScheduler

__all__ = [
    "SEARCHERS",
    "AnnealingSearcher",
    "GeneticSearcher",
    "GridSearcher",
    "Predictor",
    "RLSearcher",
    "RandomSearcher",
    "Searcher",
    "TaskScheduler",
    "available",
    "make_searcher",
    "searcher_class",
]
