"""Loop-nest IR produced by lowering and consumed by the renderers.

Expressions are te expression nodes plus `Load` (a read of a lowered buffer). Statements are a
small closed set, so every renderer handles all of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from autosched.te.expr import Expr, Var

LOOP_KINDS = ("serial", "parallel", "vectorized", "unrolled", "bound")


@dataclass(eq=False)
class Buffer:
    """A named array: a kernel argument ("param"), a function-level temporary ("global") or a
    per-attach-point tile ("local")."""

    name: str  # identifier used in generated source
    shape: tuple[int, ...]
    dtype: str
    scope: str  # "param" | "global" | "local" | "shared"
    stage: str = ""  # schedule stage that writes it ("" for inputs)

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


class Load(Expr):
    __slots__ = ("buffer", "indices")

    def __init__(self, buffer: Buffer, indices: tuple[Expr, ...]) -> None:
        self.buffer, self.indices, self.dtype = buffer, indices, buffer.dtype


class Stmt:
    """Base of statements."""


@dataclass(eq=False)
class For(Stmt):
    var: Var
    extent: Expr
    kind: str
    body: Stmt
    loop_name: str = ""
    stage: str = ""
    unroll: int = 0  # explicit unroll factor for kind "unrolled" or auto-unroll pragmas (0 = none)
    thread_tag: str = ""
    streaming: bool = False  # `nontemporal` pragma: stores to outputs in this vectorized loop bypass the caches


@dataclass(eq=False)
class Seq(Stmt):
    stmts: list[Stmt] = field(default_factory=list)


@dataclass(eq=False)
class Store(Stmt):
    buffer: Buffer
    indices: tuple[Expr, ...]
    value: Expr


@dataclass(eq=False)
class IfThen(Stmt):
    cond: Expr
    body: Stmt


@dataclass(eq=False)
class Allocate(Stmt):
    buffer: Buffer
    body: Stmt


@dataclass(eq=False)
class Comment(Stmt):
    text: str


@dataclass(eq=False)
class LoweredFunc:
    """A whole kernel: parameters in call order and the body."""

    name: str
    params: list[Buffer]
    body: Stmt
    uses_math: frozenset[str] = frozenset()

    def show(self) -> str:
        from autosched.lowering.ir_printer import format_func

        return format_func(self)

    def __str__(self) -> str:
        return self.show()


def seq(stmts: list[Stmt]) -> Stmt:
    flat: list[Stmt] = []
    for s in stmts:
        if isinstance(s, Seq):
            flat.extend(s.stmts)
        elif s is not None:
            flat.append(s)
    return flat[0] if len(flat) == 1 else Seq(flat)
