"""Explicit vector code for the C renderer.

gcc keeps a register tile (a small local accumulator array) in zmm registers only when every
access has a constant index and the vector operations are explicit: with `#pragma omp simd` on
the columns the tile stays on the stack and each FMA pays a load and a store (measured here:
16 stack moves per 16 FMAs in the 8x32 matmul tile). So loops marked `unroll` are unrolled in the
source, and a vectorized loop whose body is plain arithmetic on contiguous or invariant data is
written with GCC vector-extension types; anything else falls back to `omp simd`.
"""

from __future__ import annotations

from autosched.schedule import arith
from autosched.schedule.ir import For, Load, Seq, Stmt, Store
from autosched.te.expr import Binary, Const, Expr, Var

VECTOR_BYTES = 64
_ELEM = {"float32": 4, "float64": 8}
_VTYPE = {"float32": "asc_f32x16", "float64": "asc_f64x8"}
_ARITH = {"add": "+", "sub": "-", "mul": "*", "div": "/"}

VECTOR_PRELUDE = r"""typedef float asc_f32x16 __attribute__((vector_size(64)));
typedef double asc_f64x8 __attribute__((vector_size(64)));
static inline asc_f32x16 asc_ld_asc_f32x16(const float* p) { asc_f32x16 v; __builtin_memcpy(&v, p, 64); return v; }
static inline void asc_st_asc_f32x16(float* p, asc_f32x16 v) { __builtin_memcpy(p, &v, 64); }
static inline asc_f64x8 asc_ld_asc_f64x8(const double* p) { asc_f64x8 v; __builtin_memcpy(&v, p, 64); return v; }
static inline void asc_st_asc_f64x8(double* p, asc_f64x8 v) { __builtin_memcpy(p, &v, 64); }
"""

# Streaming (non-temporal) stores write whole 64-byte lines around the caches: an output written once
# and larger than the caches then costs no read-for-ownership of its lines (measured on the softmax's
# output: about a third less memory traffic). Only on an aligned address with AVX-512; a plain store
# otherwise. They are weakly ordered, hence the fence each thread runs when its share is done.
STREAM_PRELUDE = r"""#if defined(__x86_64__)
#include <immintrin.h>
#endif
static inline void asc_stream_asc_f32x16(float* p, asc_f32x16 v) {
#if defined(__AVX512F__)
  if (((uintptr_t)p & 63u) == 0) { _mm512_stream_ps(p, (__m512)v); return; }
#endif
  __builtin_memcpy(p, &v, 64);
}
static inline void asc_stream_asc_f64x8(double* p, asc_f64x8 v) {
#if defined(__AVX512F__)
  if (((uintptr_t)p & 63u) == 0) { _mm512_stream_pd(p, (__m512d)v); return; }
#endif
  __builtin_memcpy(p, &v, 64);
}
static inline void asc_sfence(void) {
#if defined(__x86_64__)
  _mm_sfence();
#else
  __sync_synchronize();
#endif
}
"""


def lanes(dtype: str) -> int:
    return VECTOR_BYTES // _ELEM[dtype] if dtype in _ELEM else 0


def _stores(body: Stmt) -> list[Store] | None:
    if isinstance(body, Store):
        return [body]
    if isinstance(body, Seq) and all(isinstance(s, Store) for s in body.stmts):
        return list(body.stmts)
    return None


def stride_of(index: Expr, var: Var) -> int | None:
    """Coefficient of `var` in a flattened index, None when the index is not affine in it."""
    lin = arith.to_linear(arith.simplify(index))
    coeff = 0
    for c, term in lin.terms.values():
        if term is var:
            coeff = c
        elif any(n is var for n in _walk(term)):
            return None
    return coeff


def _walk(e: Expr):
    from autosched.te.expr import walk

    return walk(e)


def flat(buf, indices) -> Expr:
    out: Expr = Const(0, "int32")
    for d, idx in enumerate(indices):
        stride = 1
        for n in buf.shape[d + 1:]:
            stride *= n
        out = Binary("add", out, Binary("mul", idx, Const(stride, "int32"), "int32"), "int32")
    return arith.simplify(out)


def explicit_plan(loop: For) -> str | None:
    """The element dtype if `loop` can be written as explicit vector code, else None."""
    n = arith.const_value(loop.extent)
    stores = _stores(loop.body)
    if n is None or stores is None:
        return None
    dtype = stores[0].buffer.dtype
    w = lanes(dtype)
    if not w or n % w or n // w > 16:
        return None
    for st in stores:
        if st.buffer.dtype != dtype or stride_of(flat(st.buffer, st.indices), loop.var) != 1:
            return None
        if not _vectorizable(st.value, loop.var, dtype):
            return None
    return dtype


def invariant(e: Expr, var: Var) -> bool:
    """Whether `e` does not depend on `var` at all (then it is one scalar, broadcast to the lanes)."""
    from autosched.te.expr import children

    if isinstance(e, Var):
        return e is not var
    if isinstance(e, Load):
        return all(invariant(i, var) for i in e.indices)
    return all(invariant(c, var) for c in children(e))


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
        return e.op in _ARITH and e.dtype == dtype and _vectorizable(e.a, var, dtype) and \
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
    return _VTYPE[dtype]


ARITH_OPS = _ARITH
