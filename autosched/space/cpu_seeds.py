"""Rule-derived seeds of the cpu sketch space (`space.SketchSpace`): the classic CPU GEMM structure.

Why: a search from random points can settle far below the structure every BLAS starts from (a
packed B panel two vectors wide serving all rows and an mr x (2 vectors) register tile), which is a
point of the same space (see docs/decisions/cpu-gemm-seeds.md). As the GPU
spaces do (`space_gpu_seeds`), the search starts from a handful of such points derived by rule from
the shapes and this host's vector width (never from one benchmark's sizes); the tuner measures them
in its first batch and the searchers improve from there.

A seed is produced only where the rule fits: one multi-level-tiled stage whose vectorized (last)
axis is the innermost index of a re-used input once packed (B of matmul and batch_matmul; W of
dense, whose [N, K] weight is packed transposed, `pack_layout`); the seed packs that input.
Knobs of other stages take their first choice. Seeds that are not configs of the space or do not
apply are dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from autosched.target.host import cores
from autosched.te.expr import IterVar, TensorRead, walk
from autosched.te.interval import affine, key
from autosched.te.tensor import ComputeOp

MAX_ACCUMULATOR_VECTORS = 16
"""Register tile budget with 32 vector registers (AVX-512): half of them, leaving room for the B
vectors and the broadcast A value (see docs/decisions/cpu-gemm-seeds.md)."""
MAX_ACCUMULATOR_VECTORS_16_REGISTERS = 12
"""Register tile budget with 16 vector registers (AVX2's ymm): 12 accumulators, 2 B vectors and the
broadcast (see docs/decisions/cpu-gemm-seeds.md)."""
CHANNEL_TASKS_PER_CORE = 8
"""Parallel tasks per core a channel seed makes at least, when its rows allow: with the kernel packed
per task costing little, smaller row blocks ran faster than an even split alone asks for (see
docs/decisions/channel-vectorized-tiles.md)."""
IDLE_SHARE = 0.125
"""How much longer than an even split the busiest core's share of a seed's parallel loop may be: blocks
of channels or column panels that end in a partial one, and cores that do not divide the blocks, leave
threads idle at the end of the loop; splitting the rows into more tasks evens it out, at the price of
a packed panel copied per task (see docs/decisions/channel-vectorized-tiles.md)."""
CHANNEL_TILE_VECTORS = 14
"""Accumulator budget of a channel-vectorized tile (`channel_seeds`)
(see docs/decisions/channel-vectorized-tiles.md)."""
ROW_TILES = (8, 6, 4)
"""Rows of the register tile tried, in order (each with two vectors of columns; 4 also with four). A
row tile need not divide the rows: the space offers the ones that do not as ragged tiles
(`space.factorizations`), whose partial last tile lowering peels off."""


def accumulator_budget(lanes: int) -> int:
    """Accumulator vectors a register tile may hold on a host with `lanes` float32 lanes per vector: 32
    registers come with 16 lanes (AVX-512), 16 with 8 (AVX2) or 4 (SSE, NEON's budget kept as low)."""
    return MAX_ACCUMULATOR_VECTORS if lanes >= 16 else MAX_ACCUMULATOR_VECTORS_16_REGISTERS


@dataclass(frozen=True)
class GemmStage:
    """What `SketchSpace._multi_level` created for one stage, as the seed rule needs it."""

    name: str
    op: ComputeOp  # the reduction (the stage itself or the producer fused into it)
    extents: tuple[int, ...]  # the output stage's spatial extents
    tile_knobs: tuple[str, ...]
    red_knobs: tuple[str, ...]
    unroll_knob: str
    order_knob: str | None
    pack_knobs: tuple[tuple[str, str], ...]  # (input name, knob)
    vector_knob: str | None = None  # "last" or "channel": the axis the register tile's lanes run along
    channel: int | None = None  # the channel axis (`channel_axis`), where the stage has one


def channel_axis(op: ComputeOp, line_lanes: int) -> int | None:
    """A spatial axis, other than the last, along which a register tile can take its lanes instead.

    Why: a convolution's output rows (56, 28, 14, 7 wide) are not whole cache-line vectors, so a tile
    vectorized along them runs partly masked or scalar; its output channels are whole vectors, with
    each input value broadcast and the kernel packed channels-innermost
    (see docs/decisions/channel-vectorized-tiles.md). The axis qualifies when lanes along the last axis
    fit badly (`_lanes_fit_badly`: partial lines, or strided reads), its own extent holds at least one
    line (a partial last vector of channels is peeled off), exactly one re-used input is indexed by
    it, as its first index and nowhere else (conv's `kernel[f, c, r, s]`, packed `outer_last`), and
    no other read depends on it (each of their values is one broadcast)."""
    if len(op.axis) < 2 or not _lanes_fit_badly(op, line_lanes):
        return None
    reads = [n for n in walk(op.body.source) if isinstance(n, TensorRead)]
    for d, ax in enumerate(op.axis[:-1]):
        if ax.extent < line_lanes:
            continue
        users = [r for r in reads if any(n is ax for i in r.indices for n in walk(i))]
        if len(users) != 1 or isinstance(users[0].tensor.op, ComputeOp):
            continue
        first, *rest = users[0].indices
        if first is ax and not any(n is ax for i in rest for n in walk(i)):
            return d
    return None


def _lanes_fit_badly(op: ComputeOp, line_lanes: int) -> bool:
    """Whether lanes along the last axis make poor vectors: it does not fill whole lines, or some read
    steps by more than one element per step of it in its innermost index (a strided convolution's
    `x[..., w * 2 + s]`), which no copy of the input in its own layout makes contiguous."""
    last = op.axis[-1]
    if last.extent % line_lanes:
        return True
    for n in walk(op.body.source):
        if isinstance(n, TensorRead) and n.indices:
            coeff = affine(n.indices[-1]).terms.get(key(last), (0, None))[0]
            if abs(coeff) > 1:
                return True
    return False


def pack_layout(op: ComputeOp, name: str, vector_axis: IterVar | None = None) -> str:
    """How the sketch packs input `name` of the reduction `op`, so that the packed copy is contiguous
    along the register tile's lanes. With the lanes along a channel axis (`vector_axis`, see
    `channel_axis`): "outer_last" when the input's first index is that axis. Otherwise, lanes along the
    last spatial axis `s`: "transposed" when the read is `T[..., s, r]` with `r` a reduction axis, as
    nn.Linear's weight `W[j, k]` is read; otherwise "" (the copy keeps the layout)."""
    if vector_axis is not None:
        return "outer_last" if any(isinstance(n, TensorRead) and n.tensor.name == name and n.indices
                                   and n.indices[0] is vector_axis for n in walk(op.body.source)) else ""
    last = op.axis[-1]
    reduce_ids = {id(a) for a in op.reduce_axis}
    for node in walk(op.body.source):
        if isinstance(node, TensorRead) and node.tensor.name == name and len(node.indices) >= 2:
            if node.indices[-2] is last and id(node.indices[-1]) in reduce_ids:
                return "transposed"
    return ""


def _vector_operand(op: ComputeOp) -> str | None:
    """The input whose innermost index, once packed (`pack_layout`), is the reduction's last spatial
    axis (stride 1 along the vectorized loop) and which some spatial axis does not index (re-used
    across rows): B of matmul, W of dense (packed transposed)."""
    last = op.axis[-1]
    spatial = {id(a) for a in op.axis}
    for node in walk(op.body.source):
        if not isinstance(node, TensorRead) or isinstance(node.tensor.op, ComputeOp) or not node.indices:
            continue
        used = {id(n) for i in node.indices for n in walk(i) if isinstance(n, IterVar)}
        if not spatial - used:
            continue
        if node.indices[-1] is last or pack_layout(op, node.tensor.name) == "transposed":
            return node.tensor.name
    return None


def channel_column_tiles() -> tuple[int, ...]:
    """Runs of columns a channel-vectorized tile may take where they do not divide the row: the
    accumulator budget with one and with two vectors of channels (`channel_seeds`)."""
    return (CHANNEL_TILE_VECTORS, CHANNEL_TILE_VECTORS // 2)


def _largest_divisor_at_most(n: int, cap: int) -> int:
    return max(d for d in range(1, min(n, cap) + 1) if n % d == 0)


def _rows_for_tasks(row_tiles: int, blocks: int, tasks: int) -> int:
    """Row tiles of one parallel task: the most (a divisor of `row_tiles`, at most 256) that still gives
    `tasks` tasks with the `blocks` of channels, else one."""
    fits = [d for d in range(1, min(row_tiles, 256) + 1) if row_tiles % d == 0 and blocks * (row_tiles // d) >= tasks]
    return max(fits) if fits else 1


def _rows_per_task(row_tiles: int, extent: int, block: int) -> int:
    """Row tiles of one parallel task: the most (a divisor of `row_tiles`, at most 256) for which the
    tasks, with the blocks of `block` columns or channels over `extent`, keep the cores busy: the
    slowest core's share of the loop within IDLE_SHARE of an even split. A partial last block runs in a
    parallel loop of its own after the full ones (`loop_partition`), so both loops are counted."""
    full, part = extent // block, (extent % block) / block
    p = cores()
    for d in sorted((d for d in range(1, min(row_tiles, 256) + 1) if row_tiles % d == 0), reverse=True):
        g = row_tiles // d
        slowest = -(-full * g // p) + (-(-g // p) * part if part else 0.0)
        if slowest <= (full + part) * g / p * (1 + IDLE_SHARE):
            return d
    return 1


def register_tiles(m: int, n: int, lanes: int) -> list[tuple[int, int]]:
    """(rows, columns) of the seeds' register tiles for an m x n output: ROW_TILES rows by two vectors
    of columns (4 rows also by four), whether or not they divide m and n (a ragged last tile is peeled
    off by lowering); narrower outputs take one vector of columns, fewer rows than ROW_TILES take all."""
    vectors = [2, 4] if n >= 2 * lanes else [1] if n >= lanes else []
    rows = [mr for mr in ROW_TILES if mr < m] or [m]
    out = [(mr, v * lanes) for mr in rows for v in vectors if v == vectors[0] or mr == 4]
    whole = -(-n // lanes)
    if n % lanes and whole <= 4:
        # a row of at most four vectors ending in a partial one: one tile across it, whose partial vector
        # runs masked in registers, rather than panels that leave a few columns to a scalar tail
        out += [(mr, n) for mr in rows]
    return out


def gemm_seeds(stages: list[GemmStage], knob_choices: dict[str, tuple], lanes: int, *,
               locations: frozenset[str]) -> list[dict[str, Any]]:
    """Seeds (knob name -> value) for a space with exactly one GEMM-like multi-level stage; `locations`:
    the knobs of kind "location" (where a producer is computed), known by kind, never by name."""
    if len(stages) != 1 or lanes <= 1:
        return []
    st = stages[0]
    # lanes along channels where they fit (convolutions), then the row-vectorized GEMM seeds (the lanes
    # knob's first choice): a matmul whose columns are not whole lines keeps both
    seeds = channel_seeds(st, knob_choices, lanes, locations=locations) if st.channel is not None else []
    packed = _vector_operand(st.op)
    if packed is None or len(st.extents) < 2 or len(st.red_knobs) != 1:
        return seeds
    m, n = st.extents[-2:]
    base = {k: c[0] for k, c in knob_choices.items()}
    budget = accumulator_budget(lanes)
    for mr, nr in register_tiles(m, n, lanes):
        if mr * -(-nr // lanes) > budget:
            continue
        v = dict(base)
        for kn in st.tile_knobs[:-2]:
            v[kn] = (1, 1)  # batch axes stay outer (parallel)
        # all rows of a panel in one task, unless there are too few panels to keep every core busy
        v[st.tile_knobs[-2]] = (_rows_per_task(-(-m // mr), n, nr), mr)
        v[st.tile_knobs[-1]] = (1, nr)  # one panel of nr columns per parallel task
        v[st.red_knobs[0]] = 1
        v[st.unroll_knob] = 0
        if st.order_knob is not None:
            v[st.order_knob] = "reversed"  # column panels outermost: a packed panel serves every row block
        # a tile across the whole row reads B's rows where they lie (each is contiguous already): a copy
        # per task would cost as much as the task; a transposed weight is still packed
        # (and with a single tile of rows, each element of B is read once: a copy only adds a pass)
        whole_row = nr == n and n % lanes != 0
        reused = m > mr
        for inp, kn in st.pack_knobs:
            v[kn] = inp == packed and (not whole_row or pack_layout(st.op, inp) == "transposed") and (
                reused or pack_layout(st.op, inp) == "transposed")
        seeds.append(v)
    return seeds


def channel_seeds(st: GemmStage, knob_choices: dict[str, tuple], lanes: int, *,
                  locations: frozenset[str]) -> list[dict[str, Any]]:
    """Seeds of a stage vectorized along its channel axis (`channel_axis`): one or two vectors of
    channels by a run of columns (and one or two rows) as the register tile, a task per block of
    channels over all rows, the packed input `outer_last`, and producers (the padded input)
    computed at root, so that the tile's broadcasts read plain memory, not a bounds check."""
    c = st.channel
    assert c is not None and st.vector_knob is not None
    *_, h, w = st.extents
    base = {k: ch[0] for k, ch in knob_choices.items()}
    seeds: list[dict[str, Any]] = []
    for vectors, rows in ((1, 1), (2, 1), (1, 2)):
        cap = CHANNEL_TILE_VECTORS // (vectors * rows)
        cols = _largest_divisor_at_most(w, cap)
        if 2 * cols < cap and w > cap:
            cols = cap  # a ragged run of columns (`channel_column_tiles`): lowering peels the last one
        fi = vectors * lanes
        if st.extents[c] < fi or h % rows or len(st.extents) - 2 == c:
            continue
        v = dict(base)
        for kn in st.tile_knobs:
            v[kn] = (1, 1)
        v[st.tile_knobs[c]] = (1, fi)
        v[st.tile_knobs[-2]] = (_rows_for_tasks(h // rows, -(-st.extents[c] // fi), CHANNEL_TASKS_PER_CORE * cores()),
                                rows)
        v[st.tile_knobs[-1]] = (_largest_divisor_at_most(-(-w // cols), 256), cols)
        for kn in st.red_knobs:
            v[kn] = 1
        v[st.unroll_knob] = 0
        v[st.vector_knob] = "channel"
        if st.order_knob is not None:
            v[st.order_knob] = "natural"
        for _inp, kn in st.pack_knobs:
            v[kn] = True
        for name, ch in knob_choices.items():
            if name in locations and "root" in ch:
                v[name] = "root"
        seeds.append(v)
    return seeds
