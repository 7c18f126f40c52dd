"""The live progress display of a tuning run, driven by the tuner's per-batch callback.

On a terminal: a `rich` progress table, one row per workload (and a row for the shared budget of
`tune_many`), with trials done/total, the best so far in GFLOP/s and ms, errors, elapsed and
estimated remaining time. Elsewhere (a pipe, a log file, a CI job): one plain line per batch with
the same facts, so logs stay readable. `AUTOSCHED_QUIET` (any value) turns the display off.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

TOTAL_ROW = "all tasks"


def _fmt_seconds(s: float | None) -> str:
    if s is None or not math.isfinite(s):
        return "?"
    s = int(round(s))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _best(task: Any) -> tuple[float, float]:
    """(best GFLOP/s, best ms) of a TaskTuner so far; (0, inf) before any valid measurement."""
    cost = task.best_cost
    if not math.isfinite(cost) or cost <= 0:
        return 0.0, math.inf
    return task.workload.flops / cost / 1e9, cost * 1e3


def _errors(task: Any) -> int:
    return int(sum(task.errors.values()))


class TuneProgress:
    """Shows the progress of one or more TaskTuners; call `update(task)` after each batch.

    `names` and `totals`: the rows (a workload's name and its trial budget). `budget`: with several
    tasks sharing one budget (`tune_many`), the total row's size; the estimated remaining time is
    then taken from the shared budget. Use as a context manager, or call `close()`.
    """

    def __init__(self, names: Sequence[str], totals: Sequence[int], *, budget: int | None = None,
                 console: Console | None = None) -> None:
        self.console = console if console is not None else Console()
        self.live = self.console.is_terminal
        self.names, self.totals = list(names), list(totals)
        self.budget = budget
        self.t0 = time.perf_counter()
        self._done: dict[str, int] = {}
        self._progress: Progress | None = None
        self._rows: dict[str, TaskID] = {}
        if self.live:
            self._progress = Progress(
                TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                TextColumn("trials  best {task.fields[gflops]} GFLOP/s ({task.fields[ms]} ms)  "
                           "errors {task.fields[errors]}"),
                TextColumn("elapsed"), TimeElapsedColumn(), TextColumn("remaining"), TimeRemainingColumn(),
                console=self.console, auto_refresh=True, transient=False)
            for name, total in zip(self.names, self.totals):
                self._rows[name] = self._progress.add_task(name, total=total, gflops="-", ms="-", errors=0)
            if budget is not None and len(self.names) > 1:
                self._rows[TOTAL_ROW] = self._progress.add_task(TOTAL_ROW, total=budget, gflops="-", ms="-",
                                                                errors=0)
            self._progress.start()

    @classmethod
    def wanted(cls, enabled: bool) -> bool:
        return enabled and not os.environ.get("AUTOSCHED_QUIET")

    # ---- the callback --------------------------------------------------------------------------------
    def update(self, task: Any) -> None:
        if self.live and self._progress is None:  # closed
            return
        name = task.workload.name
        if name not in self.names:  # a task not announced (two workloads of one name): a row of its own
            self.names.append(name)
            self.totals.append(task.options.trials)
            if self._progress is not None:
                self._rows[name] = self._progress.add_task(name, total=task.options.trials, gflops="-", ms="-",
                                                           errors=0)
        self._done[name] = task.trials
        gflops, ms = _best(task)
        if self._progress is not None:
            self._progress.update(self._rows[name], completed=task.trials, gflops=f"{gflops:.1f}",
                                  ms=f"{ms:.4f}" if math.isfinite(ms) else "-", errors=_errors(task))
            if TOTAL_ROW in self._rows:
                self._progress.update(self._rows[TOTAL_ROW], completed=sum(self._done.values()))
            self._progress.refresh()
        else:
            self.console.print(self.line(task), highlight=False, markup=False, soft_wrap=True)

    __call__ = update

    def line(self, task: Any) -> str:
        """The plain line of one batch."""
        gflops, ms = _best(task)
        elapsed = time.perf_counter() - self.t0
        if self.budget is not None and len(self.names) > 1:  # tasks share one budget: so does the estimate
            done, total = sum(self._done.values()), self.budget
            shared = f"  all {done}/{total}"
        else:
            done, total, shared = task.trials, task.options.trials, ""
        eta = elapsed / done * max(0, total - done) if done else None
        best_ms = f"{ms:.4f} ms" if math.isfinite(ms) else "- ms"
        return (f"[{task.workload.name}] trials {task.trials}/{task.options.trials}{shared}  "
                f"best {gflops:.1f} GFLOP/s ({best_ms})  measured {task.measured}  reused {task.reused}  "
                f"errors {_errors(task)}  elapsed {_fmt_seconds(elapsed)}  remaining {_fmt_seconds(eta)}")

    # ---- lifetime ------------------------------------------------------------------------------------
    def close(self) -> None:
        if self._progress is not None:
            self._progress.refresh()
            self._progress.stop()
            self._progress = None

    def __enter__(self) -> TuneProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
