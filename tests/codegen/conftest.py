"""Codegen tests: generated C is pinned to one vector width."""

from __future__ import annotations

import pytest

from autosched.target.host_isa import VECTOR_BYTES_ENV


@pytest.fixture(autouse=True)
def _vectors_of_64_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The golden sources and the vector-shape assertions here are written for 64-byte vectors
    (`asc_f32x16`): pinned, so that they do not depend on the host's ISA. The kernels still run
    here whatever the host (gcc splits wider vectors); tests/codegen/test_codegen_vector_width.py
    covers every width."""
    monkeypatch.setenv(VECTOR_BYTES_ENV, "64")
