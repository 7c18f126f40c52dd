"""autosched: an auto-scheduling search service for tensor operators."""

from autosched import te
from autosched.codegen.render import render
from autosched.compile.cpu_kernel import BuiltKernel, build
from autosched.lowering.targets import lower
from autosched.schedule import Schedule, ScheduleError, create_schedule
from autosched.target import Target
from autosched.workload import Workload, workload

# no subpackage may be named lower/, build/ or tune/: it would shadow the public function of that
# name on this module (see docs/decisions/package-names.md)


def __getattr__(name: str):
    # the tuning API pulls in the measure, search and database layers: import it on first use
    if name in ("tune", "tune_many", "apply_best", "NoTunedScheduleError", "TuneOptions"):
        from autosched.tuning import api as tuning

        return getattr(tuning, name)
    raise AttributeError(f"module 'autosched' has no attribute {name!r}")

__version__ = "0.1.0"

__all__ = ["BuiltKernel", "Schedule", "ScheduleError", "Target", "build", "create_schedule", "lower", "render",
           "te", "Workload", "workload", "tune", "tune_many", "apply_best", "NoTunedScheduleError", "TuneOptions",
           "__version__"]
