"""Random legal-or-not schedules for the property test (and for ad-hoc fuzzing with `random`).

The generator looks at the schedule's current state to propose steps that are mostly plausible
(existing stages, current loops, consumers as compute_at targets) and sometimes not (stale or
unknown loops, factors of 0 or larger than the extent, placeholders, outputs). Choices go through a
small `Chooser` so the same code is driven by hypothesis (`HypChooser`) or by `random`.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import autosched as asc
from autosched import te
from autosched.schedule.state import Stage

FACTORS = (1, 2, 3, 4, 5, 7, 8, 13, 16, 17, 32, 64, 0, -2)
EXTENTS = (1, 2, 3, 4, 5, 7, 8, 13, 16, 17)
DTYPES = ("float32",) * 6 + ("float64", "float16", "bfloat16", "int32", "int64")
SCOPES = ("local", "global", "shared")

# (op name, function of a chooser giving (args, kwargs))
OPS: dict[str, Any] = {
    "matmul": lambda c: ((c.pick(EXTENTS), c.pick(EXTENTS), c.pick(EXTENTS)), {"dtype": c.pick(DTYPES)}),
    "batch_matmul": lambda c: ((c.pick((1, 2, 3)), c.pick(EXTENTS), c.pick(EXTENTS), c.pick((1, 3, 7))), {}),
    "dense_bias_relu": lambda c: ((c.pick(EXTENTS), c.pick(EXTENTS), c.pick(EXTENTS)), {"dtype": c.pick(DTYPES)}),
    "conv2d_nchw": lambda c: ((1, c.pick((1, 2, 3)), c.pick((5, 7, 8)), c.pick((5, 6, 9)), c.pick((2, 3, 4)),
                               c.pick((1, 3)), c.pick((1, 3))),
                              {"stride": c.pick((1, 2)), "padding": c.pick((0, 1))}),
    "depthwise_conv2d_nchw": lambda c: ((1, c.pick((1, 2, 3)), c.pick((5, 7, 8)), c.pick((5, 6, 9)),
                                         c.pick((1, 3)), c.pick((1, 3))),
                                        {"stride": c.pick((1, 2)), "padding": c.pick((0, 1))}),
    "softmax": lambda c: ((c.pick(EXTENTS), c.pick(EXTENTS)), {}),
    "layernorm": lambda c: ((c.pick(EXTENTS), c.pick(EXTENTS)), {}),
    "gelu": lambda c: ((c.pick(EXTENTS), c.pick(EXTENTS)), {}),
    "reduce": lambda c: (((c.pick(EXTENTS), c.pick(EXTENTS), c.pick((1, 3, 4))), c.pick((0, 1, 2, (0, 2), (1, 2)))),
                         {"kind": c.pick(("sum", "max", "min")), "keepdims": c.pick((False, True)),
                          "dtype": c.pick(DTYPES)}),
    "transpose": lambda c: (((c.pick(EXTENTS), c.pick(EXTENTS), c.pick((2, 3))), c.pick(((0, 2, 1), (2, 0, 1),
                                                                                         (1, 0, 2)))),
                          {"dtype": c.pick(DTYPES)}),
    "pool2d": lambda c: ((1, c.pick((1, 2)), c.pick((5, 7, 8)), c.pick((5, 6, 9)), c.pick((2, 3))),
                         {"stride": c.pick((1, 2)), "padding": c.pick((0, 1)), "kind": c.pick(("max", "avg"))}),
}


STATS: dict[str, Counter] = {}  # op name -> examples, built, refused, steps, refused_steps (property test)


def summary_lines() -> list[str]:
    """The property test's built/refused split, one line per op and a total."""
    lines, total = [], Counter()
    for name, c in sorted(STATS.items()):
        total.update(c)
        lines.append(f"{name:22s} examples {c['examples']:4d}  built {c['built']:4d}  refused {c['refused']:4d}  "
                     f"steps {c['steps']:4d} (+{c['refused_steps']} refused)")
    if lines:
        lines.append(f"{'total':22s} examples {total['examples']:4d}  built {total['built']:4d}  refused "
                     f"{total['refused']:4d}  steps {total['steps']:4d} (+{total['refused_steps']} refused)")
    return lines


