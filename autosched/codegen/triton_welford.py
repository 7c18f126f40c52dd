"""Welford fusion of a mean and a variance reduction walked in chunks (pragma `welford`).

Chunked row reductions (`triton_rowwise(block_n=...)`) are emitted one loop per reduction, so a
layernorm reads its row three times: the mean loop, the variance loop (which needs the mean), and
the output loop. With the pragma, a pair of sum reductions
    a = sum(f * c)            and      b = sum((f - a) * (f - a) * c2)
over the same chunk loop becomes one loop of per-lane Welford updates (running mean and M2 of f in
each lane of the chunk), combined across lanes with Chan's formula for equal counts; the output
loop then re-reads the row. Two passes instead of three, the second mostly from L2 (the first
loads with `evict_last`, the later loads of the same tensors `evict_first`): inductor's structure
(see docs/decisions/triton-rowwise-seeds.md). Anything else is emitted as before.
"""

from __future__ import annotations

from autosched.codegen.triton_plan import _Red
from autosched.lowering import arith
from autosched.te.expr import Binary, Const, Expr, TensorRead, builtin_reducer_name, substitute, walk


def _scaled(e: Expr) -> tuple[Expr, float]:
    """(f, c) for e = f * c with a constant c (c = 1 otherwise)."""
    if isinstance(e, Binary) and e.op == "mul":
        if isinstance(e.b, Const):
            return e.a, float(e.b.value)
        if isinstance(e.a, Const):
            return e.b, float(e.a.value)
    return e, 1.0


def _key(e: Expr):
    return arith._key(arith.simplify(e))


class WelfordMixin:
    """Mixed into `TritonLowering`; uses its plan (`reds`, `dims`, `layout`) and emission helpers."""

    def welford_partner(self, a: _Red, candidates: list[_Red]) -> tuple[_Red, Expr, float, float] | None:
        """(b, f, c, c2) when `a` and some later `b` form the mean/variance pair described above."""
        if not self._welford_shape_ok(a):
            return None
        f, c = _scaled(a.value)
        for b in candidates:
            if b is a or b.pos != a.pos or not self._welford_shape_ok(b) or len(b.serial) != len(a.serial):
                continue
            ext_a = self.low.info_of(a.stage.name).derived.extents
            ext_b = self.low.info_of(b.stage.name).derived.extents
            if any(ext_a[x.name] != ext_b[y.name] for x, y in zip(a.serial + [a.tile], b.serial + [b.tile])):
                continue
            sq, c2 = _scaled(b.value)
            if not (isinstance(sq, Binary) and sq.op == "mul" and _key(sq.a) == _key(sq.b)):
                continue
            d = sq.a
            if not (isinstance(d, Binary) and d.op == "sub" and isinstance(d.b, TensorRead)
                    and d.b.tensor.name == a.stage.name):
                continue
            to_a = {y.var: x.var for x, y in zip(a.serial + [a.tile], b.serial + [b.tile])}
            if _key(substitute(d.a, to_a)) == _key(f):
                return b, f, c, c2
        return None

    def _welford_shape_ok(self, r: _Red) -> bool:
        st = r.stage
        if r.tile is None or r.dot is not None or len(r.serial) != 1 \
                or builtin_reducer_name(st.op.body.reducer) != "sum":
            return False
        if st.op.dtype != "float32" or self.dims[r.dim].padded:
            return False
        return not self.low.info_of(st.name).derived.guards

    def emit_welford(self, a: _Red, b: _Red, f: Expr, c: float, c2: float) -> None:
        ext = self.low.info_of(a.stage.name).derived.extents
        loop = a.serial[0]
        chunks, lanes = ext[loop.name], self.dims[a.dim].size
        out_dims = self.dims_of(a.value) - {a.dim}
        shape = self.layout.shape(out_dims | {a.dim}, self.dims)
        wm, wm2 = f"{a.name}_wm", f"{a.name}_wm2"
        self.emit(f"{wm} = tl.zeros({shape}, tl.float32)")
        self.emit(f"{wm2} = tl.zeros({shape}, tl.float32)")
        read = sorted({n.tensor.name for n in walk(f) if isinstance(n, TensorRead)})
        self.evict.update({t: "evict_last" for t in read})
        k = self.scalar[id(loop.var)]
        self.open_loop(loop, chunks, k)
        val, _ = self.render(f, self.layout)
        x = self.temp(f"({val}).to(tl.float32)", "w")
        self.emit(f"{a.name}_d = {x} - {wm}")
        self.emit(f"{wm} = {wm} + {a.name}_d / ({k} + 1.0)")
        self.emit(f"{wm2} = {wm2} + {a.name}_d * ({x} - {wm})")
        self.close_loop()
        self.evict.update({t: "evict_first" for t in read})  # later passes: the last use of the row
        pos = self.layout.where(a.dim)
        mean = f"{a.name}_mean"
        self.emit(f"{mean} = tl.sum({wm}, axis={pos}, keep_dims=True) * {1.0 / lanes!r}")
        self.emit(f"{a.name}_dev = {wm} - {mean}")
        self.emit(f"{b.name} = (tl.sum({wm2}, axis={pos}, keep_dims=True) + {float(chunks)!r} * "
                  f"tl.sum({a.name}_dev * {a.name}_dev, axis={pos}, keep_dims=True)) * {c2!r}")
        self.emit(f"{a.name} = {mean} * {float(chunks * lanes) * c!r}")
        self.values[a.deps[0]] = (a.name, out_dims)
        self.values[b.deps[0]] = (b.name, out_dims)
