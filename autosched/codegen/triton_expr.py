"""Tile expressions for the Triton renderer: te expressions evaluated on blocks of indices.

Every loop variable the kernel sees is one of three things: a scalar (a program id, a serial
loop counter), or a *tile* variable, i.e. `tl.arange` along one dimension of the kernel's tile
space. An expression over them is rendered as Triton source in a `Layout` that says at which
position of which rank each tile dimension sits (`a0[:, None]`); numpy-style broadcasting then
evaluates the whole expression on the tile. Index arithmetic, loads (with masks) and math
calls therefore need no per-op-class code: any te body renders, gathers included.
"""

from __future__ import annotations

from dataclasses import dataclass

from autosched.te.expr import Binary, Call, Cast, Const, Expr, Select, TensorRead, Var, walk

TL_DTYPES = {"float32": "tl.float32", "float64": "tl.float64", "float16": "tl.float16",
             "bfloat16": "tl.bfloat16", "int32": "tl.int32", "int64": "tl.int64", "bool": "tl.int1"}
_INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
          "eq": "==", "ne": "!=", "and": "&", "or": "|", "floordiv": "//", "mod": "%"}
_CALLS = {"exp": "tl.exp({x})", "log": "tl.log({x})", "sqrt": "tl.sqrt({x})", "rsqrt": "tl.rsqrt({x})",
          "tanh": "(2.0 * tl.sigmoid(2.0 * ({x})) - 1.0)", "erf": "tl.erf({x})",
          "sigmoid": "tl.sigmoid({x})", "abs": "tl.abs({x})",
          "floor": "tl.floor({x})", "ceil": "tl.ceil({x})", "neg": "(-{x})", "not": "(~{x})"}
# tanh through sigmoid: libdevice's has no TRITON_INTERPRET (CPU) version, and CI runs kernels there
HALF = ("float16", "bfloat16")


@dataclass(frozen=True)
class TileDim:
    """One dimension of the tile space: `tl.arange(0, size)` masked to `extent`."""

    size: int  # a power of two (tl.arange needs one)
    extent: int  # logical length; lanes at or past it are masked

    @property
    def padded(self) -> bool:
        return self.size != self.extent


@dataclass(frozen=True)
class Layout:
    """Where each tile dimension sits: dim -> position, in tensors of `rank` dimensions."""

    pos: tuple[tuple[int, int], ...]
    rank: int

    def where(self, dim: int) -> int | None:
        for d, p in self.pos:
            if d == dim:
                return p
        return None

    def shape(self, dims: set[int], sizes: list[TileDim]) -> tuple[int, ...]:
        out = [1] * self.rank
        for d in dims:
            p = self.where(d)
            if p is not None:
                out[p] = sizes[d].size
        return tuple(out)


def next_pow2(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


def literal(value: float | int | bool, dtype: str) -> str:
    if dtype == "bool":
        return "True" if value else "False"
    if dtype in ("int32", "int64"):
        return str(int(value))
    v = float(value)
    if v != v:
        return "float('nan')"
    if v in (float("inf"), float("-inf")):
        return "float('inf')" if v > 0 else "-float('inf')"
    return repr(v)


class ExprRenderer:
    """Renders te expressions in a layout; the owner supplies variables, loads and stage values.

    `tile_dim[id(var)]` gives a tile variable's dimension; `scalar[id(var)]` a scalar's name.
    `read(node, layout)` is called for every TensorRead and returns (source, dims).
    """

    def __init__(self, dims: list[TileDim], tile_dim: dict[int, int], scalar: dict[int, str]) -> None:
        self.dims = dims
        self.tile_dim = tile_dim
        self.scalar = scalar
        self.extra_dims: set[int] = set()  # dims of the select conditions around the current point

    def read(self, node: TensorRead, layout: Layout, mask_extra: list[str]) -> tuple[str, set[int]]:
        raise NotImplementedError

    def arange(self, dim: int, layout: Layout) -> str:
        p = layout.where(dim)
        if p is None:
            raise KeyError(dim)
        if layout.rank == 1:
            return f"a{dim}"
        idx = ", ".join(":" if k == p else "None" for k in range(layout.rank))
        return f"a{dim}[{idx}]"

    def dims_of(self, e: Expr) -> set[int]:
        return {self.tile_dim[id(n)] for n in walk(e) if isinstance(n, Var) and id(n) in self.tile_dim}

    def render(self, e: Expr, layout: Layout, mask_extra: list[str] | None = None) -> tuple[str, set[int]]:
        """Source of `e` and the tile dimensions it varies along."""
        m = mask_extra or []
        if isinstance(e, Const):
            return literal(e.value, e.dtype), set()
        if isinstance(e, Var):
            if id(e) in self.tile_dim:
                d = self.tile_dim[id(e)]
                return self.arange(d, layout), {d}
            if id(e) in self.scalar:
                return self.scalar[id(e)], set()
            raise ValueError(f"triton target: loop variable {e.name!r} has no value at this point of the kernel")
        if isinstance(e, TensorRead):
            return self.read(e, layout, m)
        if isinstance(e, Binary):
            a, da = self.render(e.a, layout, m)
            b, db = self.render(e.b, layout, m)
            if e.op in ("min", "max"):
                return f"tl.{'minimum' if e.op == 'min' else 'maximum'}({a}, {b})", da | db
            if e.op == "pow":
                return f"libdevice.pow({a}, {b})", da | db
            return f"({a} {_INFIX[e.op]} {b})", da | db
        if isinstance(e, Call):
            x, dx = self.render(e.args[0], layout, m)
            if e.func == "abs" and e.dtype in ("int32", "int64"):
                return f"tl.abs({x})", dx
            return _CALLS[e.func].format(x=x), dx
        if isinstance(e, Cast):
            x, dx = self.render(e.value, layout, m)
            if isinstance(e.value, Const):
                return literal(e.value.value, e.dtype), set()
            if e.dtype in HALF:  # storage types: round, keep computing in float32
                return f"({x}).to({TL_DTYPES[e.dtype]}).to(tl.float32)", dx
            if not dx and e.value.dtype in ("int32", "int64") and e.dtype in ("int32", "int64"):
                return x, dx
            return f"({x}).to({TL_DTYPES[e.dtype]})", dx
        if isinstance(e, Select):
            c, dc = self.render(e.cond, layout, m)
            saved, self.extra_dims = self.extra_dims, self.extra_dims | dc
            t, dt = self.render(e.t, layout, m + [c])  # loads of the taken branch are masked by `c`
            self.extra_dims = saved
            f, df = self.render(e.f, layout, m)
            return f"tl.where({c}, {t}, {f})", dc | dt | df
        raise TypeError(f"triton target: cannot render {type(e).__name__}")
