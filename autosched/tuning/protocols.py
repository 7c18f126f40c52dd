"""What the tuner needs of its collaborators, as small structural types.

The tuner loop (`autosched.tuning.tuner.TaskTuner`) and the public API (`autosched.tuning.api`) are
written against these, not against the concrete classes: any object with these methods serves (a
`ProgramMeasurer` or a test's synthetic measurer; an `XGBModel` or a `RandomModel`; a generated
`SketchSpace`, a GPU sketch space or an expert's `TemplateSpace`; a `TuningDB`).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from autosched.compile.types import MeasureInput
from autosched.measure.types import MeasureResult
from autosched.schedule.schedule import Schedule
from autosched.space.knobs import ConfigSpace
from tuning_db.types import Record, RecordIn, Standing, TargetInfo, WorkloadInfo

Config = tuple[int, ...]
"""A point of a search space: one choice index per knob."""


@runtime_checkable
class Measurer(Protocol):
    """Builds and runs a batch of candidates; one result per input, in order (failures included)."""

    def measure(self, inputs: Sequence[MeasureInput]) -> list[MeasureResult]: ...


@runtime_checkable
class CostModel(Protocol):
    """Ranks candidates by the features of their lowered loop nest (`autosched.cost_model.base`):
    throughputs are higher-is-better, groups are workloads."""

    @property
    def n_samples(self) -> int: ...

    @property
    def is_trained(self) -> bool: ...

    def fit(self, features: Any, throughputs: Any, groups: Any = None) -> None: ...

    def update(self, features: Any, throughputs: Any, groups: Any = None) -> None: ...

    def fit_from_records(self, records: Iterable[tuple[Any, Any, Hashable]]) -> None: ...

    def predict(self, features: Any) -> np.ndarray: ...

    def count_group(self, group: Hashable) -> int: ...

    def keep_only_group(self, group: Hashable) -> None: ...


@runtime_checkable
class SearchSpace(Protocol):
    """A workload's schedule space (`autosched.space.registry.make_space`, or a `TemplateSpace`).

    Optional, read with getattr: `seeds` (knob-value dicts measured first) and `rebuild_spec`
    (workload JSON, target kind: how a feature worker rebuilds the space, see feature_pool)."""

    @property
    def space(self) -> ConfigSpace:
        """The knobs and their choices (the attribute's name is the space package's)."""
        ...

    def apply(self, config: Config) -> Schedule: ...


@runtime_checkable
class Database(Protocol):
    """The tuning-database methods the tuner and the API use (`tuning_db.TuningDB`)."""

    def ensure_workload(self, key: str, name: str, spec: dict[str, Any], flops: float) -> WorkloadInfo: ...

    def ensure_target(self, key: str, kind: str, spec: dict[str, Any]) -> TargetInfo: ...

    def workloads(self) -> list[WorkloadInfo]: ...

    def records(self, workload_key: str | None = None, target_key: str | None = None,
                ok_only: bool = False) -> list[Record]: ...

    def commit_records(self, records: Sequence[RecordIn]) -> list[int]: ...

    def best(self, workload_key: str, target_key: str) -> Record | None: ...

    def top_k(self, workload_key: str, target_key: str, k: int) -> list[Record]: ...

    def standing(self, workload_key: str, target_key: str, steps_hash: str) -> Standing | None: ...

    def standings(self, workload_key: str, target_key: str, k: int | None = None, *,
                  include_disqualified: bool = False) -> list[Standing]: ...
