"""The one interface every searcher implements, and the bookkeeping they all need.

A searcher proposes a batch of configs and is told their measured costs; measurement happens outside
(builders and runners), so a searcher is pure logic that can be tested against a simulated objective.

The base class owns what must be identical across searchers, so that subclasses cannot get it wrong:
  * proposals are distinct, in bounds, valid, and never already measured or outstanding;
  * short batches are topped up with random fresh configs, and exhaustion is detected exactly on
    small spaces (by enumerating what is left) so tuner loops stop cleanly;
  * failed measurements (+inf, NaN) are recorded and never become the best;
  * model-guided selection (rank many candidates with the predictor, keep the best, plus an
    epsilon-greedy random share as in Ansor) is shared by every model-guided searcher;
  * options are validated against the class's ``OPTIONS`` table.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from autosched.space.knobs import Config, ConfigSpace

Predictor = Callable[[list[Config]], np.ndarray]
"""Scores candidate configs; higher means predicted faster (e.g. a cost model over lowered features)."""

ENUMERATE_REMAINING_LIMIT = 200_000
"""Spaces up to this size are enumerated when random sampling stops finding fresh configs."""

_VALID_CACHE_LIMIT = 1_000_000

DIVERSITY_POOL_FACTOR = 4
"""With the ``diversity`` option, a guided batch of k is picked from the 4k best-scored candidates."""

UNBUILDABLE_SCORE = -1e9
"""What a predictor scores a config whose schedule fails to instantiate (the tuner's `_predict`)."""

RANDOM_BUILDABLE_POOL = 4
"""A random batch of k while the model knows nothing is drawn from 4k random configs that build."""


class Searcher(ABC):
    """Propose batches of configs, learn from their costs (seconds; lower is better; +inf = failed)."""

    name: ClassVar[str] = "base"
    OPTIONS: ClassVar[dict[str, tuple[Any, str]]] = {}
    """Option name -> (default, description). Subclasses list every option they read."""

    def __init__(
        self,
        space: ConfigSpace,
        *,
        seed: int,
        predictor: Predictor | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        self.space = space
        self.seed = int(seed)
        self.rng = np.random.default_rng(self.seed)
        self.predictor = predictor
        self.explore_floor = 0.0
        """Least share of a guided batch drawn at random; the tuner raises it while the predictor
        knows only other workloads' records (unvalidated transfer), so one batch cannot all go
        where a misleading model points, and to 1 (no guided picks) while it knows nothing."""
        self.options: dict[str, Any] = self._resolve_options(options or {})
        self._measured: dict[Config, float] = {}
        self._history: list[tuple[Config, float]] = []
        self._pending: set[Config] = set()
        self._invalid: set[Config] = set()
        self._valid_cache: dict[Config, bool] = {}
        self._best: tuple[Config | None, float] = (None, math.inf)
        self._exhausted = False
        self._seeds: list[Config] = []
        self._setup()

    # ---- options -------------------------------------------------------------------------------
    @classmethod
    def _resolve_options(cls, given: Mapping[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(given) - set(cls.OPTIONS))
        if unknown:
            raise ValueError(
                f"unknown option {unknown[0]!r} for searcher {cls.name!r}; valid options: {sorted(cls.OPTIONS)}"
            )
        out = {k: default for k, (default, _) in cls.OPTIONS.items()}
        for k, v in given.items():
            default = cls.OPTIONS[k][0]
            if isinstance(default, bool):
                ok = isinstance(v, bool)
            elif isinstance(default, int):
                ok = isinstance(v, int | np.integer) and not isinstance(v, bool)
            elif isinstance(default, float):
                ok = isinstance(v, int | float | np.number) and not isinstance(v, bool)
            else:
                ok = isinstance(v, type(default))
            if not ok:
                raise ValueError(f"option {k!r} of searcher {cls.name!r} expects {type(default).__name__}, got {v!r}")
            out[k] = float(v) if isinstance(default, float) else v
        cls._check_options(out)
        return out

    @classmethod
    def _check_options(cls, opts: dict[str, Any]) -> None:
        """Range checks; subclasses extend. Raises ValueError naming the option."""
        if "eps_greedy" in opts and not 0.0 <= opts["eps_greedy"] <= 1.0:
            raise ValueError(f"option 'eps_greedy' must be in [0, 1], got {opts['eps_greedy']}")
        if "diversity" in opts and not opts["diversity"] >= 0.0:
            raise ValueError(f"option 'diversity' must be >= 0, got {opts['diversity']}")

    @staticmethod
    def _require(cond: bool, option: str, message: str) -> None:
        if not cond:
            raise ValueError(f"option {option!r} {message}")

    @classmethod
    def describe_options(cls) -> str:
        return "\n".join(f"{k} (default {d!r}): {desc}" for k, (d, desc) in cls.OPTIONS.items())

    # ---- public interface ----------------------------------------------------------------------
    def add_seeds(self, configs: Iterable[Sequence[int]]) -> None:
        """Configs to propose before anything else (a space's rule-derived starting points).

        They go through the same freshness and validity filter as every proposal, so a seed already
        measured (a resumed run) or invalid on this workload is skipped, never measured twice.
        """
        for c in configs:
            c = self.space.check(c)
            if c not in self._seeds:
                self._seeds.append(c)

    def _take_seeds(self, n: int) -> list[Config]:
        """Up to ``n`` fresh seeds, in the order they were added."""
        out: list[Config] = []
        while self._seeds and len(out) < n:
            c = self._seeds.pop(0)
            if c not in out and self._is_fresh(c):
                out.append(c)
        return out

    def propose(self, n: int) -> list[Config]:
        """Up to ``n`` distinct, valid configs never measured nor outstanding.

        Fewer than ``n`` only when the space (nearly) ran out of fresh valid configs.
        """
        if n < 0:
            raise ValueError(f"propose(n) needs n >= 0, got {n}")
        if n == 0 or self.exhausted:
            return []
        out = self._take_seeds(n)
        chosen = set(out)
        guided = len(out) < n and self.explore_floor < 1.0  # a floor of 1: the whole batch at random
        if not guided and len(out) < n and self.predictor is not None:
            out.extend(self._random_buildable(n - len(out), chosen))
            chosen.update(out)
        for c in (self._propose(n - len(out)) if guided else ()):
            if len(out) == n:
                break
            c = tuple(int(i) for i in c)
            if c not in chosen and self._is_fresh(c):
                out.append(c)
                chosen.add(c)
        if len(out) < n:
            out.extend(self._random_fresh(n - len(out), chosen))
        self._pending.update(out)
        return out

    def update(self, configs: Sequence[Config], costs: Sequence[float]) -> None:
        """Record measured costs. Configs this searcher did not propose (a warm start) are welcome."""
        if len(configs) != len(costs):
            raise ValueError(f"{len(configs)} configs but {len(costs)} costs")
        clean_configs: list[Config] = []
        clean_costs: list[float] = []
        for c, cost in zip(configs, costs):
            c = self.space.check(c)
            cost = float(cost)
            if math.isnan(cost):
                cost = math.inf
            if cost <= 0:
                raise ValueError(f"cost of {c} is {cost}; costs are seconds (> 0) or inf for a failure")
            self._pending.discard(c)
            self._history.append((c, cost))
            self._measured[c] = min(cost, self._measured.get(c, math.inf))
            if cost < self._best[1]:
                self._best = (c, cost)
            clean_configs.append(c)
            clean_costs.append(cost)
        self._update(clean_configs, clean_costs)

    @property
    def best(self) -> tuple[Config | None, float]:
        """(best config, its cost); (None, inf) until a measurement succeeded."""
        return self._best

    @property
    def exhausted(self) -> bool:
        seen = len(self._measured) + len(self._pending) + len(self._invalid - self._measured.keys())
        return self._exhausted or seen >= self.space.size

    @property
    def measured(self) -> Mapping[Config, float]:
        return MappingProxyType(self._measured)

    @property
    def history(self) -> list[tuple[Config, float]]:
        return list(self._history)

    @property
    def n_measured(self) -> int:
        return len(self._measured)

    # ---- hooks -----------------------------------------------------------------------------------
    def _setup(self) -> None:
        """Subclass state initialisation (after options are resolved)."""
        return None

    @abstractmethod
    def _propose(self, n: int) -> Iterable[Config]:
        """Candidates in order of preference; the base filters them and tops up with random ones."""

    def _update(self, configs: list[Config], costs: list[float]) -> None:
        """Learn from a batch (costs already cleaned: NaN -> inf)."""
        return None

    # ---- helpers for subclasses ------------------------------------------------------------------
    def _valid(self, c: Config) -> bool:
        v = self._valid_cache.get(c)
        if v is None:
            if len(self._valid_cache) > _VALID_CACHE_LIMIT:
                self._valid_cache.clear()
            v = self.space.valid(c)
            self._valid_cache[c] = v
            if not v:
                self._invalid.add(c)
        return v

    def _is_fresh(self, c: Config) -> bool:
        return c not in self._measured and c not in self._pending and self._valid(c)

    def _finite_measured(self) -> list[tuple[Config, float]]:
        """Measured configs with finite cost, best first."""
        return sorted(((c, v) for c, v in self._measured.items() if math.isfinite(v)), key=lambda x: x[1])

    def _random_buildable(self, k: int, exclude: set[Config]) -> list[Config]:
        """``k`` random fresh configs whose schedules build, in random order: the predictor (which
        makes each candidate) scores one that fails at `UNBUILDABLE_SCORE`. A random batch picked
        without this check spent 24 of softmax's 200 trials on schedules that do not instantiate."""
        pool = self._random_fresh(RANDOM_BUILDABLE_POOL * k, set(exclude))
        if not pool:
            return []
        builds = self._score(pool) > UNBUILDABLE_SCORE
        return [c for c, ok in zip(pool, builds) if ok][:k]

    def _random_fresh(self, k: int, exclude: set[Config] | None = None) -> list[Config]:
        """``k`` random fresh configs (fewer only if the space runs dry).

        Rejection sampling while fresh configs are plentiful; on spaces small enough to enumerate, the
        fresh remainder is listed once it gets scarce, so the last few configs are found too.
        """
        exclude = set() if exclude is None else exclude
        size = self.space.size
        enumerable = size <= ENUMERATE_REMAINING_LIMIT
        if enumerable and 4 * (k + len(exclude) + len(self._measured) + len(self._pending)) >= size:
            return self._enumerate_fresh(k, exclude)
        out: list[Config] = []
        # Patience grows when valid configs are rare (a huge space, a strict predicate): a short batch
        # would look like an exhausted space to a tuner loop.
        limit = max(64 + 4 * k, min(4096 * k, 65_536))
        for _ in range(limit):
            if len(out) == k:
                break
            c = self.space.sample(self.rng)
            if c not in exclude and self._is_fresh(c):
                out.append(c)
                exclude.add(c)
        if len(out) < k and enumerable:
            out.extend(self._enumerate_fresh(k - len(out), exclude))
        return out

    def _enumerate_fresh(self, k: int, exclude: set[Config]) -> list[Config]:
        seen = {self.space.flat_index(c) for c in (*self._measured, *self._pending, *self._invalid, *exclude)}
        seen_arr = np.fromiter(seen, dtype=np.int64, count=len(seen))
        remaining = np.setdiff1d(np.arange(self.space.size), seen_arr)
        out: list[Config] = []
        for idx in self.rng.permutation(remaining):
            c = self.space.config_at(int(idx))
            if self._is_fresh(c):
                out.append(c)
                if len(out) == k:
                    return out
        return out

    def _score(self, configs: Sequence[Config]) -> np.ndarray:
        """Predictor scores as float64 (NaN -> -inf, so a broken score never wins)."""
        if not configs:
            return np.zeros(0)
        assert self.predictor is not None
        s = np.asarray(self.predictor(list(configs)), dtype=np.float64).reshape(-1)
        if s.shape[0] != len(configs):
            raise ValueError(f"predictor returned {s.shape[0]} scores for {len(configs)} configs")
        return np.where(np.isnan(s), -np.inf, s)

    def _n_random_share(self, n: int) -> int:
        """Epsilon-greedy share of a batch, stochastically rounded so small batches still explore."""
        x = max(self.options.get("eps_greedy", 0.0), self.explore_floor) * n
        return min(n, int(x) + int(self.rng.random() < x - int(x)))

    def _pick_guided(self, candidates: Iterable[Config], scores: np.ndarray | None, n: int) -> list[Config]:
        """Best ``n - r`` fresh candidates by score, then ``r`` random fresh configs (epsilon-greedy)."""
        uniq: dict[Config, int] = {}
        for i, c in enumerate(candidates):
            if c not in uniq and self._is_fresh(c):
                uniq[c] = i
        cands = list(uniq)
        if scores is None:
            s = self._score(cands)
        else:
            s = np.asarray(scores, dtype=np.float64)[list(uniq.values())]
        n_random = self._n_random_share(n)
        order = self._diverse_top(cands, s, n - n_random, float(self.options.get("diversity", 0.0)))
        out = [cands[i] for i in order]
        out.extend(self._random_fresh(n - len(out), set(out)))
        return out

    @staticmethod
    def _diverse_top(cands: Sequence[Config], scores: np.ndarray, k: int, weight: float) -> list[int]:
        """Indices of ``k`` candidates: the best scored, or with ``weight > 0`` a greedy pick among the
        ``DIVERSITY_POOL_FACTOR * k`` best that trades score for knob values the batch lacks.

        Why: a model fitted on a few measurements scores the neighbours of the best one highest, and a
        batch of them all teaches it little (AutoTVM's model-based tuner picks its plan the same way,
        a submodular gain of score plus uncovered knob values). The score is the candidate's rank in
        the pool scaled to (0, 1] (a ranker's raw scores have no unit); each knob whose value is new to
        the batch adds ``weight / number of knobs``.
        """
        order = np.argsort(-scores, kind="stable")
        if weight <= 0 or k <= 1 or len(order) <= k:
            return [int(i) for i in order[: max(k, 0)]]
        pool = order[: DIVERSITY_POOL_FACTOR * k]
        m = len(pool)
        rank_score = 1.0 - np.arange(m) / m
        knobs = np.asarray([cands[i] for i in pool], dtype=np.int64).reshape(m, -1)
        novel = np.ones(knobs.shape, dtype=bool)
        gain_left = np.ones(m, dtype=bool)
        picked: list[int] = []
        for _ in range(k):
            gain = np.where(gain_left, rank_score + weight * novel.mean(axis=1), -np.inf)
            j = int(np.argmax(gain))
            picked.append(int(pool[j]))
            gain_left[j] = False
            novel &= knobs != knobs[j]
        return picked
