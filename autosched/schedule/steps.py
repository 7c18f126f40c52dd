"""Schedule steps: every primitive call is a frozen, JSON-serializable record.

Steps name stages and loops by name, never by position, and carry a format version, so the same
list replayed on the same DAG gives the identical loop nest on any machine.
"""

from __future__ import annotations

from dataclasses import MISSING, asdict, dataclass, fields
from typing import Any, ClassVar

STEP_FORMAT_VERSION = 1
THREAD_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z", "vthread")
ANNOTATIONS = ("parallel", "vectorize", "unroll")
PRAGMAS = ("auto_unroll_max_step",)


@dataclass(frozen=True)
class Step:
    kind: ClassVar[str] = ""

    def to_dict(self) -> dict[str, Any]:
        d = {"kind": self.kind, "v": STEP_FORMAT_VERSION}
        for k, v in asdict(self).items():
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
    tensor: str
    scope: str
    readers: tuple[str, ...]


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
    from autosched.schedule.state import ScheduleError

    if not isinstance(d, dict) or "kind" not in d:
        raise ScheduleError(f"malformed step {d!r}: expected an object with a 'kind'")
    cls = STEP_TYPES.get(d["kind"])
    if cls is None:
        raise ScheduleError(f"unknown step kind {d['kind']!r}; known: {sorted(STEP_TYPES)}")
    if d.get("v", STEP_FORMAT_VERSION) != STEP_FORMAT_VERSION:
        raise ScheduleError(f"step format version {d.get('v')!r} is not supported (this build: {STEP_FORMAT_VERSION})")
    kwargs = {}
    for f in fields(cls):
        if f.name not in d:
            if f.default is not MISSING:  # optional field
                continue
            raise ScheduleError(f"step {d['kind']!r} lacks field {f.name!r}")
        v = d[f.name]
        if "tuple" in str(f.type):
            if not isinstance(v, list | tuple) or not all(isinstance(x, str) for x in v):
                raise ScheduleError(f"step {d['kind']!r}: field {f.name!r} must be a list of names")
            v = tuple(v)
        elif f.type in ("str",) and not isinstance(v, str):
            raise ScheduleError(f"step {d['kind']!r}: field {f.name!r} must be a string")
        elif f.type in ("int", "int | None") and v is not None and (not isinstance(v, int) or isinstance(v, bool)):
            raise ScheduleError(f"step {d['kind']!r}: field {f.name!r} must be an integer")
        kwargs[f.name] = v
    extra = set(d) - {f.name for f in fields(cls)} - {"kind", "v"}
    if extra:
        raise ScheduleError(f"step {d['kind']!r}: unknown fields {sorted(extra)}")
    return cls(**kwargs)
