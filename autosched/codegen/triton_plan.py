"""Planning half of the Triton renderer: which loop of the output is a program id, a tile dimension
or a serial loop; which stages are computed at which loop; which reductions become `tl.dot`.
Everything the Triton mapping cannot express is refused here, with the reason (ScheduleError).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from autosched.codegen.triton_expr import Layout, TileDim, next_pow2
from autosched.lowering import arith
from autosched.schedule.state import Loop, ScheduleError, Stage
from autosched.te.expr import Binary, Cast, Expr, TensorRead, Var, substitute, walk

MAX_TILE_ELEMENTS = 1 << 16
_PTR = {"float32": "*fp32", "float64": "*fp64", "float16": "*fp16", "bfloat16": "*bf16", "int32": "*i32",
        "int64": "*i64", "bool": "*i1"}
_REDUCE_FN = {"sum": "tl.sum", "max": "tl.max", "min": "tl.min"}
_COMBINE = {"sum": "({a} + {b})", "max": "tl.maximum({a}, {b})", "min": "tl.minimum({a}, {b})"}
_GRID_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")


def _refuse(msg: str) -> ScheduleError:
    return ScheduleError(f"triton target: {msg}")


@dataclass
class _Red:
    """One reduction to emit: the output's own or a stage computed at one of its loops."""

    stage: Stage
    value: Expr  # the reduced expression, in the output's and this stage's loop variables
    serial: list[Loop]
    tile: Loop | None
    dot: tuple[Expr, Expr] | None = None
    dim: int = -1
    pos: int = 0
    name: str = ""
    deps: list[str] = field(default_factory=list)


