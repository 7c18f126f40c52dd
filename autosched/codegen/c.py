"""C renderer for the cpu target: OpenMP `parallel for`, `omp simd` loops, GCC unroll pragmas.

Transcendental functions are declared with `simd` variants, so gcc vectorizes them through
glibc's libmvec (`_ZGVeN16v_expf`) without `-ffast-math`: results stay within a few ulp, and
NaN/inf semantics are kept (fast-math's finite-math assumption would break max-reductions that
start at -inf).
"""

from __future__ import annotations

from autosched.codegen.cstyle import C_COMPUTE_TYPES, C_STORAGE_TYPES, CStyleRenderer, Dialect
from autosched.codegen.source import ArgSpec, KernelSource
from autosched.codegen.vector_c import stream_prelude, vector_prelude
from autosched.lowering.ir import LoweredFunc

_F32 = {"exp": "expf({x})", "log": "logf({x})", "sqrt": "sqrtf({x})", "rsqrt": "(1.0f / sqrtf({x}))",
        "tanh": "tanhf({x})", "erf": "erff({x})", "sigmoid": "(1.0f / (1.0f + expf(-({x}))))",
        "abs": "fabsf({x})", "floor": "floorf({x})", "ceil": "ceilf({x})"}
_F64 = {"exp": "exp({x})", "log": "log({x})", "sqrt": "sqrt({x})", "rsqrt": "(1.0 / sqrt({x}))",
        "tanh": "tanh({x})", "erf": "erf({x})", "sigmoid": "(1.0 / (1.0 + exp(-({x}))))",
        "abs": "fabs({x})", "floor": "floor({x})", "ceil": "ceil({x})"}
# functions glibc 2.36's libmvec has vector variants of (checked with nm on libmvec.so.1)
_LIBMVEC = {"expf", "logf", "tanhf", "erff", "exp", "log", "tanh", "erf"}

# what a buffer or loop variable may not be called: C keywords, names the prelude, the headers and the
# renderer use, and the object-like macros of <math.h>/<stdint.h> (gnu11 also predefines `linux`, `unix`)
C_RESERVED = frozenset("""
auto break case char const continue default do double else enum extern float for goto if inline int long
register restrict return short signed sizeof static struct switch typedef union unsigned void volatile while
asm typeof main bool true false NULL INFINITY NAN EOF errno unix linux i386 math_errhandling
int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t intptr_t uintptr_t size_t ptrdiff_t
aligned_alloc free malloc calloc realloc memcpy memset abs
expf logf sqrtf tanhf erff fabsf floorf ceilf powf exp log sqrt tanh erf fabs floor ceil pow
""".split()) | frozenset(_F32) | frozenset(_F64)
C_RESERVED_PATTERN = r"(M|FP|U?INT\w*|SIZE|PTRDIFF|SIG_ATOMIC|WCHAR|WINT|HUGE|MATH)_[A-Z0-9_]*"

_PRELUDE = r"""#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
static int asc_error = 0;
static inline float asc_f16_to_f32(uint16_t h) { _Float16 f; memcpy(&f, &h, 2); return (float)f; }
static inline uint16_t asc_f32_to_f16(float x) { _Float16 f = (_Float16)x; uint16_t h; memcpy(&h, &f, 2); return h; }
static inline float asc_round_f16(float x) { return (float)(_Float16)x; }
static inline float asc_bf16_to_f32(uint16_t h) { uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, 4); return f; }
static inline uint16_t asc_f32_to_bf16(float x) {
  uint32_t u; memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u); return (uint16_t)(u >> 16);
}
static inline float asc_round_bf16(float x) { return asc_bf16_to_f32(asc_f32_to_bf16(x)); }
static inline int32_t asc_floordiv_int32(int32_t a, int32_t b) { int32_t q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q; }
static inline int32_t asc_mod_int32(int32_t a, int32_t b) { int32_t r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
static inline int64_t asc_floordiv_int64(int64_t a, int64_t b) { int64_t q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q; }
static inline int64_t asc_mod_int64(int64_t a, int64_t b) { int64_t r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
"""

C_DIALECT = Dialect(
    storage_types=C_STORAGE_TYPES,
    compute_types=C_COMPUTE_TYPES,
    float_funcs=_F32,
    double_funcs=_F64,
    prelude=_PRELUDE,
    reserved=C_RESERVED,
    reserved_pattern=C_RESERVED_PATTERN,
)


def render_c(func: LoweredFunc, *, dialect: Dialect = C_DIALECT) -> KernelSource:
    if func.name in dialect.reserved or func.name.startswith("asc_"):
        raise ValueError(f"kernel name {func.name!r} is reserved in generated C; choose another")
    r = CStyleRenderer(dialect)
    r.explicit_vectors = True
    r.source_unroll_limit = 64
    r.used_names.add(func.name)
    params = r.params(func)  # parameters claim their names before any loop variable
    r.stmt(func.body, 1)
    body = r.lines
    decls = []
    for fn, dtype in sorted(r.funcs_used):
        if fn in _LIBMVEC:
            ty = "double" if dtype == "float64" else "float"
            decls.append(f'__attribute__((simd("notinbranch"))) {ty} {fn}({ty});')
    head = dialect.prelude.splitlines() + vector_prelude().splitlines() + decls
    tail = ["  return asc_error;", "}", ""]
    if r.streaming_stores:
        head += stream_prelude().splitlines()
        tail.insert(0, "  asc_sfence();")  # streaming stores of a loop outside any parallel one
    sig = f'__attribute__((visibility("default"))) int {func.name}({params}) {{'
    lines = head + [sig, "  asc_error = 0;"] + body + tail
    offset = len(head) + 2
    vec_loops = tuple((a + offset, b + offset, tuple(x + offset for x in outer),
                       tuple((p + offset, q + offset) for p, q in nested))
                      for a, b, outer, nested in r.vector_loops)
    args = tuple(ArgSpec(b.stage or b.name, b.shape, b.dtype, b.scope == "param" and _is_out(func, b))
                 for b in func.params)
    return KernelSource("c", "\n".join(lines), func.name, args, vector_loops=vec_loops)


def _is_out(func: LoweredFunc, buf) -> bool:
    from autosched.lowering.ir import Store

    return any(isinstance(s, Store) and s.buffer is buf for s in _walk(func.body))


def _walk(s):
    yield s
    if hasattr(s, "stmts"):
        for x in s.stmts:
            yield from _walk(x)
    if hasattr(s, "body"):
        yield from _walk(s.body)
