"""Hand-written C kernels planted into the measure layer, and their reference provider.

Every kernel has the signature `void NAME(const float* A, const float* B, float* C)` on
arrays of N floats, and the reference is C = A + B, so a wrong kernel is easy to write.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from autosched.codegen.source import ArgSpec, KernelSource
from autosched.compile.types import MeasureInput

N = 4096
ARGS = (
    ArgSpec("A", (N,), "float32", False),
    ArgSpec("B", (N,), "float32", False),
    ArgSpec("C", (N,), "float32", True),
)

BODIES = {
    "good": "for (int i = 0; i < %(n)d; ++i) C[i] = A[i] + B[i];",
    "good_omp": "#pragma omp parallel for\n  for (int i = 0; i < %(n)d; ++i) C[i] = A[i] + B[i];",
    "segfault": "volatile float* p = (volatile float*)0; C[0] = p[1234];",
    "abort": 'fputs("planted kernel gives up\\n", stderr); abort();',
    "hang": "volatile int go = 1; while (go) {}",
    "wrong": "for (int i = 0; i < %(n)d; ++i) C[i] = A[i] - B[i];",
    "skips_last": "for (int i = 0; i < %(n)d - 1; ++i) C[i] = A[i] + B[i];",
    "compile_error": "this is not C;",
    "off_by_tiny": "for (int i = 0; i < %(n)d; ++i) C[i] = (A[i] + B[i]) * (1.0f + 1e-6f);",
    # right answer, then ruins its input (casts the const away): the next candidate must not see it
    "scribbles_input": "for (int i = 0; i < %(n)d; ++i) { C[i] = A[i] + B[i]; ((float*)A)[i] = 1e9f; }",
}

HEADER = "#include <stdio.h>\n#include <stdlib.h>\n#include <time.h>\n"


def kernel(kind: str, tag: str = "", n: int = N) -> KernelSource:
    """A planted kernel; `tag` makes the source (hence its hash) distinct."""
    body = BODIES[kind] % {"n": n} if "%(n)d" in BODIES[kind] else BODIES[kind]
    entry = f"k_{kind}"
    code = (f"{HEADER}/* {tag} */\nvoid {entry}(const float* restrict A, const float* restrict B, "
            f"float* restrict C) {{\n  {body}\n}}\n")
    args = ARGS if n == N else tuple(ArgSpec(a.name, (n,), a.dtype, a.is_output) for a in ARGS)
    return KernelSource("c", code, entry, args)


def spin_kernel(microseconds: float, tag: str = "") -> KernelSource:
    """Correct add, plus a busy wait of `microseconds` on the monotonic clock (known cost)."""
    ns = int(microseconds * 1000)
    code = (f"{HEADER}/* spin {tag} */\n"
            "void k_spin(const float* A, const float* B, float* C) {\n"
            "  struct timespec t0, t; clock_gettime(CLOCK_MONOTONIC, &t0);\n"
            f"  do {{ clock_gettime(CLOCK_MONOTONIC, &t); }} while ((t.tv_sec - t0.tv_sec) * 1000000000L"
            f" + (t.tv_nsec - t0.tv_nsec) < {ns}L);\n"
            f"  for (int i = 0; i < {N}; ++i) C[i] = A[i] + B[i];\n}}\n")
    return KernelSource("c", code, "k_spin", ARGS)


CUDA_BODIES = {
    "good": "if (i < %(n)d) C[i] = A[i] + B[i];",
    "wrong": "if (i < %(n)d) C[i] = A[i] - B[i];",
    "fault": "C[(long long)i << 36] = A[0];",  # illegal address: the CUDA context is lost
    "compile_error": "this is not CUDA;",
}


def cuda_kernel(kind: str, tag: str = "", n: int = N) -> KernelSource:
    """A planted CUDA C kernel with the same arguments and reference (C = A + B) as `kernel`."""
    code = (f'/* {tag} */\nextern "C" __global__ void k_{kind}(const float* A, const float* B, float* C) {{\n'
            f"  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  {CUDA_BODIES[kind] % {'n': n}}\n}}\n")
    args = ARGS if n == N else tuple(ArgSpec(a.name, (n,), a.dtype, a.is_output) for a in ARGS)
    launch = {"grid": [(n + 255) // 256, 1, 1], "block": [256, 1, 1], "shared_bytes": 0}
    return KernelSource("cuda", code, f"k_{kind}", args, ("-arch=sm_90",), launch)


def measure_input(tag: str = "", workload: str = "add4096") -> MeasureInput:
    return MeasureInput(workload, '{"op": "planted_add"}', "cpu", f'[{{"tag": "{tag}"}}]')


class AddReference:
    """ReferenceProvider for the planted kernels: C = A + B on seeded random inputs."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.calls = 0

    def __call__(self, inp: MeasureInput, args: Sequence[ArgSpec]):
        self.calls += 1
        n = args[0].shape[0]
        rng = np.random.default_rng(self.seed)
        a = rng.standard_normal(n).astype(np.float32)
        b = rng.standard_normal(n).astype(np.float32)
        return {"A": a, "B": b}, {"C": a + b}
