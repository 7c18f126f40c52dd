"""REINFORCE policy-gradient search, in numpy.

The policy is a softmax over the choices of each knob. With ``policy="independent"`` each knob has its
own logits; with ``policy="autoregressive"`` knob k's logits also get a linear term in the one-hot
encoding of the choices already made for knobs 0..k-1, so the agent can learn interactions such as
"a big outer tile wants a small inner tile" (the reason a product-of-marginals policy stalls on tiling).

Reward is normalized throughput, ``best cost / cost`` (in (0, 1], 0 for failures), so one learning rate
fits every workload. A moving-average baseline and per-batch advantage normalization reduce variance;
an entropy bonus keeps the policy from collapsing before it has seen enough. Each update also replays
the best measured configs (self-imitation), which on tuning budgets of a few hundred trials converges
far faster than pure on-policy REINFORCE; replayed and warm-start samples are off-policy, a bias we
accept for sample efficiency. With a predictor, the policy proposes many candidates and the predictor
ranks them.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from autosched.search.base import Searcher
from autosched.space.knobs import Config


class RLSearcher(Searcher):
    """Per-knob softmax policy trained with REINFORCE on normalized throughput."""

    name: ClassVar[str] = "rl"
    OPTIONS: ClassVar[dict[str, tuple[Any, str]]] = {
        "policy": (
            "autoregressive",
            "'independent' (per-knob logits) or 'autoregressive' (+ linear in earlier knobs)",
        ),
        "lr": (0.1, "Adam learning rate"),
        "entropy": (0.01, "entropy bonus weight"),
        "baseline_decay": (0.8, "moving-average factor of the reward baseline"),
        "epochs": (2, "gradient steps per update"),
        "elite_replay": (4, "best measured configs replayed in every update (self-imitation)"),
        "sample_rounds": (8, "policy sampling rounds per batch before falling back to local mutations"),
        "n_candidates": (256, "with a predictor: policy samples ranked per batch"),
        "eps_greedy": (0.05, "with a predictor: share of each batch drawn at random, unscored"),
        "diversity": (0.0, "with a predictor: weight of knob values new to the batch against score rank"),
    }

    @classmethod
    def _check_options(cls, opts: dict[str, Any]) -> None:
        super()._check_options(opts)
        cls._require(
            opts["policy"] in ("independent", "autoregressive"),
            "policy",
            "must be independent|autoregressive",
        )
        cls._require(opts["lr"] > 0, "lr", "must be > 0")
        cls._require(opts["entropy"] >= 0, "entropy", "must be >= 0")
        cls._require(0.0 <= opts["baseline_decay"] < 1.0, "baseline_decay", "must be in [0, 1)")
        for k in ("epochs", "sample_rounds", "n_candidates"):
            cls._require(opts[k] >= 1, k, "must be >= 1")
        cls._require(opts["elite_replay"] >= 0, "elite_replay", "must be >= 0")

    def _setup(self) -> None:
        dims = self.space.dims
        self._offsets = np.concatenate([[0], np.cumsum(dims)]).astype(int)
        width = int(self._offsets[-1])
        self._b = np.zeros(width)
        self._w = np.zeros((width, width))
        mask = np.zeros((width, width))
        if self.options["policy"] == "autoregressive":
            for k in range(len(dims)):
                lo, hi = self._offsets[k], self._offsets[k + 1]
                mask[lo:hi, :lo] = 1.0  # knob k sees the one-hots of knobs before it
        self._mask = mask
        self._adam = {
            "b": [np.zeros_like(self._b), np.zeros_like(self._b)],
            "w": [np.zeros_like(self._w), np.zeros_like(self._w)],
            "t": 0,
        }
        self._baseline: float | None = None

    # ---- policy ----------------------------------------------------------------------------------
    def _onehot(self, configs: list[Config]) -> np.ndarray:
        x = np.zeros((len(configs), int(self._offsets[-1])))
        if configs:
            idx = np.asarray(configs, dtype=int) + self._offsets[:-1]
            x[np.arange(len(configs))[:, None], idx] = 1.0
        return x

    def _block_softmax(self, logits: np.ndarray) -> np.ndarray:
        p = np.empty_like(logits)
        for k in range(len(self.space.dims)):
            lo, hi = self._offsets[k], self._offsets[k + 1]
            z = logits[:, lo:hi] - logits[:, lo:hi].max(axis=1, keepdims=True)
            e = np.exp(z)
            p[:, lo:hi] = e / e.sum(axis=1, keepdims=True)
        return p

    def sample_policy(self, m: int) -> list[Config]:
        """``m`` configs drawn from the current policy (knob by knob, autoregressively)."""
        dims = self.space.dims
        x = np.zeros((m, int(self._offsets[-1])))
        choice = np.zeros((m, len(dims)), dtype=int)
        w = self._w * self._mask
        for k, d in enumerate(dims):
            lo, hi = self._offsets[k], self._offsets[k + 1]
            z = self._b[lo:hi] + x @ w[lo:hi].T
            z -= z.max(axis=1, keepdims=True)
            p = np.exp(z)
            p /= p.sum(axis=1, keepdims=True)
            a = (p.cumsum(axis=1) < self.rng.random((m, 1))).sum(axis=1).clip(0, d - 1)
            choice[:, k] = a
            x[np.arange(m), lo + a] = 1.0
        return [tuple(int(i) for i in row) for row in choice]

    def probabilities(self, configs: list[Config]) -> np.ndarray:
        """Per-knob choice probabilities given each config's earlier knobs (rows laid out by knob)."""
        x = self._onehot(configs)
        return self._block_softmax(self._b + x @ (self._w * self._mask).T)

    # ---- learning --------------------------------------------------------------------------------
    def _adam_step(self, name: str, param: np.ndarray, grad: np.ndarray) -> None:
        m, v = self._adam[name]
        t = self._adam["t"]
        m *= 0.9
        m += 0.1 * grad
        v *= 0.999
        v += 0.001 * grad**2
        param += self.options["lr"] * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)

    def _update(self, configs: list[Config], costs: list[float]) -> None:
        best = self.best[1]
        if not configs or not math.isfinite(best):
            return
        reward = lambda cost: best / cost if math.isfinite(cost) else 0.0
        batch = list(zip(configs, (reward(c) for c in costs)))
        fresh_mean = float(np.mean([r for _, r in batch]))
        batch += [(c, reward(v)) for c, v in self._finite_measured()[: self.options["elite_replay"]]]
        cfgs = [c for c, _ in batch]
        r = np.array([r for _, r in batch])
        d = self.options["baseline_decay"]
        self._baseline = fresh_mean if self._baseline is None else d * self._baseline + (1 - d) * fresh_mean
        adv = r - self._baseline
        if r.std() > 1e-6:
            adv /= r.std()
        x = self._onehot(cfgs)
        for _ in range(self.options["epochs"]):
            p = self.probabilities(cfgs)
            grad_z = (x - p) * adv[:, None]  # d log pi / d logits, weighted by advantage
            logp = np.log(p + 1e-12)
            for k in range(len(self.space.dims)):
                lo, hi = self._offsets[k], self._offsets[k + 1]
                h = -(p[:, lo:hi] * logp[:, lo:hi]).sum(axis=1, keepdims=True)
                grad_z[:, lo:hi] += self.options["entropy"] * (-p[:, lo:hi] * (logp[:, lo:hi] + h))
            grad_z /= len(cfgs)
            self._adam["t"] += 1
            self._adam_step("b", self._b, grad_z.sum(axis=0))
            if self.options["policy"] == "autoregressive":
                self._adam_step("w", self._w, (grad_z.T @ x) * self._mask)

    # ---- proposing -------------------------------------------------------------------------------
    def _fresh_from_policy(self, k: int, rounds: int) -> list[Config]:
        out: dict[Config, None] = {}
        for _ in range(rounds):
            for c in self.sample_policy(max(2 * k, 16)):
                if len(out) < k and c not in out and self._is_fresh(c):
                    out[c] = None
            if len(out) >= k:
                break
        if len(out) < k:  # the policy concentrates on measured configs: explore around them
            for c in self.sample_policy(4 * (k - len(out))):
                m = self.space.mutate(c, self.rng)
                if len(out) < k and m not in out and self._is_fresh(m):
                    out[m] = None
        return list(out)

    def _propose(self, n: int) -> list[Config]:
        if self.predictor is None:
            return self._fresh_from_policy(n, self.options["sample_rounds"])
        cands = self._fresh_from_policy(max(self.options["n_candidates"], 4 * n), 2)
        return self._pick_guided(cands, None, n)
