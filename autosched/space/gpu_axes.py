"""Tile choices along one axis of a GPU kernel (threads, virtual threads, inner elements, reduction
steps): shared by the GPU sketch rules and their rule-derived seeds."""

from __future__ import annotations

from autosched.space.cpu_sketch import divisors


def divides(n: int, choices) -> list[int]:
    return [c for c in choices if n % c == 0] or [1]


def pow2_upto(n: int, choices) -> list[int]:
    return [c for c in choices if c <= max(n, min(choices))] or [min(choices)]


THREADS, INNER, VTHREADS = (1, 2, 4, 8, 16, 32), (1, 2, 4, 8), (1, 2, 4)


def cuda_trips(n: int) -> list[tuple[int, int, int]]:
    """(virtual threads, threads, inner) choices of a spatial axis of extent n: a thread owns v
    register tiles of i elements, t*i apart. Powers of two that divide n, plus n's own small
    divisors (an axis of 14 tiles as 7 x 2); an extent that is not a multiple of 32 (1000, 14)
    also gets tiles that do not divide it (the last block is guarded)."""
    small = {d for d in divisors(n) if d <= 32}
    ts = sorted(set(THREADS) | small)
    ins = sorted(set(INNER) | {d for d in small if d <= 8})
    ragged = n % 32 != 0
    trip = [(v, t, i) for v in VTHREADS for t in ts for i in ins
            if (v == 1 or i >= 2) and (n % (v * t * i) == 0 or (ragged and v * t * i <= n))]
    return trip or [(1, 1, 1)]


def cuda_rk(n: int) -> list[int]:
    """Reduction steps per shared-memory stage along a reduce axis of extent n."""
    return sorted(set(divides(n, (1, 2, 4, 8, 16, 32)) + ([n] if n <= 32 else [])))
