"""Readable text of a lowered loop nest (`asc.lower(s).show()`)."""

from __future__ import annotations

from autosched.lowering.ir import Allocate, Comment, For, IfThen, Load, LoweredFunc, Seq, Stmt, Store
from autosched.te.expr import Binary, Call, Cast, Const, Expr, Select, TensorRead, Var

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
