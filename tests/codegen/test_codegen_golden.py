"""Golden files of the generated C for a few schedules: a change to the code generator (or to lowering)
shows up as a diff. Rewrite them with `AUTOSCHED_UPDATE_GOLDEN=1 pytest tests/codegen`, then review
the diff like any other change.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

import autosched as asc
from tests.support.sched_helpers import NAMED, check

GOLDEN_DIR = Path(__file__).resolve().parent.parent / "golden"
UPDATE = os.environ.get("AUTOSCHED_UPDATE_GOLDEN") == "1"


def _source(name: str) -> str:
    s, args = NAMED[name]()
    return asc.render(s, args)[0].code


@pytest.mark.parametrize("name", sorted(NAMED))
def test_generated_c_matches_golden(name: str) -> None:
    path = GOLDEN_DIR / f"{name}.c"
    src = _source(name)
    if UPDATE:
        GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
        path.write_text(src)
    assert path.exists(), f"no golden file {path}; create it with AUTOSCHED_UPDATE_GOLDEN=1"
    want = path.read_text()
    if src != want:
        import difflib

        diff = "".join(difflib.unified_diff(want.splitlines(True), src.splitlines(True), f"golden/{name}.c",
                                            "generated", n=2))
        pytest.fail(f"generated C differs from golden/{name}.c (AUTOSCHED_UPDATE_GOLDEN=1 rewrites it):\n"
                    f"{diff[:6000]}")


@pytest.mark.parametrize("name", sorted(NAMED))
def test_golden_schedules_are_correct(name: str) -> None:
    s, args = NAMED[name]()
    check(s, args)


def test_golden_files_are_machine_independent() -> None:
    files = sorted(GOLDEN_DIR.glob("*.c"))
    assert {p.stem for p in files} >= set(NAMED)
    for p in files:
        text = p.read_text()
        assert not re.search(r"/(root|home|tmp|usr|work|var)/", text), f"{p.name} holds a machine path"
        assert "\r" not in text


def test_rendering_is_deterministic() -> None:
    """Two renders of freshly built schedules give byte-identical source (no ids or hash order leak)."""
    for name in NAMED:
        assert _source(name) == _source(name)


def test_golden_shapes_of_the_code() -> None:
    """What each golden schedule is for, checked on its text, so a golden rewrite cannot lose it."""
    src = {name: _source(name) for name in NAMED}
    body = {n: s.split("int default_function(", 1)[1] for n, s in src.items()}
    assert "#pragma omp" not in body["matmul_naive"]
    assert "#pragma omp parallel for" in body["matmul_tiled"]
    assert "asc_st_asc_f32x16(" in body["matmul_tiled"]  # the 32-wide column tile as explicit vectors
    assert "float B_global[2048]" in body["matmul_packed"]
    # the 8x32 register tile as 16 vector variables, not a stack array (`codegen/register_tile.py`)
    assert "float C_local" not in body["matmul_packed"] and "asc_reg_C_local_240 = {0};" in body["matmul_packed"]
    assert "#pragma omp simd" not in body["matmul_packed"]  # register tile fully explicit
    assert "float maxelem[1]" in body["softmax_fused"] and "expv" not in body["softmax_fused"]
    assert "asc_stream_asc_f32x16(&norm[" in body["softmax_streaming"]  # the row leaves around the caches
    assert "pad" not in body["conv2d_padded"].replace("padding", "")  # pad inlined into the window reads
    # the tail of 17 = 4*4 + 1 is peeled off (`loop_partition`): 4 whole tiles, then element 16 alone,
    # neither with a bound nor a per-element branch
    assert "i_outer < 4;" in body["split_tail_17_4"] and " ? " not in body["split_tail_17_4"]
    assert "if (" not in body["split_tail_17_4"]
