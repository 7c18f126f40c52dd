"""Streaming (non-temporal) stores: the `nontemporal` pragma on a vectorized loop that stores to an
output. The kernels must compute the same values whatever the output's alignment (the streaming form
needs 64-byte aligned lines; anything else takes the plain store), fence before the thread team ends,
and the pragma must be refused on a loop that is not vectorized.
"""

from __future__ import annotations

import numpy as np
import pytest

import autosched as asc
from autosched.cost_model.features import FEATURE_NAMES, extract_features
from autosched.space.cpu_sketch import SketchSpace
from autosched.workload import Workload
from tests.support.sched_helpers import check, op, softmax_streaming


def _body(s: asc.Schedule, args) -> str:
    return asc.render(s, args)[0].code.split("int default_function(", 1)[1]


def test_streaming_softmax_matches_reference_and_fences_in_the_parallel_loop() -> None:
    s, args = softmax_streaming()
    check(s, args)
    body = _body(s, args)
    assert body.count("asc_stream_asc_f32x16(&norm[") == 1  # one whole vector per step of the outer column loop
    par = body.index("#pragma omp parallel for")
    fence = body.index("asc_sfence();")
    assert par < fence < body.rindex("asc_sfence();")  # once per row in the team, once before returning
    assert "asc_st_asc_f32x16(&norm" not in body


@pytest.mark.parametrize("offset", [0, 1, 3])
def test_streaming_stores_on_unaligned_outputs(offset: int) -> None:
    """An output that does not start on a 64-byte line (a view into a larger array) still gets every value."""
    s, args = softmax_streaming(M=5, N=32)
    f = asc.build(s, args)
    x = np.random.default_rng(0).standard_normal((5, 32)).astype("float32")
    backing = np.full(5 * 32 + 16 + offset, np.nan, dtype="float32")
    start = (-backing.ctypes.data // 4) % 16 + offset  # elements to the next line, then `offset` more
    out = backing[start:start + 5 * 32].reshape(5, 32)
    f(x, out)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
    assert np.isnan(backing[:start]).all() and np.isnan(backing[start + 5 * 32:]).all()  # nothing outside


def test_streaming_float64_layernorm() -> None:
    X, gamma, beta, out = op("layernorm", 6, 24, dtype="float64")
    s = asc.create_schedule(out)
    i, j = s[out].op.axis
    s[out].parallel(i)
    _, ji = s[out].split(j, factor=8)
    s[out].vectorize(ji)
    s[out].pragma(ji, "nontemporal", 1)
    for name in ("mean", "var"):
        s[name].compute_at(s[out], i)
    check(s, [X, gamma, beta, out])
    body = _body(s, [X, gamma, beta, out])
    assert body.count("asc_stream_asc_f64x8(&out[") == 1
    assert "sqrt(" in body  # the row's rsqrt: one scalar broadcast into the explicit vectors


def test_nontemporal_on_a_loop_that_is_not_vectorized_is_refused() -> None:
    X, out = op("softmax", 4, 32)
    s = asc.create_schedule(out)
    i, j = s[out].op.axis
    s[out].pragma(j, "nontemporal", 1)
    with pytest.raises(asc.ScheduleError, match=r"nontemporal needs a vectorized loop"):
        asc.lower(s, [X, out])


def test_streaming_is_a_feature_and_a_knob() -> None:
    s, args = softmax_streaming()
    f_stream = extract_features(asc.lower(s, args))
    col = FEATURE_NAMES.index("streamed_store_fraction")
    assert f_stream[col] > 0
    knobs = {k.name for k in SketchSpace(Workload.create("softmax", 64, 256).dag).space.knobs}
    assert "norm.stream" in knobs
    # gelu's row is a tanh of each element: an `omp simd` loop, which has no streaming form, so no knob
    assert not any(k.name.endswith(".stream") for k in SketchSpace(Workload.create("gelu", 64, 256).dag).space.knobs)


def test_streaming_is_only_offered_with_vectors_of_whole_lines() -> None:
    """`stream` does nothing under a vector narrower than a line: those configs are held at False, so the
    space holds no two configs of one schedule."""
    from autosched.target.vector import line_lanes

    cs = SketchSpace(Workload.create("softmax", 64, 256).dag).space
    lanes = line_lanes("float32")
    assert any(v % lanes for v in cs.knob("norm.vector").choices)
    for config in cs.iter_configs():
        v = cs.values(config)
        if v["norm.stream"] and v["norm.vector"] % lanes:
            assert not cs.valid(config), v
