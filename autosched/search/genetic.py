"""Evolutionary search: selection, uniform crossover and knob mutation, with elitism.

Without a predictor it is a steady-state GA on *measurements*: the breeding pool is the ``n_elite`` best
configs ever measured (elitism: they are never lost) plus the most recently measured ones (the current
generation), so the pool moves with the search instead of freezing on early winners. Parents are picked
by tournament or fitness-proportional selection (fitness = normalized throughput, best cost / cost).

With a predictor it follows Ansor's evolutionary search: a population seeded with the best measured
configs and random samples evolves for a few generations on *predicted* scores (fitness-proportional
selection, crossover, mutation, elites carried over), and the best fresh configs seen are measured.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from autosched.search.base import Searcher
from autosched.space.knobs import Config


class GeneticSearcher(Searcher):
    """Genetic algorithm on measured costs, or Ansor-style evolution on predicted scores."""

    name: ClassVar[str] = "genetic"
    OPTIONS: ClassVar[dict[str, tuple[Any, str]]] = {
        "population": (32, "breeding pool size on measurements"),
        "n_elite": (8, "best measured configs always kept in the pool (elitism)"),
        "selection": ("tournament", "'tournament' or 'proportional' (fitness-proportional)"),
        "tournament_size": (3, "contestants per tournament"),
        "crossover_prob": (0.7, "probability that a child is a crossover of two parents (else a copy)"),
        "mutation_prob": (0.85, "probability that a child gets at least one knob mutated"),
        "min_population": (6, "measure random configs until this many finite measurements exist"),
        "model_population": (256, "with a predictor: population evolved on predicted scores"),
        "model_generations": (4, "with a predictor: generations per batch"),
        "model_elite": (16, "with a predictor: best-scored individuals carried to the next generation"),
        "eps_greedy": (0.05, "with a predictor: share of each batch drawn at random, unscored"),
        "diversity": (0.0, "with a predictor: weight of knob values new to the batch against score rank"),
    }

    @classmethod
    def _check_options(cls, opts: dict[str, Any]) -> None:
        super()._check_options(opts)
        cls._require(
            opts["selection"] in ("tournament", "proportional"),
            "selection",
            "must be tournament|proportional",
        )
        for k in ("population", "tournament_size", "model_population", "min_population"):
            cls._require(opts[k] >= 1, k, "must be >= 1")
        for k in ("n_elite", "model_generations", "model_elite"):
            cls._require(opts[k] >= 0, k, "must be >= 0")
        for k in ("crossover_prob", "mutation_prob"):
            cls._require(0.0 <= opts[k] <= 1.0, k, "must be in [0, 1]")

    def _setup(self) -> None:
        self._recent: list[tuple[Config, float]] = []

    # ---- shared genetic operators ----------------------------------------------------------------
    def _select(self, fitness: np.ndarray, k: int) -> np.ndarray:
        """Indices of ``k`` parents; fitness is higher-better and may contain zeros (failures)."""
        n = len(fitness)
        if self.options["selection"] == "tournament":
            contestants = self.rng.integers(n, size=(k, min(self.options["tournament_size"], n)))
            return contestants[np.arange(k), np.argmax(fitness[contestants], axis=1)]
        w = np.clip(fitness, 0.0, None) + 1e-12
        return self.rng.choice(n, size=k, p=w / w.sum())

    def _breed(self, pool: list[Config], fitness: np.ndarray, k: int, taken: set[Config]) -> list[Config]:
        """Up to ``k`` fresh, valid, distinct children of ``pool``."""
        o = self.options
        out: list[Config] = []
        for _ in range(4 * k):
            if len(out) == k:
                break
            i, j = self._select(fitness, 2)
            child = pool[i]
            if self.rng.random() < o["crossover_prob"]:
                child = self.space.crossover(pool[i], pool[j], self.rng)
            if self.rng.random() < o["mutation_prob"] or child in taken or not self._is_fresh(child):
                for _ in range(8):
                    if child not in taken and self._is_fresh(child):
                        break
                    child = self.space.mutate(child, self.rng)
            if child not in taken and self._is_fresh(child):
                out.append(child)
                taken.add(child)
        return out

    # ---- on measurements -------------------------------------------------------------------------
    def _update(self, configs: list[Config], costs: list[float]) -> None:
        self._recent.extend(zip(configs, costs))
        self._recent = self._recent[-self.options["population"] :]

    def _pool(self) -> tuple[list[Config], np.ndarray]:
        elite = self._finite_measured()[: self.options["n_elite"]]
        members = dict(elite)
        for c, cost in reversed(self._recent):
            if len(members) >= max(self.options["population"], len(elite)):
                break
            members.setdefault(c, cost)
        best = self.best[1]
        fitness = np.array([best / v if math.isfinite(v) else 0.0 for v in members.values()])
        return list(members), fitness

    def _propose_measured(self, n: int) -> list[Config]:
        if len(self._finite_measured()) < self.options["min_population"]:
            return []  # base tops up with random configs
        pool, fitness = self._pool()
        return self._breed(pool, fitness, n, set())

    # ---- on predicted scores (Ansor) ---------------------------------------------------------------
    def _propose_model(self, n: int) -> list[Config]:
        o = self.options
        size = o["model_population"]
        pop = [c for c, _ in self._finite_measured()[: size // 2]]
        for _ in range(size - len(pop)):
            c = self.space.sample_valid(self.rng)
            if c is not None:
                pop.append(c)
        pop = list(dict.fromkeys(pop))
        if not pop:
            return []
        scores = self._score(pop)
        seen: dict[Config, float] = {c: s for c, s in zip(pop, scores) if self._is_fresh(c)}
        for _ in range(o["model_generations"]):
            finite = scores[np.isfinite(scores)]
            lo, hi = (finite.min(), finite.max()) if finite.size else (0.0, 1.0)
            fitness = np.where(np.isfinite(scores), (scores - lo) / (hi - lo) if hi > lo else 1.0, 0.0)
            elite_idx = np.argsort(-scores, kind="stable")[: o["model_elite"]]
            nxt = [pop[i] for i in elite_idx]
            taken = set(nxt)
            children = self._breed_unmeasured(pop, fitness, size - len(nxt), taken)
            nxt_scores = np.concatenate([scores[elite_idx], self._score(children)])
            pop, scores = nxt + children, nxt_scores
            for c, s in zip(children, nxt_scores[len(nxt) :]):
                if self._is_fresh(c):
                    seen[c] = s
        return self._pick_guided(list(seen), np.fromiter(seen.values(), float, len(seen)), n)

    def _breed_unmeasured(self, pool: list[Config], fitness: np.ndarray, k: int, taken: set[Config]) -> list[Config]:
        """Children that need only be valid and new to this generation (they may be measured already:
        a measured parent's offspring often lead further, as in Ansor). Vectorized: a generation is
        hundreds of children and this runs several generations per batch."""
        if k <= 0:
            return []
        o = self.options
        p = np.asarray(pool, dtype=np.int64).reshape(len(pool), len(self.space.dims))
        parents = self._select(fitness, 2 * k).reshape(k, 2)
        a, b = p[parents[:, 0]], p[parents[:, 1]]
        cross = (self.rng.random(k) < o["crossover_prob"])[:, None] & (self.rng.random(a.shape) < 0.5)
        children = np.where(cross, b, a)
        mutate = np.flatnonzero(self.rng.random(k) < o["mutation_prob"])
        if mutate.size:
            children[mutate] = np.asarray(self.space.mutate_batch(children[mutate].tolist(), self.rng))
        out: list[Config] = []
        for child in map(tuple, children.tolist()):
            if child in taken:  # a clone: one more mutation gives it a chance to be new
                child = self.space.mutate(child, self.rng)
            if child not in taken and self._valid(child):
                out.append(child)
                taken.add(child)
        return out

    def _propose(self, n: int) -> list[Config]:
        return self._propose_measured(n) if self.predictor is None else self._propose_model(n)
