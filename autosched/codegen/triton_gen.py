"""Triton renderer: a schedule becomes one tile-level Triton kernel.

How the output stage's loops map (the schedule is the same data as for the other targets):
- a loop bound to blockIdx.x/y/z is `tl.program_id(0/1/2)`; the `swizzle` pragma on a loop fused
  from two (M, N) block loops orders programs in groups of GROUP_M rows (L2 reuse);
- a spatial loop annotated `vectorize` is a tile dimension: `tl.arange(0, 2^k)`, masked to its
  extent; other spatial loops are serial loops around the body;
- the innermost reduction loop is the tile of the reduction (BLOCK_K), the others are serial
  loops; a sum of products of two loads whose tiles are (M, K) and (K, N) becomes `tl.dot` with an
  fp32 accumulator (fp32 inputs in IEEE precision unless `allow_tf32`), any other reduction is a
  masked block reduction (`tl.sum/max/min(..., keep_dims=True)`).
Producers are inlined or computed at a loop of the output (row reductions of softmax/layernorm,
the matmul of dense+bias+relu): they are evaluated on the output's tile at that loop, and loads
with identical addresses are emitted once, so softmax reads each row once. Pragmas `num_warps`
and `num_stages` set the launch; `welford` fuses a chunked mean/variance pair (triton_welford.py);
`store_evict` stores the output with `eviction_policy="evict_first"` (it is not read again).
What this mapping cannot express is refused (ScheduleError).
"""

from __future__ import annotations

from collections.abc import Sequence

from autosched.codegen.source import ArgSpec, KernelSource
from autosched.codegen.triton_expr import HALF, TL_DTYPES, ExprRenderer, Layout, literal
from autosched.codegen.triton_plan import _COMBINE, _GRID_TAGS, _PTR, _REDUCE_FN, TritonPlan, _Red, _refuse
from autosched.codegen.triton_welford import WelfordMixin
from autosched.lowering import arith
from autosched.lowering.ir import LoweredFunc
from autosched.lowering.loop_nest import Lowerer
from autosched.schedule.state import Fuse, Loop
from autosched.te.expr import Binary, Const, Expr, TensorRead, Var, walk
from autosched.te.tensor import Tensor


