"""From a `MeasureInput` (plain JSON) to generated source: what a build worker runs.

Workers rebuild the workload from its JSON (the DAG travels with it), so a remote Ray worker needs
no registry import; the steps replay on that DAG exactly as they did in the tuner.
"""

from __future__ import annotations

import functools

from autosched.codegen.render import render
from autosched.codegen.source import KernelSource
from autosched.compile.types import MeasureInput
from autosched.schedule.replay import schedule_from_steps
from autosched.schedule.schedule import Schedule
from autosched.workload import Workload


@functools.lru_cache(maxsize=64)
def _workload(workload_json: str) -> Workload:
    return Workload.from_json(workload_json)


def schedule_of(inp: MeasureInput) -> tuple[Schedule, list]:
    """The schedule and the build arguments described by `inp`."""
    return schedule_from_steps(_workload(inp.workload_json), inp.steps_json)


def render_candidate(inp: MeasureInput) -> KernelSource:
    """Lower and render the candidate; raises ScheduleError when its steps do not apply."""
    s, args = schedule_of(inp)
    src, _ = render(s, args, inp.target)
    return src
