"""Steps printed as the primitive calls that made them (`autosched show`).

Loops and stages are written by name (`s['C'].split('i', factor=4)`; the primitives take names as
well as handles), so the text runs as it is against a fresh `s = asc.create_schedule(...)` of the
same DAG and replays the identical schedule.
"""

from __future__ import annotations

from collections.abc import Sequence

from autosched.schedule.steps import Step


def _names(xs: Sequence[str]) -> str:
    return ", ".join(repr(x) for x in xs)


def step_as_python(s: Step) -> str:
    k = s.kind
    h = f"s[{getattr(s, 'stage', '')!r}]"
    if k == "split":
        arg = f"factor={s.factor}" if s.factor is not None else f"nparts={s.nparts}"
        return f"{h}.split({s.loop!r}, {arg})"
    if k == "fuse":
        return f"{h}.fuse({_names(s.loops)})"
    if k == "reorder":
        return f"{h}.reorder({_names(s.order)})"
    if k == "tile":
        return f"{h}.tile({s.x!r}, {s.y!r}, {s.x_factor}, {s.y_factor})"
    if k == "annotate":
        return f"{h}.{s.annotation}({s.loop!r})"
    if k == "bind":
        return f"{h}.bind({s.loop!r}, {s.thread!r})"
    if k == "cache_read":
        layout = f", layout={s.layout!r}" if s.layout else ""
        return f"s.cache_read({s.tensor!r}, {s.scope!r}, [{_names(s.readers)}]{layout})"
    if k == "cache_write":
        return f"s.cache_write({s.tensor!r}, {s.scope!r})"
    if k == "compute_at":
        return f"{h}.compute_at(s[{s.target!r}], {s.loop!r})"
    if k == "compute_inline":
        return f"{h}.compute_inline()"
    if k == "compute_root":
        return f"{h}.compute_root()"
    if k == "rfactor":
        return f"s.rfactor({s.stage!r}, {s.loop!r}, factor_axis={s.factor_axis})"
    if k == "pragma":
        return f"{h}.pragma({s.loop!r}, {s.key!r}, {s.value})"
    return f"# {s.describe()}"


def steps_as_python(steps: Sequence[Step]) -> str:
    return "\n".join(step_as_python(s) for s in steps)
