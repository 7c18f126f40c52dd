"""One way from stored steps back to a schedule: the tuner, `apply_best`, the CLI, the HTTP API and
the build workers all replay a record's steps here, so they cannot disagree about what it means."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from autosched.schedule.schedule import Schedule
from autosched.schedule.state import ScheduleError
from autosched.schedule.steps import step_from_dict
from autosched.te.tensor import Tensor
from autosched.workload import Workload
from tuning_db import canonical


def parse_steps(steps: str | Sequence[Any]) -> list[dict]:
    """The step dicts of `steps` (a JSON list or the list itself); ScheduleError names what is wrong."""
    try:
        value = canonical.parse_steps(steps)
    except ValueError as exc:
        raise ScheduleError(str(exc)) from None
    if not isinstance(value, list):
        raise ScheduleError(f"steps must be a JSON list, got {type(value).__name__}")
    return list(value)


def schedule_from_steps(workload: Workload, steps: str | Sequence[Any]) -> tuple[Schedule, list[Tensor]]:
    """The schedule `steps` describe on `workload`'s DAG, and the kernel's arguments in call order.

    Raises ScheduleError when a step does not apply (a record of another format or DAG)."""
    s = Schedule(workload.dag, [step_from_dict(x) for x in parse_steps(steps)])
    return s, workload_args(workload)


def workload_args(workload: Workload) -> list[Tensor]:
    """The tensors a kernel of `workload` takes, in the order its arguments are passed."""
    return [workload.dag[name] for name in workload.args_order]
