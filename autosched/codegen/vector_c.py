"""Explicit vector code for the C renderer.

gcc keeps a register tile (a small local accumulator array) in vector registers only when every
access has a constant index and the vector operations are explicit: with `#pragma omp simd` on
the columns the tile stays on the stack and each FMA pays a load and a store
(see docs/decisions/explicit-vector-code.md). So loops marked `unroll` are unrolled in the
source, and a vectorized loop whose body is plain arithmetic on contiguous or invariant data is
written with GCC vector-extension types; anything else falls back to `omp simd`. A loop whose extent
is not a whole number of vectors ends in a partial vector: masked loads (zero in the lanes past the
extent) and masked stores, except on the tile's own stack accumulator, whose lanes past the extent
are dead and are computed at full width so that it stays in registers
(see docs/decisions/ragged-vector-tiles.md). A tile whose
every access ends up a whole vector at a constant offset is then written as vector variables
(`register_tile`), which gcc allocates without copying accumulators around each FMA. The types are
as wide as this host's vector registers (`host_isa.vector_bytes`): 64 bytes with AVX-512, 32 with
AVX2.
"""

from __future__ import annotations

from autosched.dtypes import DTYPE_BYTES
from autosched.lowering import arith
from autosched.lowering.access import flat, invariant, stride_of
from autosched.lowering.ir import For, Load, Seq, Stmt, Store
from autosched.lowering.visitors import iter_expr
from autosched.target.host_isa import vector_bytes
from autosched.target.vector import lanes
from autosched.te.expr import Binary, Const, Expr, Var

_CTYPE = {"float32": ("float", "f32"), "float64": ("double", "f64")}
_ARITH = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
_MINMAX = {"max": ">", "min": "<"}
"""Binary ops written as calls of per-type helpers (`vector_prelude`), with the scalar code's
comparison: a relu epilogue (`max(x, 0)`) no longer sends its loop, and with it the register tile
it reads, to `omp simd` and the stack."""
# the streaming-store intrinsic for each vector width, and the alignment it needs
_STREAM = {64: ("__AVX512F__", "_mm512_stream_ps", "_mm512_stream_pd", "__m512", "__m512d"),
           32: ("__AVX__", "_mm256_stream_ps", "_mm256_stream_pd", "__m256", "__m256d"),
           16: ("__SSE2__", "_mm_stream_ps", "_mm_stream_pd", "__m128", "__m128d")}


def vector_prelude() -> str:
    """Typedefs and whole-vector loads/stores for this host's vector width (`host_isa.vector_bytes`)."""
    nbytes = vector_bytes()
    out = [f"typedef {ctype} {vtype(dtype)} __attribute__((vector_size({nbytes})));"
           for dtype, (ctype, _) in _CTYPE.items()]
    for dtype, (ctype, _) in _CTYPE.items():
        vt = vtype(dtype)
        out += [f"static inline {vt} asc_ld_{vt}(const {ctype}* p) {{ {vt} v; __builtin_memcpy(&v, p, {nbytes}); "
                "return v; }",
                f"static inline void asc_st_{vt}({ctype}* p, {vt} v) {{ __builtin_memcpy(p, &v, {nbytes}); }}"]
        # `a cmp b ? a : b` in every lane, as the scalar code, through the comparison's lane mask: a
        # loop over the lanes made gcc keep vectors in memory (see docs/decisions/explicit-vector-code.md)
        it = f"asc_i{DTYPE_BYTES[dtype] * 8}x{nbytes // DTYPE_BYTES[dtype]}"
        out.append(f"typedef int{DTYPE_BYTES[dtype] * 8}_t {it} __attribute__((vector_size({nbytes})));")
        for op, cmp in _MINMAX.items():
            out.append(f"static inline {vt} asc_{op}_{vt}({vt} a, {vt} b) {{ {it} m = a {cmp} b; "
                       f"return ({vt})((m & ({it})a) | (~m & ({it})b)); }}")
    out += _masked_prelude(nbytes)
    return "\n".join(out) + "\n"


