"""Which renderer serves which target: a table, so adding a target adds a row, not a branch.

Each entry takes (schedule, build arguments, kernel name) and returns the rendered source and
the generic loop nest (the cost model's features come from the latter on every target).
Renderers are imported on first use: the cpu path never imports the GPU code and vice versa.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from autosched.codegen.source import KernelSource
from autosched.schedule.ir import LoweredFunc
from autosched.schedule.state import ScheduleError
from autosched.te.tensor import Tensor

RenderFn = Callable[[object, Sequence[Tensor], str], tuple[KernelSource, LoweredFunc]]


def _cpu(s, args: Sequence[Tensor], name: str) -> tuple[KernelSource, LoweredFunc]:
    from autosched.codegen.c import render_c
    from autosched.schedule.lower import lower_state

    f = lower_state(s.state, list(args), "cpu", name)
    return render_c(f), f


def _cuda(s, args: Sequence[Tensor], name: str) -> tuple[KernelSource, LoweredFunc]:
    from autosched.codegen.cuda import render_cuda
    from autosched.schedule.lower_gpu import lower_gpu

    g = lower_gpu(s, args, name)
    return render_cuda(g), g.func


def _triton(s, args: Sequence[Tensor], name: str) -> tuple[KernelSource, LoweredFunc]:
    from autosched.codegen.triton_gen import render_triton

    return render_triton(s, args, name)


RENDERERS: dict[str, RenderFn] = {"cpu": _cpu, "cuda": _cuda, "triton": _triton}


def renderer_for(kind: str) -> RenderFn:
    if kind not in RENDERERS:
        raise ScheduleError(f"target {kind!r} has no renderer (available: {', '.join(RENDERERS)})")
    return RENDERERS[kind]


def _lower_generic(kind: str):
    def fn(s, args: Sequence[Tensor], name: str) -> LoweredFunc:
        from autosched.schedule.lower import lower_state

        return lower_state(s.state, list(args), kind, name)

    return fn


def _lower_cuda(s, args: Sequence[Tensor], name: str) -> LoweredFunc:
    from autosched.schedule.lower_gpu import lower_gpu

    return lower_gpu(s, args, name).func


# the loop nest `asc.lower` shows: for cuda, after cooperative fetch, barriers and shared hoisting
LOWERERS: dict[str, Callable[[object, Sequence[Tensor], str], LoweredFunc]] = {
    "cpu": _lower_generic("cpu"), "cuda": _lower_cuda, "triton": _lower_generic("triton")}
