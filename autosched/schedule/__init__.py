"""Schedules: steps, state and primitives, the API a user writes schedules with."""

from autosched.schedule.schedule import LoopRef, Schedule, StageHandle, create_schedule
from autosched.schedule.state import ScheduleError
from autosched.schedule.steps import STEP_TYPES, Step, step_from_dict

__all__ = ["LoopRef", "STEP_TYPES", "Schedule", "ScheduleError", "StageHandle", "Step", "create_schedule",
           "step_from_dict"]
