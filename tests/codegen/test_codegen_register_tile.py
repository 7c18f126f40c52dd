"""A register tile (a local array used only as whole vectors at constant offsets) is written as one
vector variable per vector (`autosched.codegen.register_tile`); anything else keeps its array."""

from __future__ import annotations

import pytest

from autosched.codegen.register_tile import promote
from tests.support.sched_helpers import check, matmul_packed

TILE = [
    "    float C_local[32] __attribute__((aligned(64)));",
    "    asc_st_asc_f32x16(&C_local[0], ((asc_f32x16){0} + (0.0f)));",
    "    asc_st_asc_f32x16(&C_local[16], ((asc_f32x16){0} + (0.0f)));",
    "    for (int32_t k = 0; k < 64; ++k) {",
    "      asc_st_asc_f32x16(&C_local[0], (asc_ld_asc_f32x16(&C_local[0]) + (A[k] * asc_ld_asc_f32x16(&B[k * 32]))));",
    "      asc_st_asc_f32x16(&C_local[16], (asc_ld_asc_f32x16(&C_local[16]) + (A[k] * asc_ld_asc_f32x16(&B[k]))));",
    "    }",
    "    asc_st_asc_f32x16(&C[0], asc_ld_asc_f32x16(&C_local[0]));",
    "    asc_st_asc_f32x16(&C[16], asc_ld_asc_f32x16(&C_local[16]));",
]


def test_a_register_tile_becomes_one_variable_per_vector() -> None:
    lines = list(TILE)
    assert promote(lines, 0, "C_local", 32)
    assert len(lines) == len(TILE)  # line numbers (the vectorization report's ranges) stay valid
    assert lines[0] == "    asc_f32x16 asc_reg_C_local_0 = {0}, asc_reg_C_local_16 = {0};"
    assert lines[4] == ("      asc_reg_C_local_0 = ((asc_reg_C_local_0 + (A[k] * "
                        "asc_ld_asc_f32x16(&B[k * 32]))));")
    assert lines[7] == "    asc_st_asc_f32x16(&C[0], asc_reg_C_local_0);"
    assert not any("C_local[" in x for x in lines)


@pytest.mark.parametrize("line", [
    "    x = C_local[3];",  # a scalar access
    "    asc_st_asc_f32x16(&C_local[(i * 16)], v);",  # a variable offset
    "    asc_st_asc_f32x16(&C_local[8], v);",  # not on a vector boundary
    "    asc_st_asc_f32x16(&C_local[32], v);",  # past the end
    "    f(asc_st_asc_f32x16(&C_local[0], v));",  # a store inside an expression
    "    asc_st_asc_f64x8(&C_local[0], w);",  # a second vector type
    "    g(C_local);",  # the address escapes
])
def test_any_other_use_keeps_the_array_unchanged(line: str) -> None:
    lines = [*TILE, line]
    assert not promote(lines, 0, "C_local", 32)
    assert lines == [*TILE, line]


def test_a_similar_name_is_not_a_use() -> None:
    lines = [*TILE, "    C_local2[3] = 1.0f;"]
    assert promote(lines, 0, "C_local", 32)
    assert lines[-1] == "    C_local2[3] = 1.0f;"


@pytest.mark.parametrize("nbytes", [16, 32, 64])
def test_a_promoted_tile_runs_correctly_at_every_vector_width(monkeypatch, nbytes: int) -> None:
    monkeypatch.setenv("AUTOSCHED_VECTOR_BYTES", str(nbytes))
    s, args = matmul_packed()
    f = check(s, args)  # built, run and compared with numpy
    assert "asc_reg_C_local_0" in f.source and "float C_local" not in f.source
