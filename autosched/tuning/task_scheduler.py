"""Share one trial budget over many tasks (the operators of a network), as Ansor's task scheduler does.

The objective is the weighted sum of the tasks' best costs (weight = how often the operator runs). After
a round-robin warm-up, the next batch goes to the task with the most negative estimated gradient of that
objective with respect to trials, i.e. the task where one more trial is expected to save the most time:

    grad_i = w_i * (alpha * backward_i + (1 - alpha) * forward_i)
    backward_i = (best_i now - best_i `backward_window` rounds ago) / trials spent since   (observed)
    forward_i  = min(-best_i / trials_i,                                                   (optimistic:
                     beta * flops_i / best_throughput_in_group - best_i) / trials_i       similar tasks)

A task that has produced no finite cost yet is pushed first until it does, but gives up after
``failure_patience`` trials; a task that has not improved for ``early_stop_trials`` trials is retired.
Pure logic with no device, so it is tested against simulated tuning curves.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


class TaskScheduler:
    """Gradient-based allocation of tuning rounds to tasks."""

    def __init__(
        self,
        n_tasks: int,
        weights: Sequence[float] | None = None,
        *,
        alpha: float = 0.2,
        beta: float = 2.0,
        backward_window: int = 3,
        flops: Sequence[float] | None = None,
        groups: Sequence[int | str | None] | None = None,
        early_stop_trials: int | None = None,
        failure_patience: int = 256,
        seed: int = 0,
    ) -> None:
        if n_tasks < 1:
            raise ValueError(f"n_tasks must be >= 1, got {n_tasks}")
        self.n_tasks = n_tasks
        self.weights = np.ones(n_tasks) if weights is None else np.asarray(weights, dtype=float)
        if self.weights.shape != (n_tasks,) or np.any(self.weights < 0) or not np.all(np.isfinite(self.weights)):
            raise ValueError(f"weights must be {n_tasks} finite non-negative numbers")
        for name, seq in (("flops", flops), ("groups", groups)):
            if seq is not None and len(seq) != n_tasks:
                raise ValueError(f"{name} must have {n_tasks} entries, got {len(seq)}")
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"alpha must be in [0, 1], got {alpha}")
        if backward_window < 1:
            raise ValueError(f"backward_window must be >= 1, got {backward_window}")
        self.alpha, self.beta, self.backward_window = alpha, beta, backward_window
        self.flops = None if flops is None else np.asarray(flops, dtype=float)
        self.groups = None if groups is None else list(groups)
        self.early_stop_trials = early_stop_trials
        self.failure_patience = failure_patience
        self.rng = np.random.default_rng(seed)
        self.best_costs = np.full(n_tasks, math.inf)
        self.trials = np.zeros(n_tasks, dtype=int)
        self.rounds = np.zeros(n_tasks, dtype=int)
        self._last_improved = np.zeros(n_tasks, dtype=int)  # trials count at the last improvement
        self._history: list[list[tuple[int, float]]] = [[(0, math.inf)] for _ in range(n_tasks)]
        self.dead = np.zeros(n_tasks, dtype=bool)
        self.dead[self.weights == 0] = True

    # ---- state -------------------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        """Every task retired (early stopped, failed for too long, or weight 0)."""
        return bool(self.dead.all())

    def objective(self) -> float:
        """Weighted sum of best costs (inf while some weighted task has no finite cost)."""
        live = self.weights > 0
        return float(np.sum(self.weights[live] * self.best_costs[live]))

    def gradients(self) -> np.ndarray:
        """Estimated d objective / d trial per task (more negative = more promising); nan for dead."""
        out = np.full(self.n_tasks, np.nan)
        for i in np.flatnonzero(~self.dead):
            out[i] = self._gradient(int(i))
        return out

    def _gradient(self, i: int) -> float:
        best, t = self.best_costs[i], max(int(self.trials[i]), 1)
        if not math.isfinite(best):
            return -math.inf
        hist = self._history[i]
        backward = 0.0
        if len(hist) > self.backward_window:
            t0, c0 = hist[-1 - self.backward_window]
            t1, c1 = hist[-1]
            if math.isfinite(c0) and t1 > t0:
                backward = (c1 - c0) / (t1 - t0)
        forward = -best / t
        peer = self._group_best_throughput(i)
        if peer is not None and self.flops is not None:
            forward = min(forward, (self.beta * self.flops[i] / peer - best) / t)
        return float(self.weights[i] * (self.alpha * backward + (1 - self.alpha) * forward))

    def _group_best_throughput(self, i: int) -> float | None:
        if self.groups is None or self.flops is None or self.groups[i] is None:
            return None
        peers = [j for j, g in enumerate(self.groups) if g == self.groups[i] and j != i]
        rates = [self.flops[j] / self.best_costs[j] for j in peers if math.isfinite(self.best_costs[j])]
        return max(rates) if rates else None

    # ---- decisions ---------------------------------------------------------------------------------
    def next_task(self) -> int:
        """The task to give the next batch of trials. Raises RuntimeError when every task is done."""
        if self.done:
            raise RuntimeError("every task is done (retired or weight 0)")
        live = np.flatnonzero(~self.dead)
        untried = [int(i) for i in live if self.rounds[i] == 0]
        if untried:
            return untried[0]  # round-robin warm-up, in task order
        grads = np.array([self._gradient(int(i)) for i in live])
        if np.all(grads == grads[0]):
            return int(live[self.rng.integers(len(live))])
        return int(live[int(np.argmin(grads))])

    def update(self, task: int, best_cost_after_batch: float, trials_used: int) -> None:
        """Report the best cost of ``task`` after a batch of ``trials_used`` trials (inf if none worked)."""
        if not 0 <= task < self.n_tasks:
            raise ValueError(f"task {task} out of range for {self.n_tasks} tasks")
        if trials_used < 0:
            raise ValueError(f"trials_used must be >= 0, got {trials_used}")
        cost = float(best_cost_after_batch)
        cost = math.inf if math.isnan(cost) else cost
        self.trials[task] += trials_used
        self.rounds[task] += 1
        if cost < self.best_costs[task]:
            self.best_costs[task] = cost
            self._last_improved[task] = self.trials[task]
        self._history[task].append((int(self.trials[task]), float(self.best_costs[task])))
        stale = self.trials[task] - self._last_improved[task]
        if not math.isfinite(self.best_costs[task]):
            if self.trials[task] >= self.failure_patience:
                self.dead[task] = True
        elif self.early_stop_trials is not None and stale >= self.early_stop_trials:
            self.dead[task] = True
