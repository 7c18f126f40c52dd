"""Which search space serves which target: a table (DESIGN: no if/elif chains on a target)."""

from __future__ import annotations

from collections.abc import Callable

from autosched.space.cpu_sketch import SketchSpace
from autosched.space.gpu_sketch import gpu_space
from autosched.workload import Workload


def _cpu(w: Workload):
    return SketchSpace(w.dag, "cpu")


def _gpu(kind: str) -> Callable[[Workload], object]:
    def make(w: Workload):
        return gpu_space(w, kind)

    return make


SPACES: dict[str, Callable[[Workload], object]] = {"cpu": _cpu, "cuda": _gpu("cuda"), "triton": _gpu("triton")}


def make_space(workload: Workload, kind: str):
    """The sketch space (`.space`, `.apply(config)`) of `workload` on target kind `kind`."""
    if kind not in SPACES:
        raise ValueError(f"no search space for target {kind!r} (available: {', '.join(SPACES)})")
    space = SPACES[kind](workload)
    # how a feature worker rebuilds this space in its own process (autosched/tuning/feature_pool.py)
    space.rebuild_spec = (workload.to_json(), kind)
    return space