class TritonPlan:
    """The tile-level plan of one schedule (mixed into `TritonLowering`, which emits it)."""

    # ---- analysis -----------------------------------------------------------------------------
    def _classify(self, state) -> None:
        comp = [st for st in state.stages if not st.is_placeholder]
        roots = [st for st in comp if st.attach == ("root",)]
        if len(roots) != 1 or not roots[0].is_output:
            raise _refuse(f"one kernel computes one output; stages {[s.name for s in roots]} are at root "
                          "(inline the others or compute them at a loop of the output)")
        R = self.R = roots[0]
        for st in comp:
            if st.attach[0] == "at" and st.attach[1] != R.name:
                raise _refuse(f"stage {st.name!r} is computed at {st.attach[1]!r}; only loops of the output "
                              f"{R.name!r} can hold other stages")
            for lname, tag in st.bindings.items():
                if tag not in _GRID_TAGS:
                    raise _refuse(f"stage {st.name!r}, loop {lname!r}: {tag} does not exist in Triton (its "
                                  "threads are num_warps); bind only blockIdx loops")
        self.infR = self.low.info_of(R.name)
        ext = self.infR.derived.extents
        self.pragmas = {k.split("@", 1)[0]: v for k, v in R.pragmas.items()}
        self.dims: list[TileDim] = []
        self.tile_dim: dict[int, int] = {}
        self.scalar: dict[int, str] = {}
        self.serial: list[Loop] = []
        self.grid = [1, 1, 1]
        self.bound: dict[str, Loop] = {}
        for lp in R.leaf_loops:
            tag = R.bindings.get(lp.name)
            if lp.kind == "reduce":
                continue
            if tag:
                k = _GRID_TAGS.index(tag)
                if tag in self.bound:
                    raise _refuse(f"{tag} is bound twice in stage {R.name!r}; fuse the loops first")
                self.bound[tag] = lp
                self.grid[k] = ext[lp.name]
                self.scalar[id(lp.var)] = f"pid{k}"
            elif R.annotations.get(lp.name) == "vectorize":
                self._new_dim(lp, ext[lp.name])
            else:
                self.serial.append(lp)
                self.scalar[id(lp.var)] = _pyname("s", lp.name, len(self.scalar))
        for k, (n, lim) in enumerate(zip(self.grid, (2 ** 31 - 1, 65535, 65535))):
            if n > lim:
                raise _refuse(f"grid dimension {k} of {n} programs exceeds {lim}")
        self.n_out_dims = len(self.dims)
        self.reds: list[_Red] = []
        self._plan_reductions()
        if any(r.dot is not None for r in self.reds) and len(self.global_dims) != 2:
            raise _refuse("a tl.dot reduction needs the output tile to be exactly (M, N); another reduction "
                          "added a tile dimension")
        self.layout = Layout(tuple((d, p) for p, d in enumerate(self.global_dims)), len(self.global_dims))
        total = 1
        for d in self.global_dims:
            total *= self.dims[d].size
        if total > MAX_TILE_ELEMENTS:
            raise _refuse(f"a tile of {total} elements is more than {MAX_TILE_ELEMENTS}: use smaller blocks")

    def _new_dim(self, lp: Loop, extent: int, dot_only: bool = False) -> int:
        self.dims.append(TileDim(next_pow2(extent), extent))
        d = len(self.dims) - 1
        self.tile_dim[id(lp.var)] = d
        if not dot_only:
            self.global_dims = getattr(self, "global_dims", []) + [d]
        return d

    def _coords(self, st: Stage, inf) -> dict:
        out = {}
        for ax, lp in zip(st.op.reduce_axis, st.root_loops[len(st.op.axis):]):
            out[ax] = inf.derived.exprs[lp.name]
        return out

    def _plan_reductions(self) -> None:
        self.global_dims = list(range(self.n_out_dims))
        R = self.R
        coordsR = self.low.coords(self.infR)
        body = arith.simplify(substitute(self.low.body_of(R), coordsR))
        self.out_value = body
        self._collect(body)
        if R.has_reduce:
            red = self._reduction(R, body, self.infR)
            red.pos = len(self.serial)
            red.name = "acc_out"
            self.reds.append(red)
            self.out_red = red

    def _collect(self, e: Expr) -> None:
        """Plan every stage computed at a loop of the output that `e` reads (dependencies first)."""
        for node in walk(e):
            if not isinstance(node, TensorRead):
                continue
            st = self.low.stages[node.tensor.name]
            if st.is_placeholder or st is self.R:
                continue
            key = (st.name,) + tuple(arith._key(arith.simplify(i)) for i in node.indices)
            if any(r.deps and r.deps[0] == repr(key) for r in self.reds):
                continue
            inf = self.low.info_of(st.name)
            mapping = dict(zip(st.op.axis, (arith.simplify(i) for i in node.indices)))
            mapping.update(self._coords(st, inf))
            value = arith.simplify(substitute(self.low.body_of(st), mapping))
            self._collect(value)
            red = self._reduction(st, value, inf) if st.has_reduce else \
                _Red(st, value, [], None)
            red.deps = [repr(key)]
            red.name = f"v{len(self.reds)}_{_pyname('', st.name, 0)}"
            lname = st.attach[2]
            names = [lp.name for lp in self.R.leaf_loops]
            at = names.index(lname)
            red.pos = sum(1 for lp in self.serial if names.index(lp.name) <= at)
            for n in walk(value):
                if isinstance(n, Var) and id(n) in self.scalar and n in [s.var for s in self.serial]:
                    red.pos = max(red.pos, [s.var for s in self.serial].index(n) + 1)
            self.reds.append(red)

    def _reduction(self, st: Stage, value: Expr, inf) -> _Red:
        red_leaves = [lp for lp in st.leaf_loops if lp.kind == "reduce"]
        for lp in red_leaves:
            if st.bindings.get(lp.name):
                raise _refuse(f"reduction loop {lp.name!r} of {st.name!r} cannot be bound to a program id")
        tile, serial = red_leaves[-1], red_leaves[:-1]
        ext = inf.derived.extents
        for lp in serial:
            self.scalar[id(lp.var)] = _pyname("r", f"{st.name}_{lp.name}", len(self.scalar))
        reducer = st.op.body.reducer
        if reducer.name not in _REDUCE_FN or reducer is not _builtin(reducer.name):
            raise _refuse(f"stage {st.name!r} uses reducer {reducer.name!r}; Triton blocks reduce with sum, max, "
                          "min")
        red = _Red(st, value, serial, tile)
        dot = self._dot_operands(value, tile) if reducer.name == "sum" else None
        size = next_pow2(ext[tile.name])
        if dot is not None and size >= 16 and all(self.dims[d].size >= 16 for d in range(2)):
            red.dot = dot
            red.dim = self._new_dim(tile, ext[tile.name], dot_only=True)
            return red
        others = {self.tile_dim[id(n)] for n in walk(value) if isinstance(n, Var) and id(n) in self.tile_dim}
        share = [d for d in range(self.n_out_dims) if d not in others and self.dims[d].extent == ext[tile.name]]
        if share:
            red.dim = share[0]
            self.tile_dim[id(tile.var)] = share[0]
        else:
            red.dim = self._new_dim(tile, ext[tile.name])
        return red

    def _dot_operands(self, value: Expr, tile: Loop) -> tuple[Expr, Expr] | None:
        """(A, B) when `value` is A*B with A over (dim 0, K) and B over (K, dim 1)."""
        if self.n_out_dims != 2 or not (isinstance(value, Binary) and value.op == "mul"):
            return None

        def read(e: Expr) -> bool:
            e = e.value if isinstance(e, Cast) else e
            return isinstance(e, TensorRead) and self.low.stages[e.tensor.name].is_placeholder

        a, b = value.a, value.b
        if not (read(a) and read(b)):
            return None

        def dims(e: Expr) -> set:
            return {self.tile_dim.get(id(n), "k" if n is tile.var else None) for n in walk(e) if isinstance(n, Var)}

        da, db = dims(a) - {None}, dims(b) - {None}
        if da == {0, "k"} and db == {1, "k"}:
            return a, b
        if db == {0, "k"} and da == {1, "k"}:
            return b, a
        return None


def _builtin(name: str):
    from autosched.te.tensor import BUILTIN_REDUCERS

    return BUILTIN_REDUCERS[name]


def _pyname(prefix: str, name: str, k: int) -> str:
    base = "".join(c if c.isalnum() else "_" for c in name)
    return f"{prefix}{k}_{base}" if prefix else base
