"""Loop-nest IR produced by lowering and consumed by the renderers.

Expressions are te expression nodes plus `Load` (a read of a lowered buffer). Statements are a
small closed set, so every renderer handles all of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from autosched.te.expr import Binary, Call, Cast, Const, Expr, Select, TensorRead, Var

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


class Barrier(Stmt):
    """`__syncthreads()`: every thread of the block reaches it before any goes on."""

    def __repr__(self) -> str:
        return "__syncthreads()"


# ---- readable text of a lowered loop nest (`asc.lower(s).show()`) ----------------------------

_OPS = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "mod": "%", "lt": "<", "le": "<=",
        "gt": ">", "ge": ">=", "eq": "==", "ne": "!=", "and": "&&", "or": "||"}


def format_expr(e: Expr) -> str:
    if isinstance(e, Const):
        if e.dtype in ("int32", "int64", "bool"):
            return repr(e.value)
        return repr(float(e.value)) + ("" if e.dtype == "float64" else "f")
    if isinstance(e, Var):
        return e.name
    if isinstance(e, Load):
        return f"{e.buffer.name}[{', '.join(format_expr(i) for i in e.indices)}]"
    if isinstance(e, TensorRead):
        return f"{e.tensor.name}[{', '.join(format_expr(i) for i in e.indices)}]"
    if isinstance(e, Binary):
        if e.op in _OPS:
            return f"({format_expr(e.a)} {_OPS[e.op]} {format_expr(e.b)})"
        return f"{e.op}({format_expr(e.a)}, {format_expr(e.b)})"
    if isinstance(e, Call):
        return f"{e.func}({', '.join(format_expr(a) for a in e.args)})"
    if isinstance(e, Cast):
        return f"{e.dtype}({format_expr(e.value)})"
    if isinstance(e, Select):
        return f"select({format_expr(e.cond)}, {format_expr(e.t)}, {format_expr(e.f)})"
    return repr(e)


def format_stmt(s: Stmt, indent: int = 0) -> list[str]:
    pad = "  " * indent
    if isinstance(s, Seq):
        return [line for x in s.stmts for line in format_stmt(x, indent)]
    if isinstance(s, For):
        ann = "" if s.kind == "serial" else f"  # {s.kind}" + (f" x{s.unroll}" if s.unroll else "")
        head = f"{pad}for {s.var.name} in range({format_expr(s.extent)}):{ann}"
        return [head] + format_stmt(s.body, indent + 1)
    if isinstance(s, Store):
        return [f"{pad}{s.buffer.name}[{', '.join(format_expr(i) for i in s.indices)}] = {format_expr(s.value)}"]
    if isinstance(s, IfThen):
        return [f"{pad}if {format_expr(s.cond)}:"] + format_stmt(s.body, indent + 1)
    if isinstance(s, Allocate):
        b = s.buffer
        return [f"{pad}allocate {b.name}[{', '.join(map(str, b.shape))}] {b.dtype} ({b.scope})"] + \
            format_stmt(s.body, indent)
    if isinstance(s, Comment):
        return [f"{pad}# {s.text}"]
    return [f"{pad}{s!r}"]


def format_func(f: LoweredFunc) -> str:
    params = ", ".join(f"{b.name}: {b.dtype}[{', '.join(map(str, b.shape))}]" for b in f.params)
    return "\n".join([f"def {f.name}({params}):"] + format_stmt(f.body, 1))