def _masked_prelude(nbytes: int) -> list[str]:
    """`asc_ldm_T(p, n)` / `asc_stm_T(p, v, n)`: the first `n` lanes only (loads fill the rest with
    zeros), with AVX-512 or AVX2 masks where the ISA has them, lane by lane otherwise."""
    out: list[str] = ["#if defined(__x86_64__)", "#include <immintrin.h>", "#endif"]
    for dtype, (ctype, _) in _CTYPE.items():
        vt = vtype(dtype)
        w = nbytes // DTYPE_BYTES[dtype]
        sfx = "ps" if dtype == "float32" else "pd"
        if nbytes == 64:
            guard, mt = "__AVX512F__", f"__m512{'' if dtype == 'float32' else 'd'}"
            mask = f"(__mmask{max(w, 8)})((1u << n) - 1u)"
            ld = f"return ({vt})_mm512_maskz_loadu_{sfx}({mask}, p);"
            st = f"_mm512_mask_storeu_{sfx}(p, {mask}, ({mt})v);"
        elif nbytes == 32:
            guard, mt = "__AVX2__", f"__m256{'' if dtype == 'float32' else 'd'}"
            if dtype == "float32":
                mask = "_mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))"
            else:
                mask = "_mm256_cmpgt_epi64(_mm256_set1_epi64x(n), _mm256_setr_epi64x(0, 1, 2, 3))"
            ld = f"return ({vt})_mm256_maskload_{sfx}(p, {mask});"
            st = f"_mm256_maskstore_{sfx}(p, {mask}, ({mt})v);"
        else:
            guard = ld = st = ""
        out += [f"static inline {vt} asc_ldm_{vt}(const {ctype}* p, int n) {{"]
        if guard:
            out += [f"#if defined({guard})", f"  {ld}", "#else"]
        out += [f"  {vt} v = {{0}}; for (int i = 0; i < n; ++i) v[i] = p[i]; return v;"]
        out += ["#endif"] if guard else []
        out += ["}", f"static inline void asc_stm_{vt}({ctype}* p, {vt} v, int n) {{"]
        if guard:
            out += [f"#if defined({guard})", f"  {st}", "#else"]
        out += ["  for (int i = 0; i < n; ++i) p[i] = v[i];"]
        out += ["#endif"] if guard else []
        out += ["}"]
    return out


def full_width_ok(buf, indices, var: Var, first_dead: int, top: int, ranges: dict[int, int],
                  live_max: int | None) -> bool:
    """Whether a whole vector may be read or written at the partial vector's position: `buf` is a stack
    tile ("local") that `var` steps through along its last dimension, every lane up to `top` (the loop
    variable's value in the vector's last lane) stays inside that dimension, and the lanes from
    `first_dead` on lie past `live_max`, the highest index along it that any access in the tile's
    scope uses (`last_index_max`): they are dead, never another element's data (an rfactor's lane
    accumulator, whose lanes a later sum reads, does not qualify)."""
    if buf.scope != "local" or not indices or stride_of(indices[-1], var) != 1 or live_max is None:
        return False
    rest = arith.simplify(Binary("sub", indices[-1], var, indices[-1].dtype))
    r = arith.numeric_range(rest, ranges)
    return r is not None and r[0] >= 0 and r[1] + top < buf.shape[-1] and r[0] + first_dead > live_max


def last_index_max(s: Stmt, buf, ranges: dict[int, int]) -> int | None:
    """The highest last-dimension index of `buf` that any load or store in `s` uses, over the loop
    ranges (None when some index has no numeric bound)."""
    best = -1
    stack: list[tuple[object, dict[int, int]]] = [(s, ranges)]
    while stack:
        x, around = stack.pop()
        if isinstance(x, Seq):
            stack.extend((y, around) for y in x.stmts)
        elif isinstance(x, For):
            r = arith.numeric_range(x.extent, around)
            if r is None:
                return None
            stack.append((x.body, {**around, id(x.var): max(r[1], 1)}))
        elif hasattr(x, "body"):
            stack.append((x.body, around))
        elif isinstance(x, Store):
            accesses = [x.indices] if x.buffer is buf else []
            accesses += [n.indices for e in (x.value, *x.indices) for n in iter_expr(e)
                         if isinstance(n, Load) and n.buffer is buf]
            for indices in accesses:
                r = arith.numeric_range(indices[-1], around) if indices else (0, 0)
                if r is None:
                    return None
                best = max(best, r[1])
    return best


