"""Grid search: visit every config once, in a fixed and reproducible order.

Lexicographic order is what people expect on small spaces, but on a big one it spends the whole budget
varying the last knob. The strided order walks flat indices ``i * stride mod size`` with a stride
coprime to the size near ``size / golden ratio``: still a permutation (so still exhaustive), but the
first trials already spread over every knob. With a predictor, each batch is the best ``n`` of the next
``lookahead * n`` grid points; the rest stay queued, so the grid remains exhaustive and merely reordered.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from autosched.search.base import Searcher
from autosched.space.knobs import Config

_GOLDEN = (math.sqrt(5) - 1) / 2


def coprime_stride(size: int) -> int:
    """A stride near ``size * 0.618`` that is coprime to ``size`` (so the walk is a permutation)."""
    if size <= 2:
        return 1
    s = max(1, round(size * _GOLDEN))
    for delta in range(size):
        for cand in (s + delta, s - delta):
            if 0 < cand < size and math.gcd(cand, size) == 1:
                return cand
    return 1


class GridSearcher(Searcher):
    """Exhaustive enumeration (lexicographic or strided), optionally reordered locally by a predictor."""

    name: ClassVar[str] = "grid"
    OPTIONS: ClassVar[dict[str, tuple[Any, str]]] = {
        "order": ("auto", "'lexicographic', 'strided', or 'auto' (strided above strided_above configs)"),
        "strided_above": (4096, "with order='auto': spaces larger than this are walked strided"),
        "offset": (0, "flat index where the walk starts (e.g. to resume)"),
        "lookahead": (8, "with a predictor: a batch is the best n of the next lookahead * n grid points"),
    }

    @classmethod
    def _check_options(cls, opts: dict[str, Any]) -> None:
        super()._check_options(opts)
        cls._require(
            opts["order"] in ("auto", "lexicographic", "strided"),
            "order",
            "must be auto|lexicographic|strided",
        )
        cls._require(opts["lookahead"] >= 1, "lookahead", "must be >= 1")
        cls._require(opts["offset"] >= 0, "offset", "must be >= 0")
        cls._require(opts["strided_above"] >= 0, "strided_above", "must be >= 0")

    def _setup(self) -> None:
        size = self.space.size
        order = self.options["order"]
        strided = order == "strided" or (order == "auto" and size > self.options["strided_above"])
        self._stride = coprime_stride(size) if strided else 1
        self._cursor = 0  # how many grid points have been pulled from the walk
        self._start = self.options["offset"] % size
        self._queue: list[Config] = []

    def _pull(self, k: int) -> None:
        """Move up to ``k`` fresh grid points from the walk into the queue."""
        size = self.space.size
        while k > 0 and self._cursor < size:
            c = self.space.config_at((self._start + self._cursor * self._stride) % size)
            self._cursor += 1
            if self._is_fresh(c):
                self._queue.append(c)
                k -= 1
        self._queue = [c for c in self._queue if self._is_fresh(c)]
        if self._cursor >= size and not self._queue:
            self._exhausted = True

    def _propose(self, n: int) -> list[Config]:
        window = n if self.predictor is None else n * self.options["lookahead"]
        self._pull(window - len(self._queue))
        if self.predictor is None or len(self._queue) <= n:
            out, self._queue = self._queue[:n], self._queue[n:]
        else:
            scores = self._score(self._queue)
            top = set(np.argsort(-scores, kind="stable")[:n].tolist())
            out = [c for i, c in enumerate(self._queue) if i in top]
            self._queue = [c for i, c in enumerate(self._queue) if i not in top]
        if self._cursor >= self.space.size and not self._queue:
            self._exhausted = True
        return out

    def propose(self, n: int) -> list[Config]:
        # No random top-up: a grid hands out grid points only, in its order.
        if n < 0:
            raise ValueError(f"propose(n) needs n >= 0, got {n}")
        if n == 0 or self.exhausted:
            return []
        out = self._take_seeds(n)
        if len(out) < n:
            out += [c for c in self._propose(n - len(out)) if self._is_fresh(c) and c not in out]
        self._pending.update(out)
        return out
