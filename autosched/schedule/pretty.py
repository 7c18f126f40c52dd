"""Steps printed as the primitive calls that made them (`autosched show`)."""

from __future__ import annotations

from collections.abc import Sequence

from autosched.schedule.steps import Step


def _v(name: str) -> str:
    return name.replace(".", "_")


def steps_as_python(steps: Sequence[Step]) -> str:
    lines = []
    for s in steps:
        k = s.kind
        if k == "split":
            arg = f"factor={s.factor}" if s.factor is not None else f"nparts={s.nparts}"
            lines.append(f"{_v(s.loop)}_outer, {_v(s.loop)}_inner = s[{s.stage!r}].split({_v(s.loop)}, {arg})")
        elif k == "fuse":
            lines.append(f"fused = s[{s.stage!r}].fuse({', '.join(_v(x) for x in s.loops)})")
        elif k == "reorder":
            lines.append(f"s[{s.stage!r}].reorder({', '.join(_v(x) for x in s.order)})")
        elif k == "tile":
            lines.append(f"s[{s.stage!r}].tile({_v(s.x)}, {_v(s.y)}, {s.x_factor}, {s.y_factor})")
        elif k == "annotate":
            lines.append(f"s[{s.stage!r}].{s.annotation}({_v(s.loop)})")
        elif k == "bind":
            lines.append(f"s[{s.stage!r}].bind({_v(s.loop)}, {s.thread!r})")
        elif k == "cache_read":
            lines.append(f"s.cache_read({s.tensor!r}, {s.scope!r}, {list(s.readers)!r})")
        elif k == "cache_write":
            lines.append(f"s.cache_write({s.tensor!r}, {s.scope!r})")
        elif k == "compute_at":
            lines.append(f"s[{s.stage!r}].compute_at(s[{s.target!r}], {_v(s.loop)})")
        elif k == "compute_inline":
            lines.append(f"s[{s.stage!r}].compute_inline()")
        elif k == "compute_root":
            lines.append(f"s[{s.stage!r}].compute_root()")
        elif k == "rfactor":
            lines.append(f"s.rfactor({s.stage!r}, {_v(s.loop)}, factor_axis={s.factor_axis})")
        elif k == "pragma":
            lines.append(f"s[{s.stage!r}].pragma({_v(s.loop)}, {s.key!r}, {s.value})")
        else:
            lines.append(f"# {s.describe()}")
    return "\n".join(lines)
