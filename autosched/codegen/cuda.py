"""CUDA C renderer for the cuda target: the C-family walker with a CUDA `Dialect`.

Only what differs from C is here: bound loops become `blockIdx`/`threadIdx` reads (no loop),
shared buffers live in one dynamic `extern __shared__` allocation (so a block may use more than
48 KB once the launcher raises the limit), register tiles are plain local arrays indexed inside
`#pragma unroll` loops (constant indices after unrolling keep them in registers), and barriers
print as `__syncthreads()`. The source compiles with NVRTC (no system headers) and with nvcc.
"""

from __future__ import annotations

from autosched.codegen.cstyle import C_COMPUTE_TYPES, C_STORAGE_TYPES, CStyleRenderer, Dialect
from autosched.codegen.source import ArgSpec, KernelSource
from autosched.dtypes import dtype_bytes
from autosched.lowering import arith
from autosched.lowering.gpu import Barrier, GpuFunc
from autosched.lowering.ir import Allocate, For, Load, LoweredFunc, Stmt, Store
from autosched.te.expr import Binary, Cast, Const, Expr, Select, Var, substitute

# 64/128-bit vector types of the storage types a vector copy may move (half types stay scalar)
_VEC_TYPES = {"float32": "float", "int32": "int"}


def _multiple_of(e: Expr, n: int) -> bool:
    """Whether integer expression `e` is a multiple of `n` for every value of its variables."""
    if isinstance(e, Const):
        return int(e.value) % n == 0
    if isinstance(e, Var):
        return False
    if isinstance(e, Binary):
        if e.op in ("add", "sub", "min", "max"):
            return _multiple_of(e.a, n) and _multiple_of(e.b, n)
        if e.op == "mul":
            return _multiple_of(e.a, n) or _multiple_of(e.b, n)
        if e.op == "mod":
            return _multiple_of(e.a, n) and _multiple_of(e.b, n)
        return False
    if isinstance(e, Select):
        return _multiple_of(e.t, n) and _multiple_of(e.f, n)
    if isinstance(e, Cast):
        return _multiple_of(e.value, n)
    return False

_F32 = {"exp": "expf({x})", "log": "logf({x})", "sqrt": "sqrtf({x})", "rsqrt": "rsqrtf({x})",
        "tanh": "tanhf({x})", "erf": "erff({x})", "sigmoid": "(1.0f / (1.0f + expf(-({x}))))",
        "abs": "fabsf({x})", "floor": "floorf({x})", "ceil": "ceilf({x})"}
_F64 = {"exp": "exp({x})", "log": "log({x})", "sqrt": "sqrt({x})", "rsqrt": "rsqrt({x})",
        "tanh": "tanh({x})", "erf": "erf({x})", "sigmoid": "(1.0 / (1.0 + exp(-({x}))))",
        "abs": "fabs({x})", "floor": "floor({x})", "ceil": "ceil({x})"}

_PRELUDE = r"""#ifdef __CUDACC_RTC__
typedef int int32_t;
typedef long long int64_t;
typedef unsigned int uint32_t;
typedef unsigned short uint16_t;
typedef unsigned char uint8_t;
#else
#include <stdint.h>
#endif
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fffffff)
#endif
#define ASC_DEV __device__ __forceinline__
ASC_DEV float asc_bf16_to_f32(uint16_t h) { return __uint_as_float(((uint32_t)h) << 16); }
ASC_DEV uint16_t asc_f32_to_bf16(float x) {
  uint32_t u = __float_as_uint(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u); return (uint16_t)(u >> 16);
}
ASC_DEV float asc_round_bf16(float x) { return asc_bf16_to_f32(asc_f32_to_bf16(x)); }
ASC_DEV float asc_f16_to_f32(uint16_t h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
ASC_DEV uint16_t asc_f32_to_f16(float x) { uint16_t h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x)); return h; }
ASC_DEV float asc_round_f16(float x) { return asc_f16_to_f32(asc_f32_to_f16(x)); }
ASC_DEV int32_t asc_floordiv_int32(int32_t a, int32_t b) {
  int32_t q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q; }
ASC_DEV int32_t asc_mod_int32(int32_t a, int32_t b) {
  int32_t r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
ASC_DEV int64_t asc_floordiv_int64(int64_t a, int64_t b) {
  int64_t q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q; }
ASC_DEV int64_t asc_mod_int64(int64_t a, int64_t b) {
  int64_t r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
"""

CUDA_DIALECT = Dialect(
    storage_types=C_STORAGE_TYPES,
    compute_types=C_COMPUTE_TYPES,
    float_funcs=_F32,
    double_funcs=_F64,
    restrict="__restrict__",
    prelude=_PRELUDE,
    kernel_prefix='extern "C" __global__',
)

CUDA_ARCH_FLAGS = ("-arch=sm_90",)