class Chooser:
    def pick(self, seq: Sequence[Any]) -> Any:
        raise NotImplementedError

    def chance(self, p: float) -> bool:
        return self.pick(range(100)) < p * 100

    def subset(self, seq: Sequence[Any]) -> list[Any]:
        return [x for x in seq if self.chance(0.5)]


class RandomChooser(Chooser):
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def pick(self, seq: Sequence[Any]) -> Any:
        return self.rng.choice(list(seq))


class HypChooser(Chooser):
    def __init__(self, data: Any) -> None:
        from hypothesis import strategies as st

        self.data, self.st = data, st

    def pick(self, seq: Sequence[Any]) -> Any:
        return self.data.draw(self.st.sampled_from(list(seq)))


@dataclass
class Trace:
    """What happened to one random schedule."""

    calls: list[str] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)  # (call, message)


def _computes(s: asc.Schedule) -> list[Stage]:
    return [st for st in s.state.stages if not st.is_placeholder]


def _loop(c: Chooser, st: Stage) -> str:
    r = c.pick(range(20))
    if r == 0:
        return "no_such_loop"
    if r == 1:
        return c.pick([lp.name for lp in st.all_loops()] or ["i"])
    return c.pick([lp.name for lp in st.leaf_loops] or ["i"])


def _readers(s: asc.Schedule, name: str) -> list[Stage]:
    return [st for st in _computes(s) if any(t.name == name for t in st.op.input_tensors())]


KINDS = 2 * (["split"] * 5 + ["fuse"] * 2 + ["reorder"] * 2 + ["annotate"] * 4 + ["compute_at"] * 4 + [
    "tile", "pragma", "cache_read", "cache_write", "cache_write", "compute_inline", "compute_inline",
    "compute_root", "rfactor"]) + ["bind"]  # bind is always refused on cpu: keep it rare


def _plausible_stage(s: asc.Schedule, c: Chooser, kind: str, comps: list[Stage]) -> Stage:
    """Mostly a stage the step can apply to, sometimes any compute stage."""
    fits = {
        "compute_at": [st for st in comps if not st.is_output],
        "compute_inline": [st for st in comps if not st.is_output and not st.has_reduce],
        "cache_write": [st for st in comps if not st.is_transformed() and st.attach == ("root",)],
        "rfactor": [st for st in comps if st.has_reduce and not st.is_transformed()],
    }.get(kind, comps)
    return c.pick(fits) if fits and c.chance(0.85) else c.pick(comps)


