"""Simulated annealing over the neighbour graph of the config space.

Without a predictor, several chains walk on *measurements*: each batch moves every chain to a fresh
neighbour, and the Metropolis rule on the relative cost change ``log(c_new / c_cur)`` (scale free, so
one temperature fits microseconds and seconds alike) decides whether the chain follows. The temperature
decays per measured trial, and a chain occasionally restarts from the global best so the budget
concentrates where it pays off.

With a predictor it does what TVM's ``SimulatedAnnealingOptimizer`` does: many chains anneal on the
*predicted* scores (cheap), starting from the best measured configs and persisting across batches; the
best fresh configs visited are measured. Temperatures are relative to the spread of the scores because a
ranking model's scores have no fixed scale.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from autosched.search.base import Searcher
from autosched.space.knobs import Config


class AnnealingSearcher(Searcher):
    """Parallel-chain simulated annealing, on measured costs or on predicted scores."""

    name: ClassVar[str] = "annealing"
    OPTIONS: ClassVar[dict[str, tuple[Any, str]]] = {
        "n_chains": (8, "chains walking on measurements"),
        "t0": (0.3, "initial temperature, in units of log(cost ratio)"),
        "cooling": (0.99, "temperature factor per measured trial"),
        "t_min": (0.005, "temperature floor"),
        "restart_prob": (0.05, "per move: probability that a chain jumps back to the global best"),
        "model_chains": (128, "with a predictor: chains annealing on predicted scores"),
        "model_steps": (30, "with a predictor: annealing steps per batch"),
        "model_t0": (1.0, "with a predictor: initial temperature, in units of the score spread"),
        "eps_greedy": (0.05, "with a predictor: share of each batch drawn at random, unscored"),
        "diversity": (0.0, "with a predictor: weight of knob values new to the batch against score rank"),
    }

    @classmethod
    def _check_options(cls, opts: dict[str, Any]) -> None:
        super()._check_options(opts)
        for k in ("n_chains", "model_chains"):
            cls._require(opts[k] >= 1, k, "must be >= 1")
        cls._require(opts["model_steps"] >= 0, "model_steps", "must be >= 0")
        cls._require(0.0 < opts["cooling"] <= 1.0, "cooling", "must be in (0, 1]")
        for k in ("t0", "t_min", "model_t0"):
            cls._require(opts[k] >= 0.0, k, "must be >= 0")
        cls._require(0.0 <= opts["restart_prob"] <= 1.0, "restart_prob", "must be in [0, 1]")

    def _setup(self) -> None:
        k = self.options["n_chains"]
        self._chains: list[tuple[Config | None, float]] = [(None, math.inf)] * k
        self._parent: dict[Config, int] = {}
        self._turn = 0
        self._points: list[Config] | None = None  # model chains, kept across batches

    @property
    def temperature(self) -> float:
        o = self.options
        return max(o["t_min"], o["t0"] * o["cooling"] ** self.n_measured)

    # ---- on measurements -------------------------------------------------------------------------
    def _step_from(self, cur: Config, taken: set[Config]) -> Config | None:
        fresh = [c for c in self.space.neighbors(cur) if c not in taken and self._is_fresh(c)]
        if fresh:
            return fresh[int(self.rng.integers(len(fresh)))]
        for _ in range(16):  # the neighbourhood is used up: a longer jump
            c = self.space.mutate(cur, self.rng, n_knobs=2)
            if c not in taken and self._is_fresh(c):
                return c
        return None

    def _propose_measured(self, n: int) -> list[Config]:
        out: list[Config] = []
        taken: set[Config] = set()
        best = self.best[0]
        for j in range(n):
            k = (self._turn + j) % len(self._chains)
            cur = self._chains[k][0]
            if cur is not None and best is not None and self.rng.random() < self.options["restart_prob"]:
                cur = best
            c = self._step_from(cur, taken) if cur is not None else None
            if c is None:
                fresh = self._random_fresh(1, taken)
                if not fresh:
                    break
                c = fresh[0]
            out.append(c)
            taken.add(c)
            self._parent[c] = k
        self._turn = (self._turn + n) % len(self._chains)
        return out

    def _update(self, configs: list[Config], costs: list[float]) -> None:
        children: dict[int, tuple[Config, float]] = {}
        for c, cost in zip(configs, costs):
            k = self._parent.pop(c, None)
            if k is not None and (k not in children or cost < children[k][1]):
                children[k] = (c, cost)
        t = self.temperature
        for k, (c, cost) in children.items():
            cur, cur_cost = self._chains[k]
            if cur is None or not math.isfinite(cur_cost) or cost <= cur_cost:
                accept = math.isfinite(cost) or cur is None
            elif not math.isfinite(cost):
                accept = False
            else:
                delta = math.log(cost / cur_cost)
                accept = t > 0 and self.rng.random() < math.exp(-delta / t)
            if accept:
                self._chains[k] = (c, cost)

    # ---- on predicted scores ---------------------------------------------------------------------
    def _propose_model(self, n: int) -> list[Config]:
        o = self.options
        n_points = o["model_chains"]
        seeds = [c for c, _ in self._finite_measured()[: n_points // 2]]
        if self._points is None:
            self._points = []
        pts = list(dict.fromkeys(seeds + self._points))[:n_points]
        while len(pts) < n_points:
            c = self.space.sample_valid(self.rng)
            if c is None:
                break
            pts.append(c)
        if not pts:
            return []
        scores = self._score(pts)
        visited: dict[Config, float] = {c: s for c, s in zip(pts, scores) if self._is_fresh(c)}
        finite = scores[np.isfinite(scores)]
        scale = float(np.std(finite)) if finite.size > 1 else 0.0
        scale = scale if scale > 0 else 1.0
        for step in range(o["model_steps"]):
            t = o["model_t0"] * scale * (1.0 - step / max(o["model_steps"], 1))
            cand = self.space.mutate_batch(pts, self.rng)
            ok = np.array([self._valid(c) for c in cand])
            new_scores = np.full(len(cand), -np.inf)
            if ok.any():
                new_scores[ok] = self._score([c for c, v in zip(cand, ok) if v])
            with np.errstate(over="ignore", invalid="ignore"):
                gain = new_scores - scores
                prob = np.where(gain >= 0, 1.0, np.exp(gain / t) if t > 0 else 0.0)
            accept = ok & (self.rng.random(len(cand)) < np.nan_to_num(prob))
            for i in np.flatnonzero(accept):
                pts[i], scores[i] = cand[i], new_scores[i]
            for c, s, v in zip(cand, new_scores, ok):
                if v and c not in visited and self._is_fresh(c):
                    visited[c] = s
        self._points = pts
        return self._pick_guided(list(visited), np.fromiter(visited.values(), float, len(visited)), n)

    def _propose(self, n: int) -> list[Config]:
        return self._propose_measured(n) if self.predictor is None else self._propose_model(n)
