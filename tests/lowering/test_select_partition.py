"""Partitioning on guarded reads (`autosched.lowering.select_partition`): a loop whose `Select`
conditions are settled over most of its range is split there, so the middle reads plain memory; the
results stay exactly those of the numpy reference."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import autosched as asc
from autosched import te
from autosched.lowering.ir import For, Store
from autosched.lowering.loop_passes import walk_stmts
from autosched.lowering.select_partition import partition_selects
from autosched.te.expr import Select, walk
from tests.support.sched_helpers import check


def _padded(h: int, w: int, pad: int):
    data = te.placeholder((2, h, w), "data")
    out = te.compute((2, h + 2 * pad, w + 2 * pad), lambda c, y, x: te.if_then_else(
        te.all(y >= pad, y < h + pad, x >= pad, x < w + pad), data[c, y - pad, x - pad],
        te.const(0.0, "float32")), "padded")
    return data, out


def _selects(stmt) -> int:
    return sum(isinstance(x, Select) for node in walk_stmts(stmt) if isinstance(node, Store)
               for x in walk(node.value))


def test_padding_row_splits_into_fill_copy_fill() -> None:
    """`x >= 2` fails on the first two columns and `x < w + 2` on the last two: the row loop becomes
    fill, copy, fill; the copy tests nothing that varies along it."""
    data, out = _padded(7, 11, 2)
    s = asc.create_schedule(out)
    f = check(s, [data, out])
    loops = [n for n in walk_stmts(f.lowered.body) if isinstance(n, For) and n.loop_name == "x"]
    extents = sorted(int(n.extent.value) for n in loops)
    # rows inside the padding: fill 2, copy 11, fill 2; rows above and below it: one fill of 15
    assert extents[:3] == [2, 2, 11] and set(extents[3:]) <= {15}
    middle = next(n for n in loops if int(n.extent.value) == 11)
    conds = [x.cond for node in walk_stmts(middle) if isinstance(node, Store) for x in walk(node.value)
             if isinstance(x, Select)]
    assert all(not any(v is middle.var for v in walk(c)) for c in conds)


def test_unsettled_conditions_keep_their_loop() -> None:
    """A condition on a value read from memory is never settled: nothing is split."""
    a = te.placeholder((9,), "a")
    b = te.compute((9,), lambda i: te.if_then_else(a[i] > 0.0, a[i], te.const(0.0, "float32")), "b")
    s = asc.create_schedule(b)
    f = check(s, [a, b])
    assert _selects(f.lowered.body) == 1
    assert _selects(partition_selects(f.lowered.body)) == 1


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(h=st.integers(1, 9), w=st.integers(1, 13), pad=st.integers(1, 3), ry=st.integers(1, 4),
       stride=st.integers(1, 3))
def test_guarded_convolution_matches_reference(h: int, w: int, pad: int, ry: int, stride: int) -> None:
    """A convolution reading its input through a bounds check (no padding stage), at sizes that divide
    nothing: every split of its loops still gives numpy's result."""
    oh, ow = (h + 2 * pad - ry) // stride + 1, (w + 2 * pad - ry) // stride + 1
    if oh < 1 or ow < 1:
        return
    data = te.placeholder((1, 2, h, w), "data")
    kernel = te.placeholder((3, 2, ry, ry), "kernel")
    rc, r1, r2 = te.reduce_axis(2, "rc"), te.reduce_axis(ry, "r1"), te.reduce_axis(ry, "r2")

    def body(n, f, y, x):
        iy, ix = y * stride + r1 - pad, x * stride + r2 - pad
        inside = te.all(iy >= 0, iy < h, ix >= 0, ix < w)
        return te.sum(te.if_then_else(inside, data[n, rc, iy, ix], te.const(0.0, "float32"))
                      * kernel[f, rc, r1, r2], axis=[rc, r1, r2])

    out = te.compute((1, 3, oh, ow), body, "conv")
    check(asc.create_schedule(out), [data, kernel, out])


@pytest.mark.parametrize("w", [5, 16, 37])
def test_padding_stays_correct_under_vectorized_rows(w: int) -> None:
    """The row vectorized: the split pieces are vector loops of their own extents."""
    data, out = _padded(3, w, 1)
    s = asc.create_schedule(out)
    s[out].vectorize(out.op.axis[2])
    check(s, [data, out])
