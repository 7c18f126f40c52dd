"""`TuneOptions`: every option of a tuning run in one frozen object (`asc.TuneOptions`).

`asc.tune(w, "cpu", 64, options=TuneOptions(searcher="random"), seed=3)` takes the options object
and keyword overrides of its fields; the first nine fields (the search itself) come first and keep
their positional order, which the tuner loop and older callers rely on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuning_db import TuningDB


@dataclass(frozen=True)
class TuneOptions:
    # ---- the search (read by TaskTuner) ----
    trials: int = 200
    batch_size: int = 16
    searcher: str = "genetic"
    cost_model: str | None = "xgb"  # "xgb", "random" or None (measurements alone)
    seed: int = 0
    early_stopping: int | None = None  # stop after this many trials without improvement
    searcher_options: dict = field(default_factory=dict)
    verify: int = 4  # re-measure this many of the best schedules at the end (0: off); see TaskTuner.verify
    transfer: bool = True  # with the xgb model: also start from other workloads' best schedules (tuning.transfer)
    seeds: bool = True  # measure the space's rule-derived seeds first (False: every searcher starts without them)
    # ---- the wiring (read by the API: autosched.tuning.api) ----
    db: TuningDB | str | None = None  # a TuningDB, a URL or a SQLite path; None: AUTOSCHED_DB_URL or the default
    runner: Any = None  # a runner object, "ray", or HOST:PORT of a Ray cluster; None: local
    builder: Any = None  # None: the runner if it builds, else a local build pool
    progress: bool = True  # live display on a terminal, plain lines otherwise (autosched.tuning.progress)
    plot: str | Path | None = None  # write the tuning curve(s) to this PNG
    job_id: str | None = None  # stored with every record
    on_batch: Callable[[Any], None] | None = None  # called with the TaskTuner after every batch
    should_stop: Callable[[], bool] | None = None  # checked between batches: a clean cancel
    template: Callable | None = None  # an expert template replaces the generated space (tune only)

    def __post_init__(self) -> None:
        if not isinstance(self.trials, int) or self.trials < 1:
            raise ValueError(f"trials must be a positive integer, got {self.trials!r}")
        if not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {self.batch_size!r}")
        if not isinstance(self.verify, int) or self.verify < 0:
            raise ValueError(f"verify must be an integer >= 0, got {self.verify!r}")
        if not isinstance(self.seeds, bool):
            raise ValueError(f"seeds must be True or False, got {self.seeds!r}")
        if self.cost_model not in (None, "xgb", "random"):
            raise ValueError(f"unknown cost model {self.cost_model!r}; use 'xgb', 'random' or None")

    def replace(self, _caller: str = "TuneOptions", **overrides: Any) -> TuneOptions:
        """A copy with `overrides` applied; unknown names raise TypeError naming them (as a call would)."""
        unknown = sorted(set(overrides) - FIELD_NAMES)
        if unknown:
            raise TypeError(f"{_caller}() got unexpected keyword argument(s): {', '.join(unknown)}")
        return dataclasses.replace(self, **overrides) if overrides else self

    @classmethod
    def resolve(cls, options: TuneOptions | None, overrides: Mapping[str, Any], caller: str,
                **call_values: Any) -> TuneOptions:
        """`options` (or the defaults), then the call's own values that were given (not None), then
        `overrides`."""
        base = options if options is not None else cls()
        if not isinstance(base, TuneOptions):
            raise TypeError(f"{caller}(): options must be a TuneOptions, got {type(base).__name__}")
        given = {k: v for k, v in call_values.items() if v is not None}
        return base.replace(caller, **given, **dict(overrides))


FIELD_NAMES = frozenset(f.name for f in dataclasses.fields(TuneOptions))
