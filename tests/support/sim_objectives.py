"""Simulated tuning objectives: deterministic stand-ins for "compile and time this schedule".

They mimic what real schedule spaces look like to a searcher: tile-size knobs with a preferred size
(a bowl in log2 space), a register-pressure interaction between two tiles, a categorical knob, and
config-specific ruggedness (a deterministic hash, like alignment and cache-set effects) so that no
searcher can win by coordinate descent alone. The true optimum is found by brute force.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import numpy as np

from autosched.space.knobs import Config, ConfigSpace, Knob


def _rugged(config: Config, salt: str) -> float:
    """Deterministic pseudo-random number in [0, 1) per config."""
    h = hashlib.blake2b(repr((salt, config)).encode(), digest_size=8).digest()
    return int.from_bytes(h, "little") / 2**64


@dataclass(frozen=True)
class Objective:
    """A space, a cost table over all its configs (inf = invalid or failing), and helpers."""

    space: ConfigSpace
    table: np.ndarray  # cost per flat index
    model_table: np.ndarray  # what a model can know: true costs, but runtime failures are unpredictable

    def cost(self, config: Config) -> float:
        return float(self.table[self.space.flat_index(config)])

    def costs(self, configs: list[Config]) -> list[float]:
        return self.cost_array(configs).tolist()

    def cost_array(self, configs: list[Config], table: np.ndarray | None = None) -> np.ndarray:
        """Vectorized lookup: flat index = configs @ mixed-radix strides (last knob fastest)."""
        dims = np.array(self.space.dims)
        strides = np.concatenate([np.cumprod(dims[::-1])[::-1][1:], [1]])
        table = self.table if table is None else table
        return table[np.asarray(configs, dtype=np.int64).reshape(len(configs), -1) @ strides]

    @property
    def best_cost(self) -> float:
        return float(np.min(self.table))  # invalid configs are inf in the table

    @property
    def best_config(self) -> Config:
        return self.space.config_at(int(np.argmin(self.table)))

    def n_within(self, ratio: float) -> int:
        return int(np.sum(self.table <= self.best_cost * ratio))

    def predictor(self, noise: float, seed: int) -> Callable[[list[Config]], np.ndarray]:
        """A good but imperfect model: log throughput plus Gaussian noise (failures score lowest)."""
        rng = np.random.default_rng(seed)

        def predict(configs: list[Config]) -> np.ndarray:
            c = self.cost_array(configs, self.model_table)
            score = np.where(np.isfinite(c), -np.log(np.where(np.isfinite(c), c, 1.0)), -50.0)
            return score + rng.normal(0.0, noise, len(configs))

        return predict


def _bowl(value: int, best: int, width: float) -> float:
    return 1.0 + width * (math.log2(value) - math.log2(best)) ** 2


@cache
def tile_objective(
    *, small: bool = False, fail_rate: float = 0.0, invalid: bool = False, ruggedness: float = 0.3
) -> Objective:
    """Tile-size-like cost over ~7000 configs (or 300 with ``small``); the optimum is unique."""
    tiles = (1, 2, 4, 8, 16) if small else (1, 2, 4, 8, 16, 32, 64)
    knobs = [
        Knob("tile_i", tiles, "tile"),
        Knob("tile_j", tiles, "tile"),
        Knob("unroll", (0, 16, 64) if small else (0, 4, 16, 64), "unroll"),
        Knob("vectorize", (False, True), "flag"),
        Knob("loc", ("root", "inner") if small else ("root", "outer", "inner"), "location"),
    ]
    if not small:
        knobs.insert(2, Knob("tile_k", (1, 2, 4, 8, 16, 32), "tile"))
    space = ConfigSpace(tuple(knobs))

    def raw(c: Config) -> float:
        v = space.values(c)
        cost = _bowl(v["tile_i"], 8, 0.15) * _bowl(v["tile_j"], 16 if not small else 4, 0.1)
        if "tile_k" in v:
            cost *= _bowl(v["tile_k"], 4, 0.08)
        if v["tile_i"] * v["tile_j"] > (64 if small else 256):
            cost *= 1.6  # register spill
        cost *= {0: 1.3, 4: 1.1, 16: 1.0, 64: 1.15}[v["unroll"]]
        cost *= 0.8 if v["vectorize"] else 1.0
        cost *= (
            {"root": 1.25, "outer": 1.0, "inner": 1.1}[v["loc"]] if not small else (1.2 if v["loc"] == "root" else 1.0)
        )
        return 1e-3 * cost * (1.0 + ruggedness * _rugged(c, "r"))

    def is_valid(c: Config) -> bool:
        v = space.values(c)
        return not (v["tile_i"] * v["tile_j"] >= (64 if small else 512) and v["vectorize"])

    model_table = np.array([raw(space.config_at(i)) for i in range(space.size)])
    table = model_table.copy()
    for i in range(space.size):
        c = space.config_at(i)
        if (fail_rate > 0 and _rugged(c, "f") < fail_rate) or (invalid and not is_valid(c)):
            table[i] = math.inf
    if invalid:
        space = space.with_validity(is_valid)
    return Objective(space, table, model_table)


def run_search(searcher, objective: Objective, budget: int, batch: int, noise: float = 0.0, seed: int = 0):
    """Tuner loop against the simulated objective. Returns the list of (config, measured cost)."""
    rng = np.random.default_rng(seed + 10_000)
    trace: list[tuple[Config, float]] = []
    while len(trace) < budget and not searcher.exhausted:
        configs = searcher.propose(min(batch, budget - len(trace)))
        if not configs:
            break
        costs = [c * (1.0 + noise * rng.standard_normal()) if noise else c for c in objective.costs(configs)]
        searcher.update(configs, costs)
        trace.extend(zip(configs, costs))
    return trace


def trials_to_reach(objective: Objective, trace: list[tuple[Config, float]], ratio: float) -> int | None:
    """First trial (1-based) whose TRUE cost is within ``ratio`` of the optimum's cost."""
    target = objective.best_cost * ratio
    for i, (c, _) in enumerate(trace):
        if objective.cost(c) <= target:
            return i + 1
    return None