# Streaming (non-temporal) stores write around the caches: an output written once and larger than the
# caches then costs no read-for-ownership of its lines (see docs/decisions/streaming-stores.md). Only
# on an address aligned to the vector; a plain store otherwise. They are weakly ordered, hence the
# fence each thread runs when its share is done.
def stream_prelude() -> str:
    nbytes = vector_bytes()
    macro, ps, pd, mps, mpd = _STREAM[nbytes]
    out = ["#if defined(__x86_64__)", "#include <immintrin.h>", "#endif"]
    for dtype, (ctype, _) in _CTYPE.items():
        vt = vtype(dtype)
        fn, mt = (ps, mps) if dtype == "float32" else (pd, mpd)
        out += [f"static inline void asc_stream_{vt}({ctype}* p, {vt} v) {{",
                f"#if defined({macro})",
                f"  if (((uintptr_t)p & {nbytes - 1}u) == 0) {{ {fn}(p, ({mt})v); return; }}",
                "#endif",
                f"  __builtin_memcpy(p, &v, {nbytes});",
                "}"]
    out += ["static inline void asc_sfence(void) {", "#if defined(__x86_64__)", "  _mm_sfence();", "#else",
            "  __sync_synchronize();", "#endif", "}"]
    return "\n".join(out) + "\n"


def _stores(body: Stmt) -> list[Store] | None:
    if isinstance(body, Store):
        return [body]
    if isinstance(body, Seq) and all(isinstance(s, Store) for s in body.stmts):
        return list(body.stmts)
    return None


def explicit_plan(loop: For) -> str | None:
    """The element dtype if `loop` can be written as explicit vector code, else None."""
    n = arith.const_value(loop.extent)
    stores = _stores(loop.body)
    if n is None or stores is None:
        return None
    dtype = stores[0].buffer.dtype
    w = lanes(dtype)
    if not w or -(-n // w) > 16:
        return None
    for st in stores:
        if st.buffer.dtype != dtype or stride_of(flat(st.buffer, st.indices), loop.var) != 1:
            return None
        if not _vectorizable(st.value, loop.var, dtype):
            return None
    return dtype


def _vectorizable(e: Expr, var: Var, dtype: str) -> bool:
    if isinstance(e, Const):
        return e.dtype == dtype or e.dtype in ("int32",)
    if e.dtype == dtype and invariant(e, var):
        return True  # e.g. layernorm's rsqrt(var[i] + eps) along the row: any expression, computed once
    if isinstance(e, Load):
        if e.buffer.dtype != dtype:
            return False
        s = stride_of(flat(e.buffer, e.indices), var)
        return s in (0, 1)
    if isinstance(e, Binary):
        return (e.op in _ARITH or e.op in _MINMAX) and e.dtype == dtype and _vectorizable(e.a, var, dtype) and \
            _vectorizable(e.b, var, dtype)
    return False


def varies(e: Expr, var: Var) -> bool:
    """Whether `e` (a vectorizable value) depends on the vectorized loop variable."""
    if isinstance(e, Load):
        return stride_of(flat(e.buffer, e.indices), var) == 1
    if isinstance(e, Binary):
        return varies(e.a, var) or varies(e.b, var)
    return False


def vtype(dtype: str) -> str:
    """The vector type's C name, e.g. `asc_f32x16` (64-byte vectors) or `asc_f32x8` (32-byte)."""
    return f"asc_{_CTYPE[dtype][1]}x{lanes(dtype)}"


ARITH_OPS = _ARITH
MINMAX_OPS = _MINMAX
