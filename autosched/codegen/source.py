"""`KernelSource`: what a renderer produces and a compiler consumes (source text, never a binary)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ArgSpec:
    """One kernel argument, in call order."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    is_output: bool

    def to_dict(self) -> dict:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype, "is_output": self.is_output}

    @staticmethod
    def from_dict(d: dict) -> ArgSpec:
        return ArgSpec(d["name"], tuple(int(x) for x in d["shape"]), d["dtype"], bool(d["is_output"]))


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
