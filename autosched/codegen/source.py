"""`KernelSource`: what a renderer produces and a compiler consumes (source text, never a binary)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from autosched.measure.types import ArgSpec


@dataclass(frozen=True)
class KernelSource:
    """Generated kernel source for one schedule on one target.

    `vector_loops` lists, for each loop the schedule asked to vectorize, its first and last source
    line and the first lines of the loops around it, so the compiler's report can confirm that it
    really became vector code (or a library call such as memset).
    """

    language: str  # "c", "cuda", "triton"
    code: str
    entry: str
    args: tuple[ArgSpec, ...]
    compile_flags: tuple[str, ...] = ()
    launch: dict = field(default_factory=dict, hash=False, compare=False)
    vector_loops: tuple[tuple, ...] = ()  # (start, end, outer loop starts, nested loop (start, end) ranges)

    @property
    def source_hash(self) -> str:
        h = hashlib.sha256()
        h.update(self.language.encode())
        h.update(b"\0")
        h.update(self.code.encode())
        h.update(b"\0")
        h.update("\0".join(self.compile_flags).encode())
        return h.hexdigest()
