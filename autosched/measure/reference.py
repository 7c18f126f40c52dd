"""Reference data for the correctness check: the inputs a kernel is fed and the outputs it owes.

The seam is a `ReferenceProvider`: any callable `(MeasureInput, args) -> Reference` (or a
plain `(inputs, expected)` tuple). The default evaluates the workload's DAG with numpy; tests
pass their own for hand-written kernels. Runners call the provider in the tuner (driver)
process, through a `ReferenceCache` keyed by workload, seed and argument signature, so the
numpy reference of a workload is computed once, not once per candidate, and the provider
never has to be pickled into a kernel process or a remote actor (a test's closure works).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from autosched.codegen.source import ArgSpec
from autosched.compile.types import MeasureInput


def np_dtype(name: str) -> np.dtype:
    """numpy dtype of an ArgSpec dtype name ("bfloat16" is ml_dtypes')."""
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


@dataclass(frozen=True)
class Reference:
    """Inputs by name, expected outputs by name, and the longest reduction (scales tolerances)."""

    inputs: Mapping[str, np.ndarray]
    expected: Mapping[str, np.ndarray]
    reduce_len: int = 1
    meta: Mapping[str, object] = field(default_factory=dict, compare=False)


ReferenceLike = Reference | tuple[Mapping[str, np.ndarray], Mapping[str, np.ndarray]]


class ReferenceProvider(Protocol):
    def __call__(self, inp: MeasureInput, args: Sequence[ArgSpec]) -> ReferenceLike: ...


def as_reference(value: ReferenceLike) -> Reference:
    if isinstance(value, Reference):
        return value
    inputs, expected = value
    return Reference(dict(inputs), dict(expected))


def random_arrays(args: Sequence[ArgSpec], seed: int) -> dict[str, np.ndarray]:
    """Uniform [-1, 1) floats / small ints for every non-output argument (no reference needed)."""
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for a in args:
        if a.is_output:
            continue
        dt = np_dtype(a.dtype)
        if dt.kind == "f" or a.dtype == "bfloat16":
            out[a.name] = rng.uniform(-1.0, 1.0, size=a.shape).astype(dt)
        else:
            out[a.name] = rng.integers(-8, 8, size=a.shape).astype(dt)
    return out


class DagReferenceProvider:
    """The default: random inputs from the workload's DAG and its numpy evaluation.

    `autosched.te` is imported lazily: the measure layer must import without the DSL.
    `reduce_len` is the longest reduction of any stage (product of its reduce-axis extents).
    """

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def __call__(self, inp: MeasureInput, args: Sequence[ArgSpec]) -> Reference:
        from autosched.te import ComputeDAG

        dag = ComputeDAG.from_json(inp.workload_json)
        inputs = dag.random_inputs(self.seed)
        computed = dag.evaluate(inputs)
        names = {a.name for a in args}
        expected = {k: np.asarray(v) for k, v in computed.items() if k in names}
        return Reference(dict(inputs), expected, longest_reduction(dag))


def longest_reduction(dag: object) -> int:
    """Max over the DAG's compute stages of the product of their reduce-axis extents."""
    best = 1
    for t in getattr(dag, "computes", ()):
        extents = [int(getattr(a, "extent", 1)) for a in getattr(t.op, "reduce_axis", ())]
        best = max(best, int(np.prod(extents)) if extents else 1)
    return best


def reference_key(inp: MeasureInput, args: Sequence[ArgSpec], seed: int) -> str:
    """Identity of a reference: same workload, same seed, same argument signature."""
    h = hashlib.sha256()
    h.update(inp.workload_key.encode())
    h.update(f"\0{seed}\0".encode())
    for a in args:
        h.update(f"{a.name}:{a.shape}:{a.dtype}:{a.is_output};".encode())
    return h.hexdigest()[:32]


class ReferenceCache:
    """LRU cache in front of a provider; thread-safe, bounded by entry count."""

    def __init__(self, provider: ReferenceProvider, seed: int, max_entries: int = 8) -> None:
        self.provider = provider
        self.seed = seed
        self.max_entries = max_entries
        self._cache: OrderedDict[str, Reference] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, inp: MeasureInput, args: Sequence[ArgSpec]) -> tuple[str, Reference]:
        key = reference_key(inp, args, self.seed)
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return key, self._cache[key]
        ref = validate_reference(as_reference(self.provider(inp, args)), args)
        with self._lock:
            self._cache[key] = ref
            while len(self._cache) > self.max_entries:
                self._cache.popitem(last=False)
        return key, ref


def validate_reference(ref: Reference, args: Sequence[ArgSpec]) -> Reference:
    """Fail early, with names, when the reference does not fit the kernel's arguments."""
    inputs: dict[str, np.ndarray] = {}
    expected: dict[str, np.ndarray] = {}
    for a in args:
        source = ref.expected if a.is_output else ref.inputs
        if a.name not in source:
            if a.is_output:
                raise ValueError(f"the reference has no expected output {a.name!r}")
            continue  # scratch argument: the kernel process zero-fills it
        arr = np.asarray(source[a.name])
        if tuple(arr.shape) != tuple(a.shape):
            raise ValueError(f"reference {a.name!r} has shape {tuple(arr.shape)}, kernel expects {a.shape}")
        if not a.is_output:  # expected values keep their (maybe higher) precision
            arr = np.ascontiguousarray(arr, dtype=np_dtype(a.dtype))
        (expected if a.is_output else inputs)[a.name] = arr
    return Reference(inputs, expected, ref.reduce_len, ref.meta)
