"""Loop partitioning (`autosched.lowering.loop_partition`): a split that does not divide its extent
peels its last tile off, so the other tiles run with constant trip counts (register tiles as named
vector variables) and no guards; results stay exactly those of the numpy reference."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import autosched as asc
from autosched import te
from autosched.lowering import arith
from autosched.lowering.ir import For, IfThen
from autosched.lowering.loop_partition import partition_loops
from autosched.lowering.loop_passes import walk_stmts
from autosched.target import vector
from autosched.te.expr import Binary, walk
from tests.support.sched_helpers import check, matmul_packed


def _register_tile_matmul(m: int, n: int, k: int, mr: int, nr: int, pack: bool = True):
    """The CPU GEMM structure of the seeds: packed B panels of nr columns, an mr x nr register tile."""
    return matmul_packed(m, n, k, mr, nr, pack)


def _has_min_or_guard(stmt) -> bool:
    for node in walk_stmts(stmt):
        if isinstance(node, IfThen):
            return True
        if isinstance(node, For) and any(isinstance(x, Binary) and x.op == "min" for x in walk(node.extent)):
            return True
    return False


def test_ragged_register_tile_peels_the_last_rows_and_keeps_named_registers() -> None:
    """Rows of 50 in tiles of 6: eight whole tiles run as named vector accumulators (6 x 16/lanes) with
    no bound; the peeled ninth tile has two rows (2 x 16/lanes); every element matches numpy. The
    register names follow the host's vector width (AUTOSCHED_VECTOR_BYTES pins it)."""
    s, args = _register_tile_matmul(50, 32, 40, 6, 16)
    f = check(s, args)
    body = f.source.split("int default_function(", 1)[1]
    lanes = vector.lanes("float32")
    assert "i_outer < 8;" in body
    assert f"asc_reg_C_local_{5 * 16 + 16 - lanes} " in body  # the last accumulator of a whole 6x16 tile
    assert f"asc_reg_C_local_{6 * 16} " not in body  # ... and there is none past it
    assert "#pragma GCC unroll" not in body and " ? " not in body  # no variable trip counts left
    main_and_peeled = re.findall(rf"asc_f32x{lanes} asc_reg_C_local_0 = ", body)
    assert len(main_and_peeled) == 2  # the main tile and the peeled one


def test_ragged_rows_and_columns_both_peel() -> None:
    """Tails along both axes of an element-wise op: the main part has no guard, each tail its own."""
    A = te.placeholder((37, 45), "A")
    B = te.compute((37, 45), lambda i, j: te.maximum(A[i, j], 0.0), "B")
    s = asc.create_schedule(B)
    i, j = s[B].op.axis
    io, ii = s[B].split(i, factor=4)
    jo, ji = s[B].split(j, factor=8)
    s[B].reorder(io, jo, ii, ji)
    s[B].unroll(ii)
    s[B].vectorize(ji)
    check(s, [A, B])
    body = asc.lower(s, [A, B]).body
    assert isinstance(body.stmts[0], For) and arith.const_value(body.stmts[0].extent) == 9  # 9 whole row tiles
    main = body.stmts[0].body
    assert isinstance(main.stmts[0], For) and arith.const_value(main.stmts[0].extent) == 5  # 5 whole panels
    assert not _has_min_or_guard(main.stmts[0])


def test_the_pass_alone_and_its_budget(monkeypatch) -> None:
    """Lowered without the pass, the nest has bounds; the pass removes them from the main part, and a
    budget of zero partitions leaves the nest unchanged."""
    import autosched.lowering.loop_nest as lower_mod

    s, args = _register_tile_matmul(50, 32, 40, 6, 16, pack=False)
    monkeypatch.setattr(lower_mod, "partition_loops", lambda stmt: stmt)
    raw = asc.lower(s, args).body
    assert _has_min_or_guard(raw)
    assert partition_loops(raw, max_partitions=0) is not None and _has_min_or_guard(partition_loops(raw, 0))
    parted = partition_loops(raw)
    rows = [x for x in walk_stmts(parted) if isinstance(x, For) and x.loop_name == "i.outer"]
    assert [arith.const_value(x.extent) for x in rows] == [8]  # 8 whole tiles; the 9th is peeled, no loop
    assert not _has_min_or_guard(rows[0])


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(m=st.integers(3, 29), n=st.integers(1, 4), k=st.integers(1, 9), mr=st.integers(2, 8),
       nr_vectors=st.integers(1, 2), pack=st.booleans())
def test_random_ragged_register_tiles_match_numpy(m, n, k, mr, nr_vectors, pack) -> None:
    """Any rows and tile heights, whole and ragged column panels: partitioned kernels equal numpy."""
    nr = 8 * nr_vectors
    s, args = _register_tile_matmul(m, n * 8 + (3 if n % 2 else 0), k, mr, nr, pack)
    check(s, args)
