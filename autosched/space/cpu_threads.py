"""Whether a CPU kernel forks threads at all: tiny work runs serially.

Entering an OpenMP parallel region costs about a microsecond even with spinning workers, once per
parallel stage; a kernel whose whole work is a few thousand loop iterations (softmax over a handful
of short rows) spends more on that than on its work. So every cpu sketch space has a `parallel`
knob; its first choice (what seeds take) follows from the DAG's iteration count, and the search
measures the other (see docs/decisions/serial-small-kernels.md).
"""

from __future__ import annotations

import numpy as np

from autosched.schedule.schedule import Schedule
from autosched.te.dag import ComputeDAG
from autosched.te.expr import Reduce

PARALLEL_KNOB = "parallel"
"""The knob's name: without a dot, so it never meets a stage's knobs (`<tensor>.<what>`)."""

SERIAL_ITERATIONS = 1 << 15
"""Loop iterations (output points times reduction extents, summed over stages) under which a kernel
defaults to one thread."""


def iterations(dag: ComputeDAG) -> int:
    """The DAG's loop iterations: every compute's output points times its reduction extents."""
    total = 0
    for t in dag.computes:
        points = int(np.prod(t.op.shape))
        if isinstance(t.op.body, Reduce):
            points *= int(np.prod([a.extent for a in t.op.reduce_axis]))
        total += points
    return total


def parallel_choices(dag: ComputeDAG) -> tuple[bool, bool]:
    """(default, other): serial first for tiny work, parallel first otherwise."""
    return (False, True) if iterations(dag) < SERIAL_ITERATIONS else (True, False)


def parallelize(s: Schedule, stage: str, loop: str, values: dict) -> None:
    """`s[stage].parallel(loop)` unless the config chose a serial kernel."""
    if values.get(PARALLEL_KNOB, True):
        s[stage].parallel(loop)
