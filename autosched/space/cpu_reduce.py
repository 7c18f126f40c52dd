"""The cpu sketch rule for a reduction output without data reuse (sums, means, pooling, norms).

It parallelizes the output's spatial axes and may move the innermost spatial axis inside the
reduction, so that consecutive outputs are one vector of accumulators.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from autosched.schedule.schedule import Schedule
from autosched.space.knobs import VECTOR_CHOICES
from autosched.te.tensor import Tensor

if TYPE_CHECKING:
    from autosched.space.cpu_sketch import SketchSpace



def reduce_output(space: SketchSpace, t: Tensor) -> None:
    """Add the knobs and the schedule action of reduction output `t` to `space`."""
    name = t.name
    last = t.op.axis[-1]
    vec = space._knob(f"{name}.vector", [c for c in VECTOR_CHOICES if c <= last.extent], "tile")

    def act(s: Schedule, v: dict) -> None:
        op = s[name].op
        axes = [a.name for a in op.axis]
        red = [a.name for a in op.reduce_axis]
        if v[vec] > 1:
            lo, li = s[name].split(axes[-1], factor=v[vec])
            sp_outer = axes[:-1] + [lo.name]
            s[name].reorder(*sp_outer, *red, li.name)
            s[name].vectorize(li.name)
        else:
            sp_outer = axes
        outer = s[name].fuse(*sp_outer).name if len(sp_outer) > 1 else sp_outer[0]
        s[name].parallel(outer)
        s._anchor = (name, outer)

    space.plan.actions.append(act)
