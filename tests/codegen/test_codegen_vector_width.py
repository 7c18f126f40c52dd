"""Generated C is written for the host's vector width (`autosched.target.host_isa`): 64-byte
vectors with AVX-512, 32 with AVX2, 16 otherwise. Every width renders its own vector types and
runs correctly against numpy (how the width is found: tests/target/test_target_host_isa.py)."""

from __future__ import annotations

import pytest

import autosched as asc
from autosched.target.host_isa import VECTOR_BYTES_ENV
from tests.support.sched_helpers import check, matmul_packed, matmul_tiled, op

WIDTHS = {16: ("asc_f32x4", "asc_f64x2"), 32: ("asc_f32x8", "asc_f64x4"), 64: ("asc_f32x16", "asc_f64x8")}


def _body(f: asc.BuiltKernel) -> str:
    return f.source.split("int default_function(", 1)[1]


@pytest.mark.parametrize("nbytes", sorted(WIDTHS))
@pytest.mark.parametrize("make", [matmul_tiled, matmul_packed], ids=["tiled", "packed"])
def test_register_tiles_use_the_pinned_width(monkeypatch, nbytes: int, make) -> None:
    monkeypatch.setenv(VECTOR_BYTES_ENV, str(nbytes))
    s, args = make()
    f = check(s, args)  # built, run and compared with numpy
    f32 = WIDTHS[nbytes][0]
    assert f"typedef float {f32} __attribute__((vector_size({nbytes})));" in f.source
    assert f"asc_st_{f32}(" in _body(f) and "#pragma omp simd" not in _body(f)
    assert f.not_vectorized == []


@pytest.mark.parametrize("nbytes", sorted(WIDTHS))
def test_float64_and_streaming_softmax_at_every_width(monkeypatch, nbytes: int) -> None:
    monkeypatch.setenv(VECTOR_BYTES_ENV, str(nbytes))
    A, B, C = op("matmul", 8, 16, 5, "float64")
    s = asc.create_schedule(C)
    i, j = C.op.axis
    s[C].reorder(i, "k", j)
    s[C].vectorize(j)
    f = check(s, [A, B, C])
    assert f"asc_st_{WIDTHS[nbytes][1]}(" in _body(f)
    X, out = op("softmax", 64, 128)
    s = asc.create_schedule(out)
    i, j = s[out].op.axis
    s[out].parallel(i)
    _, ji = s[out].split(j, factor=16)  # one cache line per step: streaming needs whole lines
    s[out].vectorize(ji)
    s[out].pragma(ji, "nontemporal", 1)
    for name in ("maxelem", "expsum", "expv"):
        s[name].compute_at(s[out], i)
    s["rsum"].compute_inline()
    f = check(s, [X, out])
    f32 = WIDTHS[nbytes][0]
    assert _body(f).count(f"asc_stream_{f32}(&norm[") == 16 // (nbytes // 4)  # one line = this many vectors
    assert f"& {nbytes - 1}u) == 0" in f.source  # streams only from an address aligned to the vector
