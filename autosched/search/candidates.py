"""Candidates: a config of a sketch space turned into a schedule, its steps, hash and features.

Kept apart from the tuner loop so the cost of lowering (features need the lowered nest) is paid
once per config and shared by the model-guided searchers' predictions and by training.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from autosched.cost_model.features import N_FEATURES, extract_features
from autosched.schedule.lower import lower_state
from autosched.schedule.schedule import Schedule
from autosched.schedule.space import SketchSpace
from autosched.schedule.state import ScheduleError
from autosched.workload import Workload
from tuning_db.canonical import steps_hash


@dataclass(frozen=True)
class Candidate:
    config: tuple[int, ...]
    steps_json: str  # "" when the config does not apply
    steps_hash: str
    features: np.ndarray
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error


class CandidateCache:
    """config -> Candidate for one workload and space."""

    def __init__(self, workload: Workload, space: SketchSpace, target_kind: str = "cpu") -> None:
        self.workload = workload
        self.space = space
        self.target_kind = target_kind
        self._cache: dict[tuple[int, ...], Candidate] = {}
        self.args = [workload.dag[n] for n in workload.args_order]

    def get(self, config: tuple[int, ...]) -> Candidate:
        config = tuple(config)
        c = self._cache.get(config)
        if c is None:
            c = self._make(config)
            if len(self._cache) > 50_000:
                self._cache.clear()
            self._cache[config] = c
        return c

    def _make(self, config: tuple[int, ...]) -> Candidate:
        try:
            s = self.space.apply(config)
            func = lowered_for_features(s, self.args, self.target_kind)
        except ScheduleError as exc:
            return Candidate(config, "", "", np.zeros(N_FEATURES), str(exc))
        steps = s.steps_json()
        return Candidate(config, json.dumps(steps), steps_hash(steps), extract_features(func))

    def features(self, configs) -> np.ndarray:
        return np.stack([self.get(c).features for c in configs]) if configs else np.zeros((0, N_FEATURES))


def lowered_for_features(s: Schedule, args: list, target_kind: str):
    """The loop nest features come from; on GPU targets the candidate is rendered too, so one that
    breaks a device limit or the Triton mapping is refused here, before it is built or measured."""
    if target_kind == "cpu":
        return lower_state(s.state, args, target_kind)
    from autosched.codegen.targets import renderer_for

    try:
        return renderer_for(target_kind)(s, args, "default_function")[1]
    except ScheduleError:
        raise
    except (ValueError, KeyError, TypeError) as exc:  # a renderer's refusal of an odd schedule
        raise ScheduleError(f"{target_kind}: {type(exc).__name__}: {exc}") from None


def features_of_steps(workload: Workload, steps_json: str, target_kind: str = "cpu") -> np.ndarray | None:
    """Features of a stored record (for warm-starting the model), None if it no longer applies."""
    from autosched.schedule.steps import step_from_dict

    try:
        s = Schedule(workload.dag, [step_from_dict(x) for x in json.loads(steps_json)])
        func = lowered_for_features(s, [workload.dag[n] for n in workload.args_order], target_kind)
    except (ScheduleError, ValueError, KeyError):
        return None
    return extract_features(func)
