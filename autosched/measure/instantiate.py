"""From a `MeasureInput` (plain JSON) to generated source: what a build worker runs.

Workers rebuild the workload from its JSON (the DAG travels with it), so a remote Ray worker needs
no registry import; the steps replay on that DAG exactly as they did in the tuner.
"""

from __future__ import annotations

import functools
import json

from autosched.codegen.source import KernelSource
from autosched.measure.types import MeasureInput
from autosched.schedule.schedule import Schedule
from autosched.schedule.state import ScheduleError
from autosched.schedule.steps import step_from_dict


@functools.lru_cache(maxsize=64)
def _workload(workload_json: str):
    from autosched.workload import Workload

    return Workload.from_json(workload_json)


def schedule_of(inp: MeasureInput) -> tuple[Schedule, list]:
    """The schedule and the build arguments described by `inp`."""
    w = _workload(inp.workload_json)
    try:
        steps = json.loads(inp.steps_json)
    except json.JSONDecodeError as exc:
        raise ScheduleError(f"steps are not valid JSON: {exc}") from None
    if not isinstance(steps, list):
        raise ScheduleError("steps must be a JSON list")
    s = Schedule(w.dag, [step_from_dict(x) for x in steps])
    args = [w.dag[name] for name in w.args_order]
    return s, args


def render_candidate(inp: MeasureInput) -> KernelSource:
    """Lower and render the candidate; raises ScheduleError when its steps do not apply."""
    from autosched.build_module import render

    s, args = schedule_of(inp)
    src, _ = render(s, args, inp.target)
    return src
