"""Schedule steps: every primitive call is a frozen, JSON-serializable record.

Steps name stages and loops by name, never by position, and carry a format version, so the same
list replayed on the same DAG gives the identical loop nest on any machine.
"""

from __future__ import annotations

import operator
from dataclasses import MISSING, asdict, dataclass, fields
from typing import Any, ClassVar

from autosched.schedule.state import ScheduleError

STEP_FORMAT_VERSION = 1
THREAD_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z", "vthread")
ANNOTATIONS = ("parallel", "vectorize", "unroll")
# auto_unroll_max_step: all targets; num_warps / num_stages / swizzle (GROUP_M program order) /
# allow_tf32: launch and precision options the triton target reads (cuda ignores them);
# double_buffer (on a loop where shared stages are filled), vector_fetch and smem_layout (on a
# shared stage): the cuda target's pipelining, 128-bit fetch and shared layout (lower_gpu);
# welford (on the triton output's program loop): one pass for a chunked mean/variance pair;
# store_evict (likewise): the output store streams past L2 (eviction_policy="evict_first");
# nontemporal (on a vectorized loop storing to an output, cpu): streaming stores that bypass the caches
PRAGMAS = ("auto_unroll_max_step", "num_warps", "num_stages", "swizzle", "allow_tf32", "double_buffer", "vector_fetch",
           "smem_layout", "welford", "store_evict", "nontemporal")


@dataclass(frozen=True)
class Step:
    kind: ClassVar[str] = ""

    def __post_init__(self) -> None:
        """Check every field against its declared type (lists of names become tuples), so a step made
        by the API and one read from JSON are validated alike and stay hashable."""
        for f in fields(self):
            v = getattr(self, f.name)
            if "tuple" in f.type:
                if not isinstance(v, list | tuple) or not all(isinstance(x, str) for x in v):
                    self._bad(f.name, "a list of names", v)
                object.__setattr__(self, f.name, tuple(v))
            elif f.type == "str" and not isinstance(v, str):
                self._bad(f.name, "a string", v)
            elif f.type == "int" or (f.type == "int | None" and v is not None):
                n = _as_int(v)
                if n is None:
                    self._bad(f.name, "an integer" if f.type == "int" else "an integer or null", v)
                object.__setattr__(self, f.name, n)  # numpy integers become plain ints (JSON)

    def _bad(self, name: str, what: str, v: object) -> None:
        stage = getattr(self, "stage", None) or getattr(self, "tensor", None)
        where = f" of stage {stage!r}" if isinstance(stage, str) else ""
        raise ScheduleError(f"step {self.kind!r}{where}: field {name!r} must be {what}, got {v!r}")

    OMITTED_AT_DEFAULT: ClassVar[tuple[str, ...]] = ()
    """Fields added after records were stored: left out of the JSON while they hold their default,
    so the steps (and `steps_hash`) of every schedule that does not use them stay what they were."""

    def to_dict(self) -> dict[str, Any]:
        d = {"kind": self.kind, "v": STEP_FORMAT_VERSION}
        defaults = {f.name: f.default for f in fields(self)}
        for k, v in asdict(self).items():
            if k in self.OMITTED_AT_DEFAULT and v == defaults[k]:
                continue
            d[k] = list(v) if isinstance(v, tuple) else v
        return d

    def describe(self) -> str:
        args = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self))
        return f"{type(self).__name__}({args})"


@dataclass(frozen=True)
class SplitStep(Step):
    kind: ClassVar[str] = "split"
    stage: str
    loop: str
    factor: int | None = None
    nparts: int | None = None


@dataclass(frozen=True)
class FuseStep(Step):
    kind: ClassVar[str] = "fuse"
    stage: str
    loops: tuple[str, ...]


@dataclass(frozen=True)
class ReorderStep(Step):
    kind: ClassVar[str] = "reorder"
    stage: str
    order: tuple[str, ...]


