"""The cpu sketch rule for a reduction output without data reuse (sums, max/min, pooling, norms).

A reduction reads its input once, so its speed is how the loops walk memory and how many
independent accumulators keep the adder busy. Which kernel is fast follows from one structural
fact, the axis that indexes the input's contiguous dimension (`_Layout`):

- it is a spatial axis (column sums, pooling): the output axis is vectorized with the reduction
  outside it. Knobs: `vector` (the width of the output vector; wider than the hardware's lanes it
  is several independent accumulators) and `block` (0: each parallel task owns one output vector
  and walks the whole reduction with strided reads; a width in elements: a task owns that many
  outputs and streams whole input rows through them, which the prefetcher follows).
- it is a reduction axis (row sums, a row max): `lanes` rfactors that axis into that many partial
  results (a multiple of the hardware's lanes; 0: the plain loop), written as explicit vector code
  whose lanes/width vectors are independent accumulators, and summed at the end of each row.
  Without it the accumulator is the output element itself, which gcc keeps in memory inside an
  OpenMP region (its pointers lose `restrict` there): a scalar add and store per element. `rows`
  computes several rows at once, their accumulators interleaved for more adds in flight.
- `split` (P, 1 included): a split reduction for outputs too small to feed every core (whole-tensor
  sums, a few columns): the outermost reduction axis in memory order is cut into P chunks, each a
  parallel partial result over its own contiguous slab (rfactor), and a final stage combines the P
  partials. It is offered only where the output is small (`SPLIT_MAX_OUTPUT`).

Reduction loops are ordered by the input dimension they index, outermost first, whatever order the
te source listed them in. Extents that the vector, lane, block or chunk sizes do not divide are
left to the lowering's guards and loop partitioning (the main part stays guard-free). Measurements:
docs/decisions/cpu-reductions.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from math import prod
from typing import Protocol

from autosched.schedule.schedule import Schedule
from autosched.space.cpu_threads import parallelize
from autosched.space.knobs import VECTOR_CHOICES
from autosched.target.vector import lanes as vector_lanes
from autosched.te.expr import IterVar, TensorRead, walk
from autosched.te.tensor import ComputeOp, Tensor


class _Plan(Protocol):
    actions: list[Callable[[Schedule, dict], None]]
    constraints: list[Callable[[dict], bool]]


class SketchRuleHost(Protocol):
    """What a sketch rule needs of the space it adds to (`cpu_sketch.SketchSpace`): a knob maker
    and the plan of schedule actions; a protocol, so this module does not import the sketch."""

    plan: _Plan

    def _knob(self, name: str, choices: Iterable, kind: str) -> str: ...

SPLIT_CHOICES = (1, 2, 4, 8, 16, 32, 64)
"""Partial results of a split reduction: up to the cores of a large host."""

SPLIT_MAX_OUTPUT = 64 * 64
"""Outputs below which a split reduction is offered: a host of 64 cores each owning a chunk of 64
outputs. Larger outputs parallelize over themselves alone."""

SPLIT_MIN_CHUNK = 4
"""Iterations of the split axis each partial gets at least (smaller chunks only add combine work)."""

ROW_CHOICES = (1, 2, 4)
"""Rows reduced at once along lanes (each row keeps lanes/width vector accumulators live)."""

BLOCK_CHOICES = (256, 1024, 4096)
"""Outputs per parallel task that streams whole input rows (multiples of every vector width)."""

LANE_FALLBACK = 16
"""Lanes of the rfactor for dtypes the C renderer has no vector type for (`omp simd` then)."""


@dataclass(frozen=True)
class _Layout:
    """Where the reduction's axes fall in its largest input's memory order.

    `red_order`: indices into `op.reduce_axis`, outermost input dimension first. `inner_reduce`: the
    index of the reduction axis that alone indexes the input's last dimension, or None (it is a
    spatial axis, a mix, or there is no input)."""

    red_order: tuple[int, ...]
    inner_reduce: int | None


def _layout(op: ComputeOp) -> _Layout:
    reads = [n for n in walk(op.body.source) if isinstance(n, TensorRead)]
    nred = len(op.reduce_axis)
    if not reads:
        return _Layout(tuple(range(nred)), None)
    main = max(reads, key=lambda r: (prod(r.tensor.shape), len(r.indices)))  # first of the largest
    red_ids = {id(a): k for k, a in enumerate(op.reduce_axis)}
    dim_of = dict.fromkeys(range(nred), -1)
    for d, idx in enumerate(main.indices):
        for n in walk(idx):
            if isinstance(n, IterVar) and id(n) in red_ids:
                dim_of[red_ids[id(n)]] = d
    order = tuple(sorted(range(nred), key=lambda k: (dim_of[k], k)))
    last = main.indices[-1]
    inner = red_ids.get(id(last)) if isinstance(last, IterVar) else None
    return _Layout(order, inner)


def _choices_up_to(choices: tuple[int, ...], limit: int) -> list[int]:
    return [c for c in choices if c <= limit]


def reduce_output(space: SketchRuleHost, t: Tensor) -> None:
    """Add the knobs and the schedule action of reduction output `t` to `space`."""
    name = t.name
    op = t.op
    lay = _layout(op)
    last = op.axis[-1]
    out_size = prod(a.extent for a in op.axis)
    width = vector_lanes(op.dtype) or LANE_FALLBACK

    lanes = rows = vec = block = split = None
    if lay.inner_reduce is not None and op.reduce_axis[lay.inner_reduce].extent >= width:
        ext = op.reduce_axis[lay.inner_reduce].extent
        lanes = space._knob(f"{name}.lanes", [0] + [m * width for m in (1, 2, 4) if m * width <= ext], "tile")
        if len(r := _choices_up_to(ROW_CHOICES, last.extent)) > 1:
            rows = space._knob(f"{name}.rows", r, "tile")
            lanes_knob, rows_knob = lanes, rows
            # without lanes there are no rows to interleave: one config of that kind, not one per rows
            space.plan.constraints.append(lambda v: v[lanes_knob] != 0 or v[rows_knob] == r[0])
    else:
        vec = space._knob(f"{name}.vector", _choices_up_to(VECTOR_CHOICES, last.extent), "tile")
        blocks = [0] + [b for b in BLOCK_CHOICES if b < last.extent] + [last.extent]
        if len(blocks := list(dict.fromkeys(blocks))) > 1:
            block = space._knob(f"{name}.block", blocks, "tile")
    split_axis = lay.red_order[0] if op.reduce_axis else None
    if split_axis is not None and out_size <= SPLIT_MAX_OUTPUT:
        ext = op.reduce_axis[split_axis].extent
        parts = [p for p in SPLIT_CHOICES if p == 1 or ext // p >= SPLIT_MIN_CHUNK]
        if len(parts) > 1:
            split = space._knob(f"{name}.split", parts, "tile")

    def act(s: Schedule, v: dict) -> None:
        nparts = v[split] if split else 1
        nlanes = v[lanes] if lanes else 0
        work = name  # the stage that reads the input
        final = None  # the stage that combines the split reduction's partial results
        if nparts > 1:
            ax = s[name].op.reduce_axis[split_axis]
            # P equal chunks (of whole lane vectors) and a remainder of less than P units: lowering
            # peels the remainder off the parallel loop, so it must be small, not a P-th of the work.
            # A chunk holds SPLIT_MIN_CHUNK units at least (fewer, larger partials on small extents)
            unit = nlanes if split_axis == lay.inner_reduce and nlanes else 1
            chunk = max(SPLIT_MIN_CHUNK, ax.extent // (nparts * unit)) * unit
            po, _ = s[name].split(ax.name, factor=chunk)
            work = s.rfactor(name, po.name, factor_axis=0).name
            final = name
        if nlanes:
            _lanes(s, v, work, lay, nlanes, v[rows] if rows else 1)
        else:
            _vector(s, v, work, lay, v[vec] if vec else 1, v[block] if block else 0)
        if final is not None:
            _combine(s, v, final, v[vec] if vec else (width if last.extent >= width else 1))

    space.plan.actions.append(act)


def _fuse_parallel(s: Schedule, v: dict, stage: str, loops: list[str], extent: int,
                   ragged: bool = False) -> str | None:
    """Fuse `loops` (outermost first) into one parallel loop; None when there are none. A loop of
    one iteration, or any loop of a config that chose a serial kernel, is left serial.

    `ragged`: the last loop is the outer loop of a split that does not divide; it goes first, so its
    index is the fused index divided by a constant and loop partitioning can still peel its last
    iteration (as the remainder of a division it could not, and every iteration would keep guards)."""
    if not loops:
        return None
    if ragged and len(loops) > 1:
        loops = [loops[-1], *loops[:-1]]
        s[stage].reorder(*loops)
    outer = s[stage].fuse(*loops).name if len(loops) > 1 else loops[0]
    if extent > 1:
        parallelize(s, stage, outer, v)
    return outer


def _lanes(s: Schedule, v: dict, parent: str, lay: _Layout, nlanes: int, nrows: int) -> None:
    """Rfactor the reduction axis along the input's rows into `nlanes` vector lanes, computed at the
    parallel loop of `parent` (which then sums the lanes), `nrows` rows of it at once."""
    pop = s[parent].op
    k = pop.reduce_axis[lay.inner_reduce]  # rfactor keeps the order of the remaining axes
    _, ki = s[parent].split(k.name, factor=nlanes)
    rf = s.rfactor(parent, ki.name, factor_axis=len(pop.axis)).name
    sp = [a.name for a in s[parent].op.axis]
    exts = [a.extent for a in s[parent].op.axis]
    if nrows > 1:
        ro, ri = s[parent].split(sp[-1], factor=nrows)
        outer, ext = sp[:-1] + [ro.name], prod(exts[:-1]) * -(-exts[-1] // nrows)
    else:
        outer, ext = sp, prod(exts)
    loop = _fuse_parallel(s, v, parent, outer, ext, _ragged(exts[-1], nrows))
    rop = s[rf].op
    rsp = [a.name for a in rop.axis]  # the parent's axes, then the lane
    red = [rop.reduce_axis[j].name for j in lay.red_order]
    s[rf].reorder(*rsp[:-2], *red, rsp[-2], rsp[-1])
    s[rf].vectorize(rsp[-1])
    if nrows > 1:
        s[rf].unroll(rsp[-2])
    s[rf].compute_at(s[parent], loop)
    s._anchor = (parent, loop)


def _vector(s: Schedule, v: dict, stage: str, lay: _Layout, width: int, block: int) -> None:
    """The output's last axis innermost (vectorized when `width` > 1) under the reduction, the other
    output axes (and the split's partial axis) in one parallel loop; `block` > `width` puts that many
    outputs in each parallel task and the reduction outside them."""
    op = s[stage].op
    sp = [a.name for a in op.axis]
    exts = [a.extent for a in op.axis]
    red = [op.reduce_axis[j].name for j in lay.red_order]
    step = block if block > width else width  # outputs per parallel task along the last axis
    if block > width:
        bo, bi = s[stage].split(sp[-1], factor=block)
        outer, ext = sp[:-1] + [bo.name], prod(exts[:-1]) * -(-exts[-1] // block)
        if width > 1:
            mid, inner = s[stage].split(bi.name, factor=width)
            s[stage].reorder(*outer, *red, mid.name, inner.name)
        else:
            inner = bi
            s[stage].reorder(*outer, *red, inner.name)
    elif width > 1:
        lo, inner = s[stage].split(sp[-1], factor=width)
        outer, ext = sp[:-1] + [lo.name], prod(exts[:-1]) * -(-exts[-1] // width)
        s[stage].reorder(*outer, *red, inner.name)
    else:
        outer, ext = sp, prod(exts)
        inner = None
        s[stage].reorder(*outer, *red)
    if inner is not None and width > 1:
        s[stage].vectorize(inner.name)
    loop = _fuse_parallel(s, v, stage, outer, ext, _ragged(exts[-1], step))
    s._anchor = (stage, loop) if loop is not None else None


def _combine(s: Schedule, v: dict, stage: str, width: int) -> None:
    """The final stage of a split reduction: each output sums its partial results, the output's last
    axis vectorized, its outer axes parallel."""
    op = s[stage].op
    sp = [a.name for a in op.axis]
    exts = [a.extent for a in op.axis]
    p = op.reduce_axis[0].name
    if width > 1 and exts[-1] >= width:
        lo, inner = s[stage].split(sp[-1], factor=width)
        outer, ext = sp[:-1] + [lo.name], prod(exts[:-1]) * -(-exts[-1] // width)
        s[stage].reorder(*outer, p, inner.name)
        s[stage].vectorize(inner.name)
    else:
        outer, ext = sp, prod(exts)
    _fuse_parallel(s, v, stage, outer, ext, _ragged(exts[-1], width))


def _ragged(extent: int, factor: int) -> bool:
    """Whether a split of `extent` by `factor` has a partial last iteration after full ones."""
    return factor > 1 and extent > factor and extent % factor != 0