class TritonLowering(TritonPlan, WelfordMixin, ExprRenderer):
    def __init__(self, sched, args: Sequence[Tensor], name: str) -> None:
        self.low = Lowerer(sched.state, list(args), "triton", name)
        self.name = name
        self.args = [t.name for t in args]
        self._classify(sched.state)
        super().__init__(self.dims, self.tile_dim, self.scalar)
        self.conds: list[Expr] = []  # validity conditions (padding, uneven splits) of the current point
        self.memo: list[dict[str, str]] = [{}]
        self.lines: list[str] = []
        self.indent = 1
        self.ntemp = 0
        self.values: dict[tuple, tuple[str, set[int]]] = {}
        self.evict: dict[str, str] = {}  # input tensor -> eviction policy of its loads (welford passes)

    # ---- emission helpers ---------------------------------------------------------------------
    def emit(self, text: str) -> None:
        self.lines.append("    " * self.indent + text)

    def temp(self, text: str, prefix: str = "t") -> str:
        for scope in reversed(self.memo):
            if text in scope:
                return scope[text]
        name = f"{prefix}{self.ntemp}"
        self.ntemp += 1
        self.emit(f"{name} = {text}")
        self.memo[-1][text] = name
        return name

    def open_loop(self, lp: Loop, extent: int, var_name: str, static: bool = False) -> None:
        rng = "tl.static_range" if static else "range"
        self.emit(f"for {var_name} in {rng}({extent}):")
        self.indent += 1
        self.memo.append({})

    def close_loop(self) -> None:
        self.indent -= 1
        self.memo.pop()

    def mask_for(self, vars_used: set[int], layout: Layout, extra: list[str]) -> str:
        """Validity conditions that constrain an access over `vars_used` (padding, uneven splits)."""
        parts = []
        known = vars_used | set(self.scalar)
        for c in self.conds:
            cv = {id(n) for n in walk(c) if isinstance(n, Var)}
            if cv <= known:
                parts.append(self.render(c, layout)[0])
        parts += extra
        return " & ".join(dict.fromkeys(parts))

    def read(self, node: TensorRead, layout: Layout, mask_extra: list[str]) -> tuple[str, set[int]]:
        st = self.low.stages[node.tensor.name]
        if not st.is_placeholder:
            key = repr((st.name,) + tuple(arith._key(arith.simplify(i)) for i in node.indices))
            if key not in self.values:
                raise _refuse(f"stage {st.name!r} is read where it is not computed")
            return self.values[key]
        if st.name not in self.args:
            raise _refuse(f"input {st.name!r} is not a kernel argument")
        flat: Expr = Const(0, "int32")
        for d, idx in enumerate(node.indices):
            stride = 1
            for n in st.op.shape[d + 1:]:
                stride *= n
            flat = Binary("add", flat, Binary("mul", idx, Const(stride, "int32"), "int32"), "int32")
        flat = arith.simplify(flat)
        off, dims = self.render(flat, layout)
        used = {id(n) for n in walk(flat) if isinstance(n, Var)}
        mask = self.mask_for(used, layout, mask_extra)
        ptr = f"{_ptr(st.name)} + {off}"
        if mask:
            if mask_extra and self.extra_dims - dims:  # a select condition over more dims than the address
                ptr = f"tl.broadcast_to({ptr}, {layout.shape(dims | self.extra_dims, self.dims)})"
            text = f"tl.load({ptr}, mask={mask}, other=0"
        else:
            text = f"tl.load({ptr}"
        policy = self.evict.get(st.name)
        text += f', eviction_policy="{policy}")' if policy else ")"
        if node.dtype in HALF and not getattr(self, "raw_loads", False):
            text += ".to(tl.float32)"
        return self.temp(text), dims

    # ---- emission -----------------------------------------------------------------------------
    def pad_conds(self, loops: Sequence[Loop], ext: dict[str, int]) -> list[Expr]:
        out = []
        for lp in loops:
            d = self.tile_dim.get(id(lp.var))
            if d is not None and self.dims[d].padded:
                out.append(Binary("lt", lp.var, Const(self.dims[d].extent, "int32"), "bool"))
        return out

    def emit_reduction(self, red: _Red) -> tuple[str, set[int]]:
        st = red.stage
        inf = self.low.info_of(st.name)
        ext = inf.derived.extents
        saved = list(self.conds)
        self.conds += self.pad_conds([red.tile], ext) + [g for g in inf.derived.guards
                                                         if all(id(n) in self.tile_dim or id(n) in self.scalar
                                                                for n in walk(g) if isinstance(n, Var))]
        rname = st.op.body.reducer.name
        acc_t = "tl.float64" if st.op.dtype == "float64" else TL_DTYPES.get(st.op.dtype, "tl.float32")
        if st.op.dtype in HALF:
            acc_t = "tl.float32"
        ident = literal(st.op.body.reducer.identity(st.op.dtype).value, st.op.dtype)
        acc = red.name
        if red.dot is not None:
            self.emit(f"{acc} = tl.zeros(({self.dims[0].size}, {self.dims[1].size}), dtype=tl.float32)")
            out_dims = {0, 1}
        else:
            out_dims = self.dims_of(red.value) - {red.dim}
            self.emit(f"{acc} = tl.full({self.layout.shape(out_dims, self.dims)}, {ident}, {acc_t})")
        for lp in red.serial:
            self.open_loop(lp, ext[lp.name], self.scalar[id(lp.var)])
        if red.dot is not None:
            k = red.dim
            la = Layout(((0, 0), (k, 1)), 2)
            lb = Layout(((k, 0), (1, 1)), 2)
            self.raw_loads = True
            a, _ = self.render(red.dot[0], la)
            b, _ = self.render(red.dot[1], lb)
            self.raw_loads = False
            dt = red.dot[0].dtype
            prec = "" if dt in HALF else (', input_precision="tf32"' if self.pragmas.get("allow_tf32")
                                          else ', input_precision="ieee"')
            self.emit(f"{acc} = tl.dot({a}, {b}, {acc}{prec})")
        else:
            val, vdims = self.render(red.value, self.layout)
            vmask = self.mask_for({id(red.tile.var)} | {id(v.var) for v in red.serial}, self.layout, [])
            pos = self.layout.where(red.dim)
            if vmask or red.dim not in vdims:
                cond = vmask or f"({self.arange(red.dim, self.layout)} >= 0)"
                val = f"tl.where({cond}, {val}, {ident})"
            part = f"{_REDUCE_FN[rname]}({val}, axis={pos}, keep_dims=True)"
            self.emit(f"{acc} = " + _COMBINE[rname].format(a=acc, b=part))
        for _ in red.serial:
            self.close_loop()
        self.conds = saved
        if st.op.dtype in HALF:
            self.emit(f"{acc} = {acc}.to({TL_DTYPES[st.op.dtype]}).to(tl.float32)")
        return acc, out_dims

    def emit_stage_value(self, red: _Red) -> None:
        if red.tile is None:  # an element-wise stage computed at a loop: evaluate it once there
            val, dims = self.render(red.value, self.layout)
            name = self.temp(val, "e")
        else:
            name, dims = self.emit_reduction(red)
        self.values[red.deps[0]] = (name, dims)

    def run(self) -> str:
        R = self.R
        ext = self.infR.derived.extents
        self.emit_program_ids()
        for d in range(len(self.dims)):
            self.emit(f"a{d} = tl.arange(0, {self.dims[d].size})")
        leaves = [lp for lp in R.leaf_loops if lp.kind != "reduce"]
        self.conds = self.pad_conds(leaves, ext) + list(self.infR.derived.guards)
        pending = [r for r in self.reds if r.deps]
        fused: set[int] = set()
        for level in range(len(self.serial) + 1):
            for r in [r for r in pending if r.pos == level]:
                if id(r) in fused:
                    continue
                pair = self.welford_partner(r, pending) if self.pragmas.get("welford") else None
                if pair is not None:
                    fused.add(id(pair[0]))
                    self.emit_welford(r, *pair)
                else:
                    self.emit_stage_value(r)
            if level < len(self.serial):
                lp = self.serial[level]
                static = R.annotations.get(lp.name) == "unroll"
                self.open_loop(lp, ext[lp.name], self.scalar[id(lp.var)], static)
        if R.has_reduce:
            self.conds = [c for c in self.conds if not any(isinstance(n, Var) and id(n) in
                                                           {id(lp.var) for lp in R.leaf_loops if lp.kind == "reduce"}
                                                           for n in walk(c))]
            acc, vdims = self.emit_reduction(self.out_red)
            val = acc
        else:
            val, vdims = self.render(self.out_value, self.layout)
        out_idx = [self.low.coords(self.infR)[ax] for ax in R.op.axis]
        flat: Expr = Const(0, "int32")
        for d, idx in enumerate(out_idx):
            stride = 1
            for n in R.op.shape[d + 1:]:
                stride *= n
            flat = Binary("add", flat, Binary("mul", idx, Const(stride, "int32"), "int32"), "int32")
        flat = arith.simplify(flat)
        off, _ = self.render(flat, self.layout)
        used = {id(n) for n in walk(flat) if isinstance(n, Var)}
        mask = self.mask_for(used, self.layout, [])
        val = f"({val}).to({TL_DTYPES[R.op.dtype]})"
        hint = ', eviction_policy="evict_first"' if self.pragmas.get("store_evict") else ""
        self.emit(f"tl.store({_ptr(R.name)} + {off}, {val}" + (f", mask={mask}" if mask else "") + hint + ")")
        params = ", ".join(_ptr(n) for n in self.args)
        head = ["import triton", "import triton.language as tl", "from triton.language.extra import libdevice", "",
                "", "@triton.jit", f"def {self.name}({params}):"]
        return "\n".join(head + self.lines) + "\n"

    def emit_program_ids(self) -> None:
        R = self.R
        ext = self.infR.derived.extents
        swz = self.pragmas.get("swizzle", 0)
        for tag, lp in self.bound.items():
            k = _GRID_TAGS.index(tag)
            fuse = next((r for r in R.relations if isinstance(r, Fuse) and r.fused is lp), None)
            if swz > 1 and fuse is not None:
                n_a, n_b = ext[fuse.outer.name], ext[fuse.inner.name]
                self.emit(f"raw{k} = tl.program_id({k})")
                self.emit(f"gid{k} = raw{k} // {swz * n_b}")
                self.emit(f"gsz{k} = tl.minimum({n_a} - gid{k} * {swz}, {swz})")
                self.emit(f"pid{k} = (gid{k} * {swz} + (raw{k} % {swz * n_b}) % gsz{k}) * {n_b} "
                          f"+ (raw{k} % {swz * n_b}) // gsz{k}")
            else:
                self.emit(f"pid{k} = tl.program_id({k})")


def _ptr(name: str) -> str:
    return f"{name}_ptr"


def render_triton(sched, args: Sequence[Tensor], name: str = "default_function") -> tuple[KernelSource, LoweredFunc]:
    """Triton source for `sched` (a module with one `@triton.jit` kernel named `name`)."""
    from autosched.lowering.loop_nest import lower_state

    low = TritonLowering(sched, args, name)
    code = low.run()
    func = lower_state(sched.state, list(args), "triton", name)
    out = low.R.name
    arg_specs = tuple(ArgSpec(t.name, tuple(t.shape), t.dtype, t.name == out) for t in args)
    launch = {"grid": low.grid, "num_warps": int(low.pragmas.get("num_warps", 4)),
              "num_stages": int(low.pragmas.get("num_stages", 3)),
              "signature": {_ptr(t.name): _PTR[t.dtype] for t in args}}
    return KernelSource("triton", code, name, arg_specs, (), launch), func
