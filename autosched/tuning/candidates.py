"""Candidates: a config of a sketch space turned into a schedule, its steps, hash and features.

Kept apart from the tuner loop so the cost of lowering (features need the lowered nest) is paid
once per config and shared by the model-guided searchers' predictions and by training.
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from autosched.codegen.render import renderer_for
from autosched.cost_model.features import N_FEATURES, extract_features
from autosched.lowering.loop_nest import lower_state
from autosched.schedule.replay import schedule_from_steps
from autosched.schedule.schedule import Schedule
from autosched.schedule.state import ScheduleError
from autosched.space.registry import make_space
from autosched.tuning import feature_pool
from autosched.tuning.protocols import SearchSpace
from autosched.workload import Workload
from tuning_db.canonical import steps_hash

log = logging.getLogger(__name__)


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

    def __init__(self, workload: Workload, space: SearchSpace, target_kind: str = "cpu",
                 parallel: bool = True) -> None:
        self.workload = workload
        self.space = space
        self.target_kind = target_kind
        self._cache: dict[tuple[int, ...], Candidate] = {}
        self.args = [workload.dag[n] for n in workload.args_order]
        # workers rebuild the space from what make_space was given; an expert's template has no such
        # recipe and is made here (see feature_pool)
        spec = getattr(space, "rebuild_spec", None)
        self._spec: tuple[str, str] | None = spec if parallel and spec and spec[1] == target_kind else None
        self._checked = False
        self.made_by_workers = 0

    def get(self, config: tuple[int, ...]) -> Candidate:
        config = tuple(config)
        c = self._cache.get(config)
        if c is None:
            c = self.make(config)
            self._keep(c)
        return c

    def _keep(self, c: Candidate) -> None:
        if len(self._cache) > 50_000:
            self._cache.clear()
        self._cache[c.config] = c

    def make(self, config: tuple[int, ...]) -> Candidate:
        """The candidate of `config`, made now and not kept (`get` keeps it)."""
        try:
            s = self.space.apply(config)
            func = lowered_for_features(s, self.args, self.target_kind)
        except ScheduleError as exc:
            return Candidate(config, "", "", np.zeros(N_FEATURES), str(exc))
        steps = s.steps_json()
        return Candidate(config, json.dumps(steps), steps_hash(steps), extract_features(func))

    def features(self, configs) -> np.ndarray:
        self.prefetch(configs)
        return np.stack([self.get(c).features for c in configs]) if configs else np.zeros((0, N_FEATURES))

    def prefetch(self, configs) -> None:
        """Make the candidates of `configs` not made yet, on the feature workers where they serve."""
        if self._spec is None:
            return
        missing = list(dict.fromkeys(tuple(c) for c in configs if tuple(c) not in self._cache))
        try:
            made = feature_pool.make_candidates(self._spec, missing, _make_in_worker)
        except feature_pool.WorkerFailed as exc:
            log.warning("candidates of %s are made serially: %s", self.workload.name, exc)
            self._spec = None
            return
        if made is None:
            return
        if not self._checked:
            # the workers' space is a rebuild: trust it only once it agrees with ours on a config
            mine = self.make(missing[0])
            theirs = made[0]
            if (mine.steps_hash, mine.error) != (theirs.steps_hash, theirs.error) or \
                    not np.allclose(mine.features, theirs.features):
                log.warning("the feature workers' space of %s differs from this one: made serially",
                            self.workload.name)
                self._spec = None
                return
            self._checked = True
        for c in made:
            self._keep(c)
        self.made_by_workers += len(made)


def lowered_for_features(s: Schedule, args: list, target_kind: str):
    """The loop nest features come from; on GPU targets the candidate is rendered too, so one that
    breaks a device limit or the Triton mapping is refused here, before it is built or measured."""
    if target_kind == "cpu":
        return lower_state(s.state, args, target_kind)
    try:
        return renderer_for(target_kind)(s, args, "default_function")[1]
    except ScheduleError:
        raise
    except (ValueError, KeyError, TypeError) as exc:  # a renderer's refusal of an odd schedule
        raise ScheduleError(f"{target_kind}: {type(exc).__name__}: {exc}") from None


def features_of_steps(workload: Workload, steps_json: str, target_kind: str = "cpu") -> np.ndarray | None:
    """Features of a stored record (for warm-starting the model), None if it no longer applies."""
    try:
        s, args = schedule_from_steps(workload, steps_json)
        func = lowered_for_features(s, args, target_kind)
    except (ScheduleError, ValueError, KeyError):
        return None
    return extract_features(func)


# ---- in a feature worker (autosched.tuning.feature_pool) ----------------------------------------
_worker_caches: OrderedDict = OrderedDict()


def _make_in_worker(spec: tuple[str, str], configs: list[tuple[int, ...]]) -> list[Candidate]:
    """The candidates of `configs` in the space rebuilt from `spec` (workload JSON, target kind)."""
    cache = _worker_caches.get(spec)
    if cache is None:
        w = Workload.from_json(spec[0])
        cache = CandidateCache(w, make_space(w, spec[1]), spec[1], parallel=False)
        _worker_caches[spec] = cache
        while len(_worker_caches) > 8:
            _worker_caches.popitem(last=False)
    else:
        _worker_caches.move_to_end(spec)
    return [cache.make(tuple(c)) for c in configs]  # the caller keeps them: a worker holds only spaces
