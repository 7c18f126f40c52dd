"""Shared set-up for the codegen tests: they reuse the schedule tests' helpers."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "schedule"))

import pytest  # noqa: E402

from autosched.target.host_isa import VECTOR_BYTES_ENV  # noqa: E402


@pytest.fixture(autouse=True)
def _vectors_of_64_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The golden sources and the vector-shape assertions here are written for 64-byte vectors
    (`asc_f32x16`): pinned, so that they do not depend on the host's ISA. The kernels still run
    here whatever the host (gcc splits wider vectors); tests/codegen/test_codegen_vector_width.py
    covers every width."""
    monkeypatch.setenv(VECTOR_BYTES_ENV, "64")
