"""Expression and statement rendering shared by the C-family renderers (C, CUDA C).

Renderers differ by a table of strings (types, intrinsic names, loop pragmas), not by copied
code: `CStyleRenderer` walks the IR and asks its `Dialect` for every spelling.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from autosched.codegen import vector_c as vc
from autosched.codegen.register_tile import promote
from autosched.dtypes import dtype_bytes
from autosched.lowering import arith
from autosched.lowering.ir import Allocate, Buffer, Comment, For, IfThen, Load, LoweredFunc, Seq, Stmt, Store
from autosched.target.vector import lanes
from autosched.te.expr import Binary, Call, Cast, Const, Expr, Select, Var, substitute

_INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
          "eq": "==", "ne": "!=", "and": "&&", "or": "||"}


# storage and arithmetic types of the C family: half types are stored as bits, computed in float
C_STORAGE_TYPES = {"float32": "float", "float64": "double", "float16": "uint16_t", "bfloat16": "uint16_t",
                   "int32": "int32_t", "int64": "int64_t", "bool": "uint8_t"}
C_COMPUTE_TYPES = {"float32": "float", "float64": "double", "float16": "float", "bfloat16": "float",
                   "int32": "int32_t", "int64": "int64_t", "bool": "int"}


@dataclass(frozen=True)
class Dialect:
    """Spellings of one C-family language."""

    storage_types: dict[str, str]
    compute_types: dict[str, str]
    float_funcs: dict[str, str]  # func -> format with {x}, for float32 compute
    double_funcs: dict[str, str]
    restrict: str = "restrict"
    stack_limit_bytes: int = 256 * 1024
    prelude: str = ""
    kernel_prefix: str = ""
    extra: dict[str, str] = field(default_factory=dict)
    reserved: frozenset[str] = frozenset()  # identifiers buffers and loop variables may not take
    reserved_pattern: str = ""  # and a regex of more (macro families of the headers included)


class CStyleRenderer:
    def __init__(self, dialect: Dialect) -> None:
        self.d = dialect
        self.lines: list[str] = []
        self.names: dict[int, str] = {}
        self.used_names: set[str] = set()
        self.ranges: dict[int, int] = {}
        self.funcs_used: set[tuple[str, str]] = set()
        self.vector_loops: list[tuple] = []
        self.subst: dict[Var, Expr] = {}
        self.explicit_vectors = False  # dialects with GCC vector extensions turn this on
        self.streaming_stores = 0  # non-temporal vector stores emitted (`nontemporal` pragma)
        self.dead_lanes_written: set[int] = set()  # stack tiles stored at full width past a partial vector
        self.live_last: dict[int, int | None] = {}  # stack tile -> highest last-dim index its scope uses
        self.source_unroll_limit = 0
        self.loop_starts: list[int] = []
        self.loop_ranges: list[tuple[int, int]] = []

    # ---- names -------------------------------------------------------------------------------
    def ident(self, key: int, base: str) -> str:
        """One C identifier per IR object (`key` = id of a Var or Buffer), never a keyword, a reserved
        or library name, nor another object's identifier (a tensor `j` read in loop `j`)."""
        if key not in self.names:
            base = re.sub(r"[^A-Za-z0-9_]", "_", base) or "v"
            if base[0].isdigit() or base.startswith("_"):
                base = "v" + base
            if base in self.d.reserved or base.startswith("asc_") or \
                    (self.d.reserved_pattern and re.fullmatch(self.d.reserved_pattern, base)):
                base = base + "_"
            name, k = base, 1
            while name in self.used_names:
                k += 1
                name = f"{base}_{k}"
            self.used_names.add(name)
            self.names[key] = name
        return self.names[key]

    def var_name(self, v: Var) -> str:
        return self.ident(id(v), v.name)

    def buf_name(self, b: Buffer) -> str:
        return self.ident(id(b), b.name)

    # ---- expressions -------------------------------------------------------------------------
    def ctype(self, dtype: str) -> str:
        return self.d.compute_types[dtype]

    def const(self, e: Const) -> str:
        v = e.value
        if e.dtype == "bool":
            return "1" if v else "0"
        if e.dtype in ("int32", "int64"):
            return f"{int(v)}" if e.dtype == "int32" else f"{int(v)}LL"
        v = float(v)
        suffix = "" if e.dtype == "float64" else "f"
        if math.isnan(v):
            return "NAN"
        if math.isinf(v):
            return "INFINITY" if v > 0 else "(-INFINITY)"
        return f"{v!r}{suffix}"

    def flat_index(self, buf: Buffer, indices: tuple[Expr, ...]) -> str:
        if self.subst:
            indices = tuple(substitute(i, self.subst) for i in indices)
        flat: Expr = Const(0, "int32")
        for d, idx in enumerate(indices):
            stride = 1
            for n in buf.shape[d + 1:]:
                stride *= n
            flat = Binary("add", flat, Binary("mul", idx, Const(stride, "int32"), "int32"), "int32")
        return self.expr(arith.simplify(flat))

    def load(self, e: Load) -> str:
        ref = f"{self.buf_name(e.buffer)}[{self.flat_index(e.buffer, e.indices)}]"
        if e.buffer.dtype == "float16":
            return f"asc_f16_to_f32({ref})"
        if e.buffer.dtype == "bfloat16":
            return f"asc_bf16_to_f32({ref})"
        return ref

    def nonneg(self, e: Expr) -> bool:
        rng = arith.numeric_range(e, self.ranges)
        return rng is not None and rng[0] >= 0

    def expr(self, e: Expr) -> str:
        if isinstance(e, Const):
            return self.const(e)
        if isinstance(e, Var):
            if e in self.subst:
                return self.expr(self.subst[e])
            return self.var_name(e)
        if isinstance(e, Load):
            return self.load(e)
        if isinstance(e, Binary):
            return self.binary(e)
        if isinstance(e, Call):
            return self.call(e)
        if isinstance(e, Cast):
            inner = self.expr(e.value)
            if e.dtype == "float16":
                return f"asc_round_f16({inner})"
            if e.dtype == "bfloat16":
                return f"asc_round_bf16({inner})"
            return f"(({self.ctype(e.dtype)})({inner}))"
        if isinstance(e, Select):
            return f"({self.expr(e.cond)} ? {self.expr(e.t)} : {self.expr(e.f)})"
        raise TypeError(f"cannot render {type(e).__name__}")

    def binary(self, e: Binary) -> str:
        a, b = self.expr(e.a), self.expr(e.b)
        op = e.op
        if op in _INFIX:
            return f"({a} {_INFIX[op]} {b})"
        if op in ("floordiv", "mod"):
            if self.nonneg(e.a) and isinstance(e.b, Const) and e.b.value > 0:
                return f"({a} {'/' if op == 'floordiv' else '%'} {b})"
            return f"asc_{op}_{e.dtype}({a}, {b})"
        if op in ("min", "max"):
            cmp = "<" if op == "min" else ">"
            return f"(({a}) {cmp} ({b}) ? ({a}) : ({b}))"
        if op == "pow":
            fn = "pow" if e.dtype == "float64" else "powf"
            return f"{fn}({a}, {b})"
        raise TypeError(f"cannot render binary op {op}")

    def call(self, e: Call) -> str:
        x = self.expr(e.args[0])
        if e.func == "neg":
            return f"(-{x})"
        if e.func == "not":
            return f"(!{x})"
        if e.func == "abs" and e.dtype in ("int32", "int64"):
            return f"(({x}) < 0 ? -({x}) : ({x}))"
        table = self.d.double_funcs if e.dtype == "float64" else self.d.float_funcs
        fmt = table[e.func]
        for m in re.finditer(r"\b([a-z0-9]+)\(", fmt):
            self.funcs_used.add((m.group(1), e.dtype))
        return fmt.format(x=x)

    # ---- statements --------------------------------------------------------------------------
    def emit(self, text: str, indent: int) -> None:
        self.lines.append("  " * indent + text)

    def store_value(self, buf: Buffer, value: str) -> str:
        if buf.dtype == "float16":
            return f"asc_f32_to_f16({value})"
        if buf.dtype == "bfloat16":
            return f"asc_f32_to_bf16({value})"
        return value

    def stmt(self, s: Stmt, indent: int) -> None:
        if isinstance(s, Seq):
            for x in s.stmts:
                self.stmt(x, indent)
        elif isinstance(s, For):
            self.loop(s, indent)
        elif isinstance(s, Store):
            ref = f"{self.buf_name(s.buffer)}[{self.flat_index(s.buffer, s.indices)}]"
            self.emit(f"{ref} = {self.store_value(s.buffer, self.expr(s.value))};", indent)
        elif isinstance(s, IfThen):
            self.emit(f"if ({self.expr(s.cond)}) {{", indent)
            self.stmt(s.body, indent + 1)
            self.emit("}", indent)
        elif isinstance(s, Allocate):
            self.allocate(s, indent)
        elif isinstance(s, Comment):
            self.emit(f"/* {s.text} */", indent)
        else:
            raise TypeError(f"cannot render {type(s).__name__}")

    def allocate(self, s: Allocate, indent: int) -> None:
        b = s.buffer
        name = self.buf_name(b)
        st = self.d.storage_types[b.dtype]
        nbytes = b.size * dtype_bytes(b.dtype)
        self.emit("{", indent)
        if nbytes <= self.d.stack_limit_bytes and b.scope == "local":
            self.emit(f"{st} {name}[{b.size}] __attribute__((aligned(64)));", indent + 1)
            decl = len(self.lines) - 1
            if self.explicit_vectors:  # which lanes of the tile this scope ever uses (`vc.full_width_ok`)
                self.live_last[id(b)] = vc.last_index_max(s.body, b, dict(self.ranges))
            self.stmt(s.body, indent + 1)
            if self.explicit_vectors:  # a register tile: one variable per vector (`register_tile`)

                promote(self.lines, decl, name, b.size)
        else:
            rounded = -(-nbytes // 64) * 64
            self.emit(f"{st}* {self.d.restrict} {name} = ({st}*)aligned_alloc(64, {rounded});", indent + 1)
            self.emit(f"if ({name} == NULL) {{ asc_error = 1; }} else {{", indent + 1)
            self.stmt(s.body, indent + 2)
            self.emit(f"free({name});", indent + 2)
            self.emit("}", indent + 1)
        self.emit("}", indent)

    def loop(self, s: For, indent: int) -> None:
        n = arith.const_value(s.extent)
        if self.explicit_vectors and s.kind == "vectorized" and self.vector_loop(s, indent):
            return
        if s.kind == "unrolled" and n is not None and 0 < n <= self.source_unroll_limit \
                and _size(s.body) * n <= 4 * self.source_unroll_limit:
            for c in range(n):
                self.subst[s.var] = Const(c, "int32")
                self.stmt(s.body, indent)
            del self.subst[s.var]
            return
        v = self.var_name(s.var)
        ext = str(n) if n is not None else self.expr(s.extent)
        pragma = self.loop_pragma(s, n)
        if pragma:
            self.emit(pragma, indent)
        if n is not None:
            self.ranges[id(s.var)] = n
        else:
            rng = arith.numeric_range(s.extent, self.ranges)
            if rng is not None:
                self.ranges[id(s.var)] = max(rng[1], 1)
        start = len(self.lines) + 1
        self.emit(f"for (int32_t {v} = 0; {v} < {ext}; ++{v}) {{", indent)
        self.loop_starts.append(start)
        first_inner = len(self.loop_ranges)
        streams_before = self.streaming_stores
        self.stmt(s.body, indent + 1)
        if s.kind == "parallel" and self.streaming_stores > streams_before:
            # streaming stores are weakly ordered: each thread fences its own before the team's barrier
            self.emit("asc_sfence();", indent + 1)
        self.loop_starts.pop()
        self.emit("}", indent)
        if s.kind == "vectorized":
            # lines of loops nested inside: gcc vectorizing one of them is not this loop vectorized
            nested = tuple(self.loop_ranges[first_inner:])
            self.vector_loops.append((start, len(self.lines), tuple(self.loop_starts), nested))
        self.loop_ranges.append((start, len(self.lines)))

    def loop_pragma(self, s: For, n: int | None) -> str:
        """The pragma line before a loop of kind `s.kind` ("" for none); dialects override it."""
        if s.kind == "parallel":
            return "#pragma omp parallel for schedule(static)"
        if s.kind == "vectorized":
            return "#pragma omp simd"
        if s.kind == "unrolled":
            return f"#pragma GCC unroll {min(n, 64) if n is not None else 8}"
        return ""

    def vector_loop(self, s: For, indent: int) -> bool:
        """Write `s` with explicit vector types; False when its body does not qualify."""
        dtype = vc.explicit_plan(s)
        if dtype is None:
            return False
        w = lanes(dtype)
        n = arith.const_value(s.extent)
        vt = vc.vtype(dtype)
        stores = vc._stores(s.body)
        accumulators = {id(st.buffer): st.buffer for st in stores}
        for base in range(0, n, w):
            self.subst[s.var] = Const(base, "int32")
            # a partial last vector: `part` lanes are real (see vector_c's module docstring)
            part = min(w, n - base)
            full = part == w or None
            if full is None:
                full = {i for i, b in accumulators.items() if all(
                    vc.full_width_ok(st.buffer, st.indices, s.var, n, base + w - 1, self.ranges,
                                     self.live_last.get(i)) for st in stores if st.buffer is b)}
            for st in stores:
                val = self.vexpr(st.value, s.var, vt, full, part)
                if not vc.varies(st.value, s.var):
                    val = f"(({vt}){{0}} + ({val}))"
                ref = f"&{self.buf_name(st.buffer)}[{self.flat_index(st.buffer, st.indices)}]"
                if full is not True and id(st.buffer) not in full:
                    self.emit(f"asc_stm_{vt}({ref}, {val}, {part});", indent)
                    continue
                if full is not True:
                    self.dead_lanes_written.add(id(st.buffer))
                store = "asc_st"
                if s.streaming and st.buffer.scope == "param":
                    store = "asc_stream"
                    self.streaming_stores += 1
                self.emit(f"{store}_{vt}({ref}, {val});", indent)
        del self.subst[s.var]
        return True

    def vexpr(self, e: Expr, var: Var, vt: str, full: bool | set[int] = True, part: int = 0) -> str:
        """`e` as a vector expression; `full`: True for a whole vector, else the buffers (ids) read at
        full width in a partial vector of `part` lanes (the tile's accumulators); stack tiles with room
        for the whole vector whose dead lanes this kernel wrote (`dead_lanes_written`) are read at full
        width too; every other read is masked (never a lane nobody wrote: no denormal or NaN garbage)."""
        if isinstance(e, Load) and vc.varies(e, var):
            ref = f"&{self.buf_name(e.buffer)}[{self.flat_index(e.buffer, e.indices)}]"
            top = arith.const_value(self.subst[var]) + lanes(e.buffer.dtype) - 1
            first_dead = arith.const_value(self.subst[var]) + part
            if full is True or id(e.buffer) in full or (id(e.buffer) in self.dead_lanes_written and vc.full_width_ok(
                    e.buffer, e.indices, var, first_dead, top, self.ranges, self.live_last.get(id(e.buffer)))):
                return f"asc_ld_{vt}({ref})"  # a tile whose dead lanes this kernel wrote: never past its row
            return f"asc_ldm_{vt}({ref}, {part})"
        if isinstance(e, Binary) and vc.varies(e, var):
            if e.op in vc.MINMAX_OPS:  # a helper taking two vectors: broadcast an invariant side
                a, b = (self.vexpr(x, var, vt, full, part) if vc.varies(x, var)
                        else f"(({vt}){{0}} + ({self.expr(x)}))" for x in (e.a, e.b))
                return f"asc_{e.op}_{vt}({a}, {b})"
            a, b = self.vexpr(e.a, var, vt, full, part), self.vexpr(e.b, var, vt, full, part)
            return f"({a} {vc.ARITH_OPS[e.op]} {b})"
        return self.expr(e)

    def params(self, f: LoweredFunc) -> str:
        return ", ".join(f"{self.d.storage_types[b.dtype]}* {self.d.restrict} {self.buf_name(b)}" for b in f.params)


def _size(s: Stmt) -> int:
    if isinstance(s, Seq):
        return sum(_size(x) for x in s.stmts)
    if isinstance(s, For):
        n = arith.const_value(s.extent)
        return _size(s.body) * (n if n is not None else 16)
    if isinstance(s, IfThen | Allocate):
        return 1 + _size(s.body)
    return 1