def random_step(s: asc.Schedule, c: Chooser) -> tuple[str, Any]:
    """One random primitive call on `s`: (description, thunk)."""
    comps = _computes(s)
    kind = c.pick(KINDS)
    st = _plausible_stage(s, c, kind, comps)
    h = s[st.name]
    if kind == "split":
        lp = _loop(c, st)
        if c.chance(0.8):
            f = c.pick(FACTORS)
            return f"s[{st.name!r}].split({lp!r}, factor={f})", lambda: h.split(lp, factor=f)
        f = c.pick(FACTORS)
        return f"s[{st.name!r}].split({lp!r}, nparts={f})", lambda: h.split(lp, nparts=f)
    if kind == "fuse":
        names = [lp.name for lp in st.leaf_loops]
        if len(names) >= 2 and c.chance(0.85):
            k = c.pick(range(len(names) - 1))
            n = c.pick((2, 2, 3))
            loops = names[k:k + n]
        else:
            loops = [_loop(c, st), _loop(c, st)]
        return f"s[{st.name!r}].fuse(*{loops!r})", lambda: h.fuse(*loops)
    if kind == "reorder":
        names = [lp.name for lp in st.leaf_loops]
        sub = c.subset(names) if c.chance(0.5) else list(names)
        order = list(sub)
        for k in range(len(order) - 1, 0, -1):  # Fisher-Yates through the chooser
            j = c.pick(range(k + 1))
            order[k], order[j] = order[j], order[k]
        if c.chance(0.05):
            order.append(order[0] if order else "no_such_loop")
        return f"s[{st.name!r}].reorder(*{order!r})", lambda: h.reorder(*order)
    if kind == "tile":
        x, y = _loop(c, st), _loop(c, st)
        fx, fy = c.pick(FACTORS), c.pick(FACTORS)
        return f"s[{st.name!r}].tile({x!r}, {y!r}, {fx}, {fy})", lambda: h.tile(x, y, fx, fy)
    if kind == "annotate":
        lp = _loop(c, st)
        ann = c.pick(("parallel", "vectorize", "unroll", "vectorize"))
        return f"s[{st.name!r}].{ann}({lp!r})", lambda: getattr(h, ann)(lp)
    if kind == "pragma":
        lp = _loop(c, st)
        v = c.pick((0, 4, 16, 64, 512))
        return f"s[{st.name!r}].pragma({lp!r}, 'auto_unroll_max_step', {v})", \
            lambda: h.pragma(lp, "auto_unroll_max_step", v)
    if kind == "bind":
        lp = _loop(c, st)
        return f"s[{st.name!r}].bind({lp!r}, 'threadIdx.x')", lambda: h.bind(lp, "threadIdx.x")
    if kind == "cache_read":
        t = c.pick(s.state.stages)
        readers = [r.name for r in _readers(s, t.name)]
        rd = (c.subset(readers) or readers[:1]) if c.chance(0.9) else [st.name]
        scope = c.pick(SCOPES)
        layout = c.pick(["transposed", "outer_last"]) \
            if len(s.state.tensors[t.name].shape) >= 2 and c.chance(0.3) else ""
        return f"s.cache_read({t.name!r}, {scope!r}, {rd!r}, layout={layout!r})", \
            lambda: s.cache_read(t.name, scope, rd, layout)
    if kind == "cache_write":
        scope = c.pick(SCOPES)
        return f"s.cache_write({st.name!r}, {scope!r})", lambda: s.cache_write(st.name, scope)
    if kind == "compute_at":
        readers = _readers(s, st.name)
        tgt = c.pick(readers) if readers and c.chance(0.9) else c.pick(comps)
        lp = _loop(c, tgt)
        return f"s[{st.name!r}].compute_at(s[{tgt.name!r}], {lp!r})", lambda: h.compute_at(s[tgt.name], lp)
    if kind == "compute_inline":
        return f"s[{st.name!r}].compute_inline()", h.compute_inline
    if kind == "compute_root":
        return f"s[{st.name!r}].compute_root()", h.compute_root
    red = [lp.name for lp in st.leaf_loops if lp.kind == "reduce"]
    lp = c.pick(red) if red and c.chance(0.9) else _loop(c, st)
    fa = c.pick(range(len(st.op.axis) + 1)) if hasattr(st.op, "axis") else 0
    return f"s.rfactor({st.name!r}, {lp!r}, factor_axis={fa})", lambda: s.rfactor(st.name, lp, fa)


def random_schedule(c: Chooser, op_name: str, max_steps: int = 10) -> tuple[asc.Schedule, list[te.Tensor], Trace]:
    """A workload of `op_name` with random small shapes and up to `max_steps` random primitive calls.

    Refused calls raise `ScheduleError` and leave the schedule as it was; they are recorded in the
    trace and the next call goes on from the unchanged schedule."""
    from tests.support.sched_helpers import op

    args, kwargs = OPS[op_name](c)
    tensors = op(op_name, *args, **kwargs)
    s = asc.create_schedule([t for t in tensors if not isinstance(t.op, te.PlaceholderOp)])
    tr = Trace()
    tr.calls.append(f"# {op_name}{args!r} {kwargs!r}")
    for _ in range(c.pick(range(max_steps + 1))):
        desc, thunk = random_step(s, c)
        n_steps = len(s.steps)
        try:
            thunk()
            tr.calls.append(desc)
        except asc.ScheduleError as exc:
            tr.calls.append(f"{desc}  # refused")
            tr.refused.append((desc, str(exc)))
            assert len(s.steps) == n_steps, "a refused step was recorded"
    return s, tensors, tr
