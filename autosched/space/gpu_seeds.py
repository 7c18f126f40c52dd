"""Rule-derived seeds of the cuda gemm space (`space_gpu`), kept apart from the space's rules.

Like cuBLAS's heuristics or the config list of a Triton autotune, the search starts from
device-sized tiles and improves from there: the seeds below are a handful of configurations
derived by rule from the workload's shapes and the device limits (never from one benchmark's
sizes), measured in the tuner's first batch. A seed that is not a config of the space or fails
its validity predicate is dropped (`space_gpu.gpu_space`).
"""

from __future__ import annotations

from typing import Any

from autosched.space.cpu_sketch import divisors
from autosched.space.gpu_axes import VTHREADS, cuda_rk, cuda_trips
from autosched.target.gpu import SM_COUNT
from autosched.te.dag import ComputeDAG
from autosched.te.expr import IterVar, TensorRead, walk

CUDA_GEMM_SHAPES = ((128, 128, 8, 16), (128, 128, 16, 8), (128, 128, 8, 8), (64, 128, 8, 8), (128, 64, 8, 8),
                    (64, 64, 8, 8))
"""(block extent A side, B side, per-thread extent A side, B side): SIMT SGEMM block shapes,
128x128 with 128 threads of 8x16 values first (float4 reads of both operands from shared memory
feed 4x4 FMAs each), then 256 threads of 8x8, half blocks and 64x64 (small problems, full waves)."""
CUDA_BK = 16
"""Reduction steps per shared-memory stage (double-buffered: 2 x 16 x (128 + 128) floats = 32 KB);
the first shape is also seeded with half and twice as many."""


def _operand_sides(red) -> tuple[list[int], list[int]]:
    """The reduction's spatial dims (positions) on each operand side: those only the first re-used
    operand indexes (M: rows of A; a conv's batch and pixels) and those only the others index (N:
    columns of B; a conv's output channels). Dims every operand indexes (a batch) are on neither."""
    pos = {id(a): d for d, a in enumerate(red.axis)}
    used: dict[str, set[int]] = {}
    for node in walk(red.body.source):
        if isinstance(node, TensorRead):
            used.setdefault(node.tensor.name, set()).update(
                pos[id(v)] for i in node.indices for v in walk(i) if isinstance(v, IterVar) and id(v) in pos)
    ops = [u for u in used.values() if len(u) < len(pos)]
    if len(ops) >= 2:
        rest = set().union(*ops[1:])
        a, b = sorted(ops[0] - rest), sorted(rest - ops[0])
        if a and b:
            return a, b
    nd = len(pos)
    return list(range(nd - 1)), [nd - 1]


def _pow2_divisors(n: int) -> list[int]:
    return [1 << k for k in range(n.bit_length()) if n % (1 << k) == 0]


