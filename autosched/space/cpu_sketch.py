"""Search spaces generated from the DAG by sketch rules (Ansor style), for the cpu target.

Rules, applied from the outputs backwards:
- a reduction with data reuse (some input is not indexed by every spatial axis: matmul, conv,
  dense) gets multi-level tiling: its spatial axes are split into outer (fused, parallel), middle
  and register levels, the reduction is computed into a local tile (`cache_write`, or the
  element-wise consumer it fuses into) at the last middle loop, with its reduction axes split
  and its innermost spatial loop vectorized; re-used inputs may be packed at the parallel loop;
  where the last axis does not fill whole cache lines and another axis qualifies
  (`space_seeds.channel_axis`: a convolution's output channels), a knob puts the tile's lanes
  along that axis instead, its input packed with that axis innermost;
- an element-wise output fuses its outer axes into one parallel loop and vectorizes an inner
  split of its last axis; row reductions (softmax, layernorm) and injective producers are either
  inlined, computed at that parallel loop, or computed at root;
- a reduction output without reuse (sums along any axes, pooling, norms) follows `cpu_reduce`:
  rows reduced in vector lanes (rfactor), columns vectorized under the reduction in blocks, and a
  small output split over its reduction into parallel partial results;
- every space has a `parallel` knob (`cpu_threads`): tiny work defaults to one thread.
Knobs are the holes: tile factors (Ansor's factorizations of the extent), unroll depth,
compute locations and packing. `SketchSpace.apply(config)` turns a config into a Schedule.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from autosched.schedule.schedule import Schedule
from autosched.space.cpu_reduce import reduce_output
from autosched.space.cpu_seeds import (
    ROW_TILES,
    GemmStage,
    accumulator_budget,
    channel_axis,
    channel_column_tiles,
    gemm_seeds,
    pack_layout,
)
from autosched.space.cpu_threads import PARALLEL_KNOB, parallel_choices, parallelize
from autosched.space.knobs import VECTOR_CHOICES, Config, ConfigSpace, Knob
from autosched.target.vector import lanes, line_lanes
from autosched.te.dag import ComputeDAG
from autosched.te.expr import Call, Cast, IterVar, Reduce, Select, TensorRead, walk
from autosched.te.tensor import ComputeOp, Tensor

UNROLL_CHOICES = (0, 16, 64, 512)
REGISTER_TILE_SPILL = 2
"""A register tile may hold this many times the accumulator budget (`accumulator_budget`) in vectors:
beyond it every FMA spills, and gcc takes from half a minute to past its time limit on the unrolled
tile (see docs/decisions/register-tile-limit.md)."""


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def factorizations(n: int, max_inner: int, max_middle: int,
                   ragged_inner: tuple[int, ...] = ()) -> list[tuple[int, int]]:
    """(middle, inner) pairs whose product divides `n`: the split points of a 3-level tile.

    `ragged_inner` adds inner factors that do not divide `n` (a register tile of 6 rows on 1024), each
    with the middle factors dividing its tile count: only the last tile is partial, and lowering peels
    it off (`loop_partition`) so that every other tile runs without bounds."""
    out = []
    for inner in divisors(n):
        if inner > max_inner:
            continue
        for mid in divisors(n // inner):
            if mid <= max_middle:
                out.append((mid, inner))
    for inner in ragged_inner:
        if n % inner == 0 or inner >= n or inner > max_inner:
            continue
        out.extend((mid, inner) for mid in divisors(-(-n // inner)) if mid <= max_middle)
    return out


def vector_tiles(dtype: str) -> tuple[int, ...]:
    """Lane tiles a register tile may take along its vectorized axis where they do not divide it: one to
    four whole vectors of this host. The partial last tile is peeled off by lowering (`loop_partition`)."""
    w = lanes(dtype)
    return tuple(k * w for k in (1, 2, 3, 4) if w and k * w <= 64)


def has_reuse(op: ComputeOp) -> bool:
    if not isinstance(op.body, Reduce):
        return False
    spatial = {id(a) for a in op.axis if a.extent > 1}  # an axis of one point reuses nothing
    for node in walk(op.body.source):
        if isinstance(node, TensorRead):
            used = {id(n) for i in node.indices for n in walk(i) if isinstance(n, IterVar)}
            if spatial - used:
                return True
    return False


def _reused_inputs(op: ComputeOp) -> list[str]:
    spatial = {id(a) for a in op.axis}
    out = []
    for node in walk(op.body.source):
        if isinstance(node, TensorRead) and node.tensor.name not in out:
            used = {id(n) for i in node.indices for n in walk(i) if isinstance(n, IterVar)}
            if spatial - used and isinstance(node.tensor.op, ComputeOp) is False:
                out.append(node.tensor.name)
    return out


TRANSPOSE_COPY_BLOCK = 16
"""A transposed pack's copy loop over the source's rows is split by this (one 64-byte line of
float32), so each block reads and writes whole lines (see docs/decisions/transposed-pack-blocking.md)."""


@dataclass
class _Plan:
    knobs: list[Knob]
    actions: list[Callable[[Schedule, dict], None]]
    constraints: list[Callable[[dict], bool]] = field(default_factory=list)
    """Predicates over a config's knob values: a knob that means nothing under another's value is
    held at its first choice there, so the space holds no two configs of one schedule."""


class SketchSpace:
    """The knobs of a DAG's sketches and how a config becomes schedule steps."""

    def __init__(self, dag: ComputeDAG, target_kind: str = "cpu") -> None:
        if target_kind != "cpu":
            raise ValueError(f"no sketch rules for target {target_kind!r} in this build (available: cpu)")
        self.dag = dag
        self.plan = _Plan([], [])
        self._gemm_stages: list[GemmStage] = []
        self._generate()
        self._knob(PARALLEL_KNOB, parallel_choices(dag), "flag")
        self.space = self._constrained(ConfigSpace(tuple(self.plan.knobs)))
        self.seeds: tuple[dict, ...] = self._rule_seeds()

    def _constrained(self, cs: ConfigSpace) -> ConfigSpace:
        constraints = tuple(self.plan.constraints)
        if not constraints:
            return cs

        def is_valid(config: Config) -> bool:
            values = cs.values(config)
            return all(rule(values) for rule in constraints)

        return cs.with_validity(is_valid)

    # ---- generation ---------------------------------------------------------------------------
    def _knob(self, name: str, choices, kind: str) -> str:
        """Add a knob and return its name, made unique (`~2`) where the author's names would repeat one
        (an epilogue's axis named like its product's reduction axis): names label knobs, never shape them."""
        taken = {k.name for k in self.plan.knobs}
        base, n = name, 1
        while name in taken:
            n += 1
            name = f"{base}~{n}"
        self.plan.knobs.append(Knob(name, tuple(choices), kind))
        return name

    def _generate(self) -> None:
        dag = self.dag
        consumers = {t.name: dag.consumers(t) for t in dag.tensors}
        outputs = {t.name for t in dag.outputs}
        handled: set[str] = set()
        for t in reversed(dag.computes):
            if t.name in handled:
                continue
            op = t.op
            if t.name in outputs:
                producer = self._fusable_producer(t, consumers)
                if isinstance(op.body, Reduce) and has_reuse(op):
                    self._multi_level(t, None)
                elif producer is not None:
                    self._multi_level(t, producer)
                    handled.add(producer.name)
                elif isinstance(op.body, Reduce):
                    self._reduce_output(t)
                else:
                    self._elementwise_output(t)
            elif isinstance(op.body, Reduce) and has_reuse(op):
                self._multi_level(t, None, root_local=True)
            else:
                self._placement(t, outputs)
            handled.add(t.name)

    def _fusable_producer(self, t: Tensor, consumers: dict) -> Tensor | None:
        """An element-wise output fed by a single-consumer reduction with reuse (dense + bias + relu)."""
        if isinstance(t.op.body, Reduce):
            return None
        for inp in t.op.input_tensors():
            if isinstance(inp.op, ComputeOp) and isinstance(inp.op.body, Reduce) and has_reuse(inp.op) \
                    and len(consumers[inp.name]) == 1 and inp.shape == t.shape:
                return inp
        return None

    def _multi_level(self, t: Tensor, producer: Tensor | None, root_local: bool = False) -> None:
        op = t.op
        acc_op = (producer or t).op
        name = t.name
        n_sp = len(op.axis)

        chan = channel_axis(acc_op, line_lanes(acc_op.dtype)) if line_lanes(acc_op.dtype) else None
        tile_knobs = []
        for d, ax in enumerate(op.axis):
            wide = d in (n_sp - 1, chan)  # an axis the register tile may take its lanes along
            # tiles that need not divide the axis (lowering peels the partial last one): row tiles for
            # the register tile's rows, whole vectors along an axis it may take its lanes along, and
            # runs of columns for a channel-vectorized tile
            ragged = set(ROW_TILES) if d == n_sp - 2 else set()
            if wide:
                ragged |= set(vector_tiles(acc_op.dtype))
            if chan is not None and d == n_sp - 1:
                ragged |= set(channel_column_tiles())
            tile_knobs.append(self._knob(f"{name}.tile.{ax.name}", factorizations(
                ax.extent, 64 if wide else 16, 256, tuple(sorted(ragged, reverse=True))), "tile"))
        red_knobs = [self._knob(f"{name}.tile.{ax.name}", [d for d in divisors(ax.extent) if d <= 512], "tile")
                     for ax in acc_op.reduce_axis]
        unroll = self._knob(f"{name}.unroll", UNROLL_CHOICES, "unroll")
        order = self._knob(f"{name}.outer_order", ("natural", "reversed"), "flag") if n_sp > 1 else None
        packs = []
        for inp in _reused_inputs(acc_op):
            packs.append((inp, self._knob(f"{name}.pack.{inp}", (False, True), "flag")))
        lanes_along = self._knob(f"{name}.lanes", ("last", "channel"), "flag") if chan is not None else None
        vec_lanes = lanes(acc_op.dtype)
        if vec_lanes:
            limit = REGISTER_TILE_SPILL * accumulator_budget(vec_lanes)
            last_knob, chan_knob = tile_knobs[-1], tile_knobs[chan] if chan is not None else None

            def tile_fits(v: dict) -> bool:
                along = chan_knob if chan_knob is not None and v[lanes_along] == "channel" else last_knob
                n = -(-v[along][1] // vec_lanes)
                for kn in tile_knobs:
                    n *= 1 if kn == along else v[kn][1]
                return n <= limit

            self.plan.constraints.append(tile_fits)
        self._gemm_stages.append(GemmStage(name, acc_op, tuple(a.extent for a in op.axis), tuple(tile_knobs),
                                           tuple(red_knobs), unroll, order, tuple(packs), lanes_along, chan))

        def act(s: Schedule, v: dict) -> None:
            if producer is None:
                local = s.cache_write(name, "local")
                lname = local.name
            else:
                lname = producer.name
            axes = [a.name for a in s[name].op.axis]
            outer, mid, inner = [], [], []
            for ax, kn in zip(axes, tile_knobs):
                m, i = v[kn]
                o1, rest = s[name].split(ax, factor=m * i)
                o2, o3 = s[name].split(rest, factor=i)
                outer.append(o1.name)
                mid.append(o2.name)
                inner.append(o3.name)
            if order is not None and v[order] == "reversed":
                outer = outer[::-1]  # column panels outermost: a packed panel serves every row block
            s[name].reorder(*outer, *mid, *inner)
            fused = s[name].fuse(*outer).name if len(outer) > 1 else outer[0]
            parallelize(s, name, fused, v)
            for x in inner[:-1]:
                s[name].unroll(x)
            s[name].vectorize(inner[-1])
            s[lname].compute_at(s[name], mid[-1])
            lop = s[lname].op
            r_out, r_in = [], []
            for ax, kn in zip(lop.reduce_axis, red_knobs):
                a, b = s[lname].split(ax.name, factor=v[kn])
                r_out.append(a.name)
                r_in.append(b.name)
            sp = [a.name for a in lop.axis]
            vector_axis = None
            if lanes_along is not None and v[lanes_along] == "channel":
                # the channels become the tile's lanes (its local buffer is stored channel-last, see
                # `lower_info.vector_last_order`); the output stage still writes whole rows
                vector_axis = acc_op.axis[chan]
                sp = sp[:chan] + sp[chan + 1:] + [sp[chan]]
            s[lname].reorder(*r_out, *r_in, *sp)
            for x in sp[:-1]:
                s[lname].unroll(x)
            s[lname].vectorize(sp[-1])
            if v[unroll]:
                s[lname].pragma(r_in[-1] if r_in else sp[0], "auto_unroll_max_step", v[unroll])
            for inp, kn in packs:
                if v[kn]:
                    layout = pack_layout(acc_op, inp, vector_axis)
                    p = s.cache_read(inp, "global", [lname], layout)
                    copy_axes = s[p.name].op.axis
                    if layout == "transposed" and copy_axes[-2].extent % TRANSPOSE_COPY_BLOCK == 0:
                        s[p.name].split(copy_axes[-2].name, factor=TRANSPOSE_COPY_BLOCK)
                    s[p.name].compute_at(s[name], fused)

        self.plan.actions.append(act)

    def _elementwise_output(self, t: Tensor) -> None:
        name = t.name
        last = t.op.axis[-1]
        vec = self._knob(f"{name}.vector", [c for c in VECTOR_CHOICES if c <= last.extent], "tile")

        lanes = line_lanes(t.op.dtype)
        # streaming stores (whole vectors, around the caches): an output written once and larger than the
        # caches saves the read-for-ownership of its lines; only with vectors of whole 64-byte lines
        # (written as explicit vectors only when what varies along the row is plain arithmetic: a math
        # call, select or cast of the row's elements makes the loop `omp simd`, which has no streaming form)
        plain = not any(isinstance(n, Call | Select | Cast) and any(x is last for x in walk(n))
                        for n in walk(t.op.body))
        stream = self._knob(f"{name}.stream", (False, True), "flag") \
            if plain and lanes and any(c % lanes == 0 for c in VECTOR_CHOICES if c <= last.extent) else None
        if stream is not None:  # vectors of part of a line store nothing streaming: one config of those
            self.plan.constraints.append(lambda v: not v[stream] or v[vec] % lanes == 0)
        self._outer_loop = None

        def act(s: Schedule, v: dict) -> None:
            axes = [a.name for a in s[name].op.axis]
            if len(axes) > 1:
                outer = s[name].fuse(*axes[:-1]).name if len(axes) > 2 else axes[0]
                parallelize(s, name, outer, v)
                inner = axes[-1]
            else:
                o, i = s[name].split(axes[0], factor=max(v[vec], 1) * 64)
                parallelize(s, name, o.name, v)
                outer, inner = o.name, i.name
            if v[vec] > 1:
                _, vi = s[name].split(inner, factor=v[vec])
                s[name].vectorize(vi.name)
                if stream is not None and v[stream] and v[vec] % lanes == 0:
                    s[name].pragma(vi.name, "nontemporal", 1)
            s._anchor = (name, outer)  # where producers may be computed

        self.plan.actions.append(act)

    def _reduce_output(self, t: Tensor) -> None:
        reduce_output(self, t)

    def _placement(self, t: Tensor, outputs: set[str]) -> None:
        name = t.name
        injective = not isinstance(t.op.body, Reduce)
        choices = ("inline", "at", "root") if injective else ("at", "root")
        loc = self._knob(f"{name}.location", choices, "location")
        red = t.op.reduce_axis
        width = lanes(t.op.dtype)
        lane_knob = None
        if not injective and len(red) == 1 and width and red[0].extent >= width:
            # rfactor into whole vectors of independent lanes: a vectorized reduction without fast-math,
            # at any extent (the ragged last chunk's guard becomes a loop bound in lowering)
            choices = [0] + [m * width for m in (1, 2, 4) if m * width <= red[0].extent]
            lane_knob = self._knob(f"{name}.lanes", choices, "tile")

        def act(s: Schedule, v: dict) -> None:
            where = v[loc]
            if lane_knob is not None and v[lane_knob]:
                _, ki = s[name].split(s[name].op.reduce_axis[0].name, factor=v[lane_knob])
                rf = s.rfactor(name, ki.name)
                lane = [a.name for a in s[rf.name].op.axis][0]
                rest = [a.name for a in s[rf.name].op.axis][1:]
                s[rf.name].reorder(*rest, *[a.name for a in s[rf.name].op.reduce_axis], lane)
                s[rf.name].vectorize(lane)
                if where == "at" and getattr(s, "_anchor", None) is not None:
                    anchor, loop = s._anchor
                    s[rf.name].compute_at(s[anchor], loop)
            if where == "inline":
                s[name].compute_inline()
            elif where == "at" and getattr(s, "_anchor", None) is not None:
                anchor, loop = s._anchor
                s[name].compute_at(s[anchor], loop)
            else:
                # the outer axes in one parallel loop; the last stays a loop of its own (fused with the
                # rest, every element recovered its row and column by division;
                # see docs/decisions/padded-input-loops.md)
                axes = [a.name for a in s[name].op.axis]
                outer = axes[:-1] if len(axes) > 1 else axes
                fused = s[name].fuse(*outer).name if len(outer) > 1 else outer[0]
                parallelize(s, name, fused, v)

        # placements run after the output's action (the anchor must exist): prepend-reverse order
        self.plan.actions.append(act)

    def _rule_seeds(self) -> tuple[dict, ...]:
        """The GEMM seeds of `space_seeds` that are configs of this space and apply."""

        stages = self._gemm_stages
        if not stages:
            return ()
        choices = {k.name: k.choices for k in self.space.knobs}
        out = []
        locations = frozenset(k.name for k in self.space.knobs if k.kind == "location")
        for v in gemm_seeds(stages, choices, lanes(stages[0].op.dtype), locations=locations):  # one GEMM stage, or none
            try:
                config = self.space.index_of(v)
                self.apply(config)
            except (ValueError, KeyError):  # ScheduleError is a ValueError
                continue
            if v not in out and self.space.valid(config):
                out.append(v)
        return tuple(out)

    # ---- use ------------------------------------------------------------------------------------
    def apply(self, config) -> Schedule:
        """The schedule of `config` (a tuple of choice indices). Raises ScheduleError if illegal."""
        values = self.space.values(config)
        s = Schedule(self.dag)
        s._anchor = None
        for act in self.plan.actions:
            act(s, values)
        del s._anchor
        return s
