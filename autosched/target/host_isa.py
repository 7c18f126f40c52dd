"""What the C compiler targets on this host: kernels are compiled with `-march=native`, so the
vector width the renderer writes for must be the one that flag enables here.

Why it matters: the renderer writes register tiles and row loops with GCC vector types, and a
vector type wider than the host's registers has no register mode, so gcc keeps every such value in
memory and splits each operation into pieces. So the width is asked of the compiler, once per
process, and can be pinned with AUTOSCHED_VECTOR_BYTES (tests pin it so that golden sources do not
depend on the machine that runs them). See docs/decisions/vector-width-from-the-compiler.md.
"""

from __future__ import annotations

import functools
import os
import subprocess

VECTOR_BYTES_ENV = "AUTOSCHED_VECTOR_BYTES"
VECTOR_BYTES_CHOICES = (16, 32, 64)


# extensions the renderer's vector code depends on, as `cc -dM -E` names them, with the tag each gets in keys
VECTOR_FEATURES = (("__AVX512F__", "avx512f"), ("__AVX2__", "avx2"), ("__FMA__", "fma"), ("__AVX__", "avx"))


@functools.lru_cache(maxsize=8)
def predefined_macros(compiler: str = "cc", march: str = "native") -> frozenset[str]:
    """Names of the macros `compiler -march=<march>` predefines (empty when it cannot be asked)."""
    try:
        out = subprocess.run([compiler, f"-march={march}", "-dM", "-E", "-x", "c", os.devnull],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return frozenset()
    if out.returncode != 0:
        return frozenset()
    return frozenset(line.split()[1] for line in out.stdout.splitlines() if line.startswith("#define "))


def native_macros(compiler: str = "cc") -> frozenset[str]:
    """Names of the macros `compiler -march=native` predefines (empty when it cannot be asked)."""
    return predefined_macros(compiler, "native")


@functools.lru_cache(maxsize=4)
def native_march_name(compiler: str = "cc") -> str:
    """The CPU name `-march=native` resolves to ("znver3", "icelake-server"...; "unknown" if not told)."""
    try:
        out = subprocess.run([compiler, "-march=native", "-Q", "--help=target"], capture_output=True, text=True,
                             timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "-march=":
            return parts[1]
    return "unknown"


def native_arch(compiler: str = "cc") -> str:
    """The ISA `-march=native` selects, as a short tag for target and cache keys ("znver3", "x86-64-v4"...).

    The CPU name alone can hide the vector width: a compiler older than the CPU names the nearest
    CPU it knows and adds the extensions it detects, and a VM may mask extensions the named CPU
    has (see docs/decisions/vector-width-from-the-compiler.md). Schedules tuned for one width
    are not the best for another, so the vector extensions that differ from the named CPU's are
    appended: "znver3+avx512f", "icelake-server-avx512f".
    """
    name = native_march_name(compiler)
    if name == "unknown":
        return name
    native, named = native_macros(compiler), predefined_macros(compiler, name)
    if not native or not named:
        return name
    added = "".join(f"+{tag}" for macro, tag in VECTOR_FEATURES if macro in native and macro not in named)
    removed = "".join(f"-{tag}" for macro, tag in VECTOR_FEATURES if macro in named and macro not in native)
    return name + added + removed


def native_vector_bytes(compiler: str = "cc") -> int:
    """Widest vector registers `-march=native` enables here: 64 with AVX-512, 32 with AVX, else 16."""
    m = native_macros(compiler)
    if "__AVX512F__" in m:
        return 64
    if "__AVX__" in m:
        return 32
    return 16


def vector_bytes() -> int:
    """The vector width generated C is written for: AUTOSCHED_VECTOR_BYTES if set, else this host's."""
    pinned = os.environ.get(VECTOR_BYTES_ENV, "").strip()
    if not pinned:
        return native_vector_bytes()
    if not pinned.isdigit() or int(pinned) not in VECTOR_BYTES_CHOICES:
        raise ValueError(f"{VECTOR_BYTES_ENV}={pinned!r}: expected one of {VECTOR_BYTES_CHOICES} (bytes per vector)")
    return int(pinned)