def _block_factor(n: int, budget: float) -> int:
    """The largest block tile <= budget along an axis of extent n: a power-of-two divisor; the whole
    axis when it fits; any divisor when n has no power-of-two factor of 8 (14 = 2 x 7). When no
    such tile reaches half the budget and n is not a multiple of 32 (1000), a guarded power of two
    whose last block is partly empty, when that idles at most 10% of the axis's tiles."""
    budget = max(budget, 1)
    exact = set(_pow2_divisors(n))
    if n <= budget:
        exact.add(n)
    if n % 8:
        exact.update(divisors(n))
    best = max(c for c in exact if c <= budget)
    guarded = 1 << (int(budget).bit_length() - 1)
    if n % 32 and n > budget and best < budget / 2 and -(-n // guarded) * guarded <= 1.1 * n:
        best = guarded
    return best


def _vthread_inner(r: int) -> tuple[int, int] | None:
    """(virtual threads, inner) with v * i = r values per thread: 4-wide inner tiles when possible
    (128-bit shared reads, tiles strided by threads x 4), else one tile of r."""
    for v, i in ((r // 4, 4), (1, r), (r // 2, 2)):
        if v * i == r and v in VTHREADS and (v == 1 or i >= 2):
            return v, i
    return None


def _thread_split(n: int, b: int, regs: float) -> tuple[int, int, int]:
    """(v, t, i) of a block tile b along an axis of extent n: the most values per thread <= regs
    (the fewest above it when none fits) that the space has."""
    trips, above = set(cuda_trips(n)), None
    for r in sorted(divisors(b), reverse=True):
        vi = _vthread_inner(r)
        if vi is None or (vi[0], b // r, vi[1]) not in trips:
            continue
        if r <= regs:
            return vi[0], b // r, vi[1]
        above = (vi[0], b // r, vi[1])
    return above or (1, 1, 1)


def _side_tiles(dims: list[int], sp: list[int], block: float, regs: float) -> dict[int, tuple[int, int, int]]:
    """Spread a side's block extent and per-thread extent over its dims, innermost first."""
    tiles = {}
    for d in reversed(dims):
        b = _block_factor(sp[d], block)
        v, t, i = _thread_split(sp[d], b, regs)
        tiles[d] = (v, t, i)
        block, regs = block / (v * t * i), regs / (v * i)
    return tiles


def gemm_seeds_cuda(dag: ComputeDAG) -> list[dict[str, Any]]:
    """Seeds of the cuda gemm space: each shape of CUDA_GEMM_SHAPES spread over the operand sides'
    dims (innermost first, by divisibility; batch dims one per block); reduction axes of a window
    (a conv's 3x3) whole, the main one by CUDA_BK steps, at least 4; float4 fetch when the
    innermost output tile and reduction step are multiples of 4; the reduction-major padded shared
    layout; double buffering when there are two steps or more (a block of fewer than 32 threads
    takes fewer values per thread, halved until it has a warp); blocks grouped by 8 along M when M
    is the first axis and has more than 8 blocks, a multiple of 8 (L2 reuse of B). Seeds whose grid
    fills the device (SM_COUNT blocks or more) come first."""
    out = dag.outputs[0].op
    red = next(t.op for t in reversed(dag.computes) if t.op.reduce_axis)
    sp = [a.extent for a in out.axis]
    rk = [a.extent for a in red.reduce_axis]
    side_a, side_b = _operand_sides(red)
    main = max(range(len(rk)), key=lambda r: rk[r])
    window = 1
    for r, n in enumerate(rk):
        if r != main:
            window *= n
    rk_vals = [max(c for c in cuda_rk(n) if c <= n) if r != main else 1 for r, n in enumerate(rk)]

    def bk(target: int) -> int:
        return max(c for c in cuda_rk(rk[main]) if c <= max(4, target // window))

    seeds: list[tuple[bool, dict]] = []
    runs = [(shape, bk(CUDA_BK)) for shape in CUDA_GEMM_SHAPES]
    runs += [(CUDA_GEMM_SHAPES[0], bk(CUDA_BK // 2)), (CUDA_GEMM_SHAPES[0], bk(CUDA_BK * 2))]
    for (ba, bb, ra, rb), bk_main in runs:
        while True:  # a small problem: fewer values per thread until a block has a warp or more
            tiles = {d: (1, 1, 1) for d in range(len(sp))}
            tiles.update(_side_tiles(side_a, sp, ba, ra))
            tiles.update(_side_tiles(side_b, sp, bb, rb))
            threads = 1
            for _, t, _ in tiles.values():
                threads *= t
            if threads >= 32 or ra * rb <= 1:
                break
            ra, rb = max(1, ra // 2), max(1, rb // 2)
        rks = list(rk_vals)
        rks[main] = bk_main
        blocks = 1
        for d, n in enumerate(sp):
            blocks *= -(-n // (tiles[d][0] * tiles[d][1] * tiles[d][2]))
        nb0 = -(-sp[0] // (tiles[0][0] * tiles[0][1] * tiles[0][2]))
        v, t, i = tiles[len(sp) - 1]
        cfg = {f"tile{d}": tiles[d] for d in range(len(sp))}
        cfg.update({f"rk{r}": c for r, c in enumerate(rks)})
        cfg.update(vector_fetch=4 if (v * t * i) % 4 == 0 and rks[-1] % 4 == 0 else 1, smem_layout=2,
                   double_buffer=2 if rk[main] // bk_main >= 2 else 0,
                   group=8 if side_a == [0] and nb0 % 8 == 0 and nb0 > 8 else 1)
        if all(cfg != c for _, c in seeds):
            seeds.append((blocks >= SM_COUNT, cfg))
    return [c for full, c in seeds if full] + [c for full, c in seeds if not full]
