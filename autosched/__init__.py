"""autosched: an auto-scheduling search service for tensor operators."""

from autosched import te
from autosched.build_module import BuiltKernel, build, lower, render
from autosched.schedule import Schedule, ScheduleError, create_schedule
from autosched.target import Target

__version__ = "0.1.0"

__all__ = ["BuiltKernel", "Schedule", "ScheduleError", "Target", "build", "create_schedule", "lower", "render",
           "te", "__version__"]
