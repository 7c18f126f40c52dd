"""`lower`: which lowering serves which target, as a table (the loop nest `asc.lower` shows).

For cuda it is the nest after cooperative fetch, barriers and shared-memory hoisting; cpu and triton
share the generic lowering.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from autosched.lowering.gpu import lower_gpu
from autosched.lowering.ir import LoweredFunc
from autosched.lowering.loop_nest import lower_state
from autosched.schedule.schedule import Schedule
from autosched.target.key import Target
from autosched.te.tensor import Tensor

LowerFn = Callable[[Schedule, Sequence[Tensor], str], LoweredFunc]


def _lower_generic(kind: str) -> LowerFn:
    def fn(s: Schedule, args: Sequence[Tensor], name: str) -> LoweredFunc:
        return lower_state(s.state, list(args), kind, name)

    return fn


def _lower_cuda(s: Schedule, args: Sequence[Tensor], name: str) -> LoweredFunc:
    return lower_gpu(s, args, name).func


LOWERERS: dict[str, LowerFn] = {"cpu": _lower_generic("cpu"), "cuda": _lower_cuda, "triton": _lower_generic("triton")}


def lower(s: Schedule, args: Sequence[Tensor] | None = None, name: str = "default_function",
          target: str | Target = "cpu") -> LoweredFunc:
    """The loop-nest IR of `s` (print it with `.show()`)."""
    if not isinstance(s, Schedule):
        raise TypeError(f"lower expects a Schedule, got {type(s).__name__}")
    tgt = Target.parse(target)
    chosen = list(args) if args is not None else list(s.dag.placeholders) + list(s.dag.outputs)
    return LOWERERS[tgt.kind](s, chosen, name)
