"""The reference seam: validation against the kernel's arguments, caching, shipping to the child."""

from __future__ import annotations

import numpy as np
import pytest

from autosched.codegen.source import ArgSpec
from autosched.measure.config import RunnerConfig
from autosched.measure.executor import KernelCall
from autosched.measure.reference import (
    Reference,
    ReferenceCache,
    random_arrays,
    reference_key,
    validate_reference,
)
from autosched.measure.sandbox import KernelSandbox
from tests.support.measure_kernels import ARGS, AddReference, measure_input


def test_validate_names_shape_and_missing_output() -> None:
    a = np.zeros(4096, np.float64)
    ref = validate_reference(Reference({"A": a, "B": a}, {"C": a}), ARGS)
    assert ref.inputs["A"].dtype == np.float32 and ref.expected["C"].dtype == np.float64
    with pytest.raises(ValueError, match="'A' has shape"):
        validate_reference(Reference({"A": np.zeros(3), "B": a}, {"C": a}), ARGS)
    with pytest.raises(ValueError, match="no expected output 'C'"):
        validate_reference(Reference({"A": a, "B": a}, {}), ARGS)


def test_cache_is_keyed_by_workload_seed_and_signature_and_bounded() -> None:
    provider = AddReference()
    cache = ReferenceCache(provider, seed=0, max_entries=2)
    k1, _ = cache.get(measure_input("x", "w1"), ARGS)
    assert cache.get(measure_input("y", "w1"), ARGS)[0] == k1 and provider.calls == 1
    cache.get(measure_input("x", "w2"), ARGS)
    cache.get(measure_input("x", "w3"), ARGS)
    cache.get(measure_input("x", "w1"), ARGS)  # evicted by w2, w3
    assert provider.calls == 4
    other = tuple(ArgSpec(a.name, a.shape, "float64", a.is_output) for a in ARGS)
    assert reference_key(measure_input("x", "w1"), other, 0) != k1
    assert reference_key(measure_input("x", "w1"), ARGS, 1) != k1


def test_random_arrays_are_seeded_and_skip_outputs() -> None:
    a, b = random_arrays(ARGS, 3), random_arrays(ARGS, 3)
    assert set(a) == {"A", "B"} and np.array_equal(a["A"], b["A"])
    assert not np.array_equal(a["A"], random_arrays(ARGS, 4)["A"])


def test_sandbox_ships_each_reference_once_and_evicts() -> None:
    sb = KernelSandbox(max_refs=2)
    cfg = RunnerConfig()
    call = KernelCall("/x.so", "k", ARGS)
    ref = Reference({}, {})
    first = sb._job(call, cfg, "r1", ref)
    assert first.reference is ref and sb._job(call, cfg, "r1", ref).reference is None
    sb._job(call, cfg, "r2", ref)
    third = sb._job(call, cfg, "r3", ref)
    assert third.drop_keys == ("r1",)
    assert sb._job(call, RunnerConfig(enable_check=False), "r9", ref).ref_key is None
