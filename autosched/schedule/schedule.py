"""The user-facing schedule: TVM-like primitives that record `Step`s and replay them.

`s[C].split(i, factor=32)` records a `SplitStep("C", "i", 32)` and applies it to the state.
`Schedule.from_json` replays the recorded steps on the DAG, which gives the identical loop nest.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from autosched.schedule.pretty import steps_as_python
from autosched.schedule.primitives import apply_step
from autosched.schedule.state import ScheduleError, Stage, State
from autosched.schedule.steps import (
    STEP_FORMAT_VERSION,
    AnnotateStep,
    BindStep,
    CacheReadStep,
    CacheWriteStep,
    ComputeAtStep,
    ComputeInlineStep,
    ComputeRootStep,
    FuseStep,
    PragmaStep,
    ReorderStep,
    RfactorStep,
    SplitStep,
    Step,
    TileStep,
    step_from_dict,
)
from autosched.te.dag import ComputeDAG
from autosched.te.expr import IterVar
from autosched.te.tensor import Tensor


class LoopRef:
    """A handle on one loop of one stage (what split/fuse/tile return)."""

    __slots__ = ("stage", "name")

    def __init__(self, stage: str, name: str) -> None:
        self.stage, self.name = stage, name

    def __repr__(self) -> str:
        return f"LoopRef({self.stage}.{self.name})"


class StageHandle:
    """`s[C]`: the primitives of one stage."""

    def __init__(self, sch: Schedule, name: str) -> None:
        self._sch, self.name = sch, name

    @property
    def _stage(self) -> Stage:
        return self._sch.state.stage(self.name)

    @property
    def op(self):
        return self._stage.op

    @property
    def leaf_iter_vars(self) -> list[LoopRef]:
        return [LoopRef(self.name, lp.name) for lp in self._stage.leaf_loops]

    def _loop(self, x: Any) -> str:
        st = self._stage
        if isinstance(x, LoopRef):
            if x.stage != self.name:
                raise ScheduleError(f"loop {x.name!r} belongs to stage {x.stage!r}, not {self.name!r}")
            return x.name
        if isinstance(x, IterVar):
            if id(x) not in st.axis_ids:
                owner = self._sch._owner_of(x)
                where = f"stage {owner!r}" if owner else "another DAG"
                raise ScheduleError(f"axis {x.name!r} belongs to {where}, not stage {self.name!r}")
            return x.name
        if isinstance(x, str):
            return x
        raise ScheduleError(f"stage {self.name!r}: expected a loop (LoopRef, axis or name), got {type(x).__name__}")

    def _ref(self, name: str) -> LoopRef:
        return LoopRef(self.name, name)

    def split(self, loop: Any, factor: int | None = None, nparts: int | None = None) -> tuple[LoopRef, LoopRef]:
        name = self._loop(loop)
        self._sch._apply(SplitStep(self.name, name, factor, nparts))
        return self._ref(f"{name}.outer"), self._ref(f"{name}.inner")

    def fuse(self, *loops: Any) -> LoopRef:
        names = tuple(self._loop(x) for x in loops)
        self._sch._apply(FuseStep(self.name, names))
        return self._ref(self._stage.leaf_loops[[lp.name for lp in self._stage.leaf_loops].index(
            _fused_name(names))].name)

    def reorder(self, *loops: Any) -> None:
        self._sch._apply(ReorderStep(self.name, tuple(self._loop(x) for x in loops)))

    def tile(self, x: Any, y: Any, x_factor: int, y_factor: int) -> tuple[LoopRef, LoopRef, LoopRef, LoopRef]:
        xn, yn = self._loop(x), self._loop(y)
        self._sch._apply(TileStep(self.name, xn, yn, x_factor, y_factor))
        return (self._ref(f"{xn}.outer"), self._ref(f"{yn}.outer"), self._ref(f"{xn}.inner"),
                self._ref(f"{yn}.inner"))

    def parallel(self, loop: Any) -> None:
        self._sch._apply(AnnotateStep(self.name, self._loop(loop), "parallel"))

    def vectorize(self, loop: Any) -> None:
        self._sch._apply(AnnotateStep(self.name, self._loop(loop), "vectorize"))

    def unroll(self, loop: Any) -> None:
        self._sch._apply(AnnotateStep(self.name, self._loop(loop), "unroll"))

    def bind(self, loop: Any, thread: str) -> None:
        self._sch._apply(BindStep(self.name, self._loop(loop), thread))

    def pragma(self, loop: Any, key: str, value: int) -> None:
        self._sch._apply(PragmaStep(self.name, self._loop(loop), key, value))

    def compute_at(self, target: StageHandle, loop: Any) -> None:
        if not isinstance(target, StageHandle):
            raise ScheduleError(f"compute_at of {self.name!r}: target must be s[T], got {type(target).__name__}")
        self._sch._apply(ComputeAtStep(self.name, target.name, target._loop(loop)))

    def compute_inline(self) -> None:
        self._sch._apply(ComputeInlineStep(self.name))

    def compute_root(self) -> None:
        self._sch._apply(ComputeRootStep(self.name))


def _fused_name(names: Sequence[str]) -> str:
    cur = names[0]
    for n in names[1:]:
        cur = f"{cur}.{n}.fused"
    return cur


class Schedule:
    """A DAG plus the steps applied to it."""

    def __init__(self, dag: ComputeDAG | Tensor | Sequence[Tensor], steps: Sequence[Step] = ()) -> None:
        self.dag = dag if isinstance(dag, ComputeDAG) else ComputeDAG(dag)
        self.state = State(self.dag)
        self.steps: list[Step] = []
        for st in steps:
            self._apply(st)

    def _apply(self, step: Step) -> Tensor | None:
        out = apply_step(self.state, step, len(self.steps))
        self.steps.append(step)
        return out

    def _owner_of(self, ax: IterVar) -> str | None:
        for st in self.state.stages:
            if id(ax) in st.axis_ids:
                return st.name
        return None

    def __getitem__(self, t: Tensor | str) -> StageHandle:
        name = t if isinstance(t, str) else getattr(t, "name", None)
        if name is None or not self.state.has_stage(name):
            raise ScheduleError(f"no stage {name!r} in this schedule; stages: {[s.name for s in self.state.stages]}")
        return StageHandle(self, name)

    @property
    def stage_names(self) -> list[str]:
        return [s.name for s in self.state.stages]

    def cache_read(self, tensor: Tensor | str, scope: str, readers: Sequence[Tensor | str],
                   layout: str = "") -> Tensor:
        """A copy of `tensor` in `scope` that `readers` read instead; `layout="transposed"` swaps its
        last two axes (pack a [N, K] weight as [K, N] panels), `layout="outer_last"` moves its first axis
        last (pack a [K, C, R, S] convolution kernel as [C, R, S, K], output channels innermost)."""
        name = tensor if isinstance(tensor, str) else tensor.name
        rd = tuple(r if isinstance(r, str) else r.name for r in readers)
        return self._apply(CacheReadStep(name, scope, rd, layout))

    def cache_write(self, tensor: Tensor | str, scope: str) -> Tensor:
        name = tensor if isinstance(tensor, str) else tensor.name
        return self._apply(CacheWriteStep(name, scope))

    def rfactor(self, tensor: Tensor | str, loop: Any, factor_axis: int = 0) -> Tensor:
        name = tensor if isinstance(tensor, str) else tensor.name
        lname = self[name]._loop(loop)
        return self._apply(RfactorStep(name, lname, factor_axis))

    # ---- serialization -------------------------------------------------------------------------
    def steps_json(self) -> list[dict[str, Any]]:
        return [s.to_dict() for s in self.steps]

    def to_json(self) -> str:
        return json.dumps({"format": "autosched-schedule", "version": STEP_FORMAT_VERSION,
                           "dag": self.dag.to_dict(), "steps": self.steps_json()}, sort_keys=True)

    @staticmethod
    def from_json(text: str, dag: ComputeDAG | None = None) -> Schedule:
        try:
            d = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ScheduleError(f"schedule is not valid JSON: {exc}") from None
        if isinstance(d, list):
            steps_json, dag_json = d, None
        elif isinstance(d, dict) and d.get("format") == "autosched-schedule":
            if d.get("version") != STEP_FORMAT_VERSION:
                raise ScheduleError(f"schedule format version {d.get('version')!r} not supported")
            steps_json, dag_json = d.get("steps", []), d.get("dag")
        else:
            raise ScheduleError("not an autosched schedule (expected format 'autosched-schedule' or a step list)")
        if dag is None:
            if dag_json is None:
                raise ScheduleError("a bare step list needs the DAG it applies to")
            dag = ComputeDAG.from_dict(dag_json)
        if not isinstance(steps_json, list):
            raise ScheduleError("'steps' must be a list")
        return Schedule(dag, [step_from_dict(x) for x in steps_json])

    def as_python(self) -> str:
        """The schedule as primitive calls a person can read and paste."""
        return steps_as_python(self.steps)


def create_schedule(outputs: Tensor | Sequence[Tensor] | ComputeDAG) -> Schedule:
    return Schedule(outputs)