@dataclass(frozen=True)
class TileStep(Step):
    kind: ClassVar[str] = "tile"
    stage: str
    x: str
    y: str
    x_factor: int
    y_factor: int


@dataclass(frozen=True)
class AnnotateStep(Step):
    kind: ClassVar[str] = "annotate"
    stage: str
    loop: str
    annotation: str  # parallel | vectorize | unroll


@dataclass(frozen=True)
class BindStep(Step):
    kind: ClassVar[str] = "bind"
    stage: str
    loop: str
    thread: str


@dataclass(frozen=True)
class CacheReadStep(Step):
    kind: ClassVar[str] = "cache_read"
    OMITTED_AT_DEFAULT: ClassVar[tuple[str, ...]] = ("layout",)
    tensor: str
    scope: str
    readers: tuple[str, ...]
    layout: str = ""
    """"" keeps the tensor's layout; "transposed" swaps its last two axes in the copy (a packed panel
    of nn.Linear's [N, K] weight becomes [K, N], contiguous along the vectorized output axis);
    "outer_last" moves its first axis last (a convolution kernel [K, C, R, S] becomes [C, R, S, K],
    contiguous along the output channels a channel-vectorized register tile holds as lanes)."""


@dataclass(frozen=True)
class CacheWriteStep(Step):
    kind: ClassVar[str] = "cache_write"
    tensor: str
    scope: str


@dataclass(frozen=True)
class ComputeAtStep(Step):
    kind: ClassVar[str] = "compute_at"
    stage: str
    target: str
    loop: str


@dataclass(frozen=True)
class ComputeInlineStep(Step):
    kind: ClassVar[str] = "compute_inline"
    stage: str


@dataclass(frozen=True)
class ComputeRootStep(Step):
    kind: ClassVar[str] = "compute_root"
    stage: str


@dataclass(frozen=True)
class RfactorStep(Step):
    kind: ClassVar[str] = "rfactor"
    stage: str
    loop: str
    factor_axis: int = 0


@dataclass(frozen=True)
class PragmaStep(Step):
    kind: ClassVar[str] = "pragma"
    stage: str
    loop: str
    key: str
    value: int


STEP_TYPES: dict[str, type[Step]] = {
    cls.kind: cls for cls in (SplitStep, FuseStep, ReorderStep, TileStep, AnnotateStep, BindStep, CacheReadStep,
                              CacheWriteStep, ComputeAtStep, ComputeInlineStep, ComputeRootStep, RfactorStep,
                              PragmaStep)
}


def step_from_dict(d: dict[str, Any]) -> Step:
    """Rebuild a step from its JSON form, validating the kind, version and field types."""
    if not isinstance(d, dict) or "kind" not in d:
        raise ScheduleError(f"malformed step {d!r}: expected an object with a 'kind'")
    kind = d["kind"]
    cls = STEP_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ScheduleError(f"unknown step kind {kind!r}; known: {sorted(STEP_TYPES)}")
    v = d.get("v", STEP_FORMAT_VERSION)
    if not _is_int(v) or v != STEP_FORMAT_VERSION:
        raise ScheduleError(f"step format version {v!r} is not supported (this build: {STEP_FORMAT_VERSION})")
    names = {f.name for f in fields(cls)}
    extra = set(d) - names - {"kind", "v"}
    if extra:
        raise ScheduleError(f"step {kind!r}: unknown fields {sorted(extra)}")
    for f in fields(cls):
        if f.name not in d and f.default is MISSING:
            raise ScheduleError(f"step {kind!r} lacks field {f.name!r}")
    kwargs = {k: v for k, v in d.items() if k in names}
    return cls(**kwargs)


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _as_int(v: object) -> int | None:
    """`v` as a plain int (numpy integers welcome); None for floats, bools, strings."""
    if isinstance(v, bool) or not hasattr(v, "__index__"):
        return None
    return operator.index(v)
