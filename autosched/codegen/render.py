"""`render`: which renderer serves which target, as a table, so adding a target adds a row, not a branch.

Each entry takes (schedule, build arguments, kernel name) and returns the rendered source and
the generic loop nest (the cost model's features come from the latter on every target).
Renderers are imported on first use: the cpu path never imports the GPU code and vice versa.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from autosched.codegen.source import KernelSource
from autosched.lowering.ir import LoweredFunc
from autosched.schedule.schedule import Schedule
from autosched.schedule.state import ScheduleError
from autosched.target.key import Target
from autosched.te.tensor import Tensor

RenderFn = Callable[[object, Sequence[Tensor], str], tuple[KernelSource, LoweredFunc]]


def _cpu(s, args: Sequence[Tensor], name: str) -> tuple[KernelSource, LoweredFunc]:
    from autosched.codegen.c import render_c
    from autosched.lowering.loop_nest import lower_state

    f = lower_state(s.state, list(args), "cpu", name)
    return render_c(f), f


def _cuda(s, args: Sequence[Tensor], name: str) -> tuple[KernelSource, LoweredFunc]:
    from autosched.codegen.cuda import render_cuda
    from autosched.lowering.gpu import lower_gpu

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


def default_args(s: Schedule) -> list[Tensor]:
    """A kernel's arguments when the caller names none: the DAG's inputs, then its outputs."""
    return list(s.dag.placeholders) + list(s.dag.outputs)


def render(s: Schedule, args: Sequence[Tensor] | None = None, target: str | Target = "cpu",
           name: str = "default_function") -> tuple[KernelSource, LoweredFunc]:
    """The generated source of `s` for `target`, and the loop nest it was rendered from."""
    tgt = Target.parse(target)
    if not isinstance(s, Schedule):
        raise TypeError(f"render expects a Schedule, got {type(s).__name__}")
    return renderer_for(tgt.kind)(s, list(args) if args is not None else default_args(s), name)