class CudaRenderer(CStyleRenderer):
    """CStyleRenderer with GPU loops: bound loops read the launch indices."""

    def stmt(self, s: Stmt, indent: int) -> None:
        if isinstance(s, Barrier):
            self.emit("__syncthreads();", indent)
        else:
            super().stmt(s, indent)

    def bound_or_serial(self, s: For, indent: int) -> None:
        if s.kind == "bound" and s.thread_tag != "vthread":
            v = self.var_name(s.var)
            n = arith.const_value(s.extent)
            if n is not None:
                self.ranges[id(s.var)] = n
            self.emit(f"const int32_t {v} = (int32_t){s.thread_tag};", indent)
            self.stmt(s.body, indent)
            return
        super().loop(s, indent)

    def loop(self, s: For, indent: int) -> None:
        if s.kind == "vectorized" and self.vector_copy(s, indent):
            return
        self.bound_or_serial(s, indent)

    def vector_copy(self, s: For, indent: int) -> bool:
        """A vectorized loop of 2 or 4 lanes copying one buffer into another becomes one 64/128-bit
        load and store on each side whose addresses are contiguous and aligned (register arrays are
        read and written by component); False when the loop is no such copy."""
        n = arith.const_value(s.extent)
        st = s.body
        if n not in (2, 4) or not isinstance(st, Store) or not isinstance(st.value, Load):
            return False
        vt = _VEC_TYPES.get(st.buffer.dtype)
        if vt is None or st.value.buffer.dtype != st.buffer.dtype:
            return False
        vt = f"{vt}{n}"
        src, dst = st.value, st
        lanes = "xyzw"[:n]

        def refs(buf, indices) -> tuple[list[str], bool]:
            flats = []
            for c in range(n):
                self.subst[s.var] = Const(c, "int32")
                flats.append(self._flat(buf, indices))
            del self.subst[s.var]
            contiguous = all(arith.const_value(Binary("sub", f, flats[0], "int32")) == c for c, f in enumerate(flats))
            wide = contiguous and buf.scope != "local" and _multiple_of(flats[0], n)
            return [self.expr(f) for f in flats], wide

        s_refs, s_wide = refs(src.buffer, src.indices)
        d_refs, d_wide = refs(dst.buffer, dst.indices)
        if not (s_wide or d_wide):
            return False
        sname, dname = self.buf_name(src.buffer), self.buf_name(dst.buffer)
        self.emit("{", indent)
        if s_wide:
            self.emit(f"const {vt} asc_v = *(const {vt}*)(&{sname}[{s_refs[0]}]);", indent + 1)
        else:
            self.emit(f"const {vt} asc_v = make_{vt}({', '.join(f'{sname}[{r}]' for r in s_refs)});", indent + 1)
        if d_wide:
            self.emit(f"*({vt}*)(&{dname}[{d_refs[0]}]) = asc_v;", indent + 1)
        else:
            for r, lane in zip(d_refs, lanes):
                self.emit(f"{dname}[{r}] = asc_v.{lane};", indent + 1)
        self.emit("}", indent)
        return True

    def _flat(self, buf, indices) -> Expr:
        flat: Expr = Const(0, "int32")
        for d, idx in enumerate(indices):
            stride = 1
            for m in buf.shape[d + 1:]:
                stride *= m
            idx = substitute(idx, self.subst) if self.subst else idx
            flat = Binary("add", flat, Binary("mul", idx, Const(stride, "int32"), "int32"), "int32")
        return arith.simplify(flat)

    def loop_pragma(self, s: For, n: int | None) -> str:
        # vthread: a virtual thread is an unrolled serial loop at its place in the nest
        if s.kind in ("unrolled", "vectorized") or (s.kind == "bound" and s.thread_tag == "vthread"):
            return "#pragma unroll"
        if s.kind == "serial" and s.unroll > 1:
            return f"#pragma unroll {s.unroll}"
        return ""

    def allocate(self, s: Allocate, indent: int) -> None:
        b = s.buffer
        st = self.d.storage_types[b.dtype]
        self.emit("{", indent)
        self.emit(f"{st} {b.name}[{b.size}];", indent + 1)
        self.stmt(s.body, indent + 1)
        self.emit("}", indent)


def render_cuda(g: GpuFunc, dialect: Dialect = CUDA_DIALECT) -> KernelSource:
    """CUDA C source of a GPU-lowered kernel, with its launch shape in `launch`."""
    func = g.func
    r = CudaRenderer(dialect)
    outputs = _outputs(func)
    indent = 1
    lines: list[str] = []
    if g.shared:
        lines.append("  extern __shared__ __align__(16) unsigned char asc_smem[];")
        for b, off in g.shared:
            st = dialect.storage_types[b.dtype]
            lines.append(f"  {st}* {dialect.restrict} {b.name} = ({st}*)(asc_smem + {off});")
    r.stmt(func.body, indent)
    params = ", ".join(
        f"{'' if id(b) in outputs else 'const '}{dialect.storage_types[b.dtype]}* {dialect.restrict} {b.name}"
        for b in func.params)
    bounds = f"__launch_bounds__({g.threads}) " if g.threads > 1 else ""
    sig = f"{dialect.kernel_prefix} void {bounds}{func.name}({params}) {{"
    code = "\n".join(dialect.prelude.splitlines() + [sig] + lines + r.lines + ["}", ""])
    args = tuple(ArgSpec(b.stage or b.name, b.shape, b.dtype, id(b) in outputs) for b in func.params)
    launch = {"grid": list(g.grid), "block": list(g.block), "shared_bytes": g.shared_bytes}
    return KernelSource("cuda", code, func.name, args, CUDA_ARCH_FLAGS, launch)


def _outputs(func: LoweredFunc) -> set[int]:
    out: set[int] = set()
    stack: list = [func.body]
    while stack:
        s = stack.pop()
        if isinstance(s, Store):
            out.add(id(s.buffer))
        if hasattr(s, "stmts"):
            stack.extend(s.stmts)
        if hasattr(s, "body"):
            stack.append(s.body)
    return out


def shared_bytes_of(g: GpuFunc) -> int:
    return sum(b.size * dtype_bytes(b.dtype) for b, _ in g.shared)
