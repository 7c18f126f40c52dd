"""The cpu sketch space holds no register tile far past the register file
(`cpu_sketch.REGISTER_TILE_SPILL`): such tiles spill on every FMA and took gcc from half a minute to
past its time limit, so a random search spent most of its time compiling them."""

from __future__ import annotations

import numpy as np
import pytest

from autosched import te
from autosched.space.cpu_seeds import accumulator_budget
from autosched.space.cpu_sketch import REGISTER_TILE_SPILL
from autosched.space.registry import make_space
from autosched.target.host_isa import VECTOR_BYTES_ENV
from autosched.target.vector import lanes
from autosched.workload import Workload


def _conv() -> Workload:
    x = te.placeholder((1, 5, 61, 61), name="X")
    wt = te.placeholder((47, 5, 3, 3), name="Wt")
    rc, rr, rs = te.reduce_axis((0, 5), "rc"), te.reduce_axis((0, 3), "rr"), te.reduce_axis((0, 3), "rs")
    y = te.compute((1, 47, 20, 20), lambda n, f, h, w: te.sum(
        x[n, rc, h * 3 + rr, w * 3 + rs] * wt[f, rc, rr, rs], axis=[rc, rr, rs]), name="Y")
    return Workload.from_tensors([x, wt, y], name="conv_s3")


@pytest.mark.parametrize("nbytes", [32, 64])
@pytest.mark.parametrize("make", [_conv, lambda: Workload.create("matmul", 97, 131, 53)], ids=["conv", "matmul"])
def test_sampled_register_tiles_fit_the_limit_and_seeds_survive(monkeypatch, nbytes, make) -> None:
    monkeypatch.setenv(VECTOR_BYTES_ENV, str(nbytes))
    w = make()
    space = make_space(w, "cpu")
    n = lanes("float32")
    limit = REGISTER_TILE_SPILL * accumulator_budget(n)
    (st,) = space._gemm_stages
    tiles = list(st.tile_knobs)
    rng = np.random.default_rng(0)
    rejected = 0
    for _ in range(300):
        c = space.space.sample(rng)
        v = space.space.values(c)
        along = tiles[st.channel] if st.vector_knob and v[st.vector_knob] == "channel" else tiles[-1]
        vectors = -(-v[along][1] // n) * int(np.prod([v[t][1] for t in tiles if t != along]))
        if vectors > limit:
            assert not space.space.valid(c)
        rejected += vectors > limit
    assert rejected > 0  # the rule has something to refuse in these spaces
    assert space.seeds and all(space.space.valid(space.space.index_of(s)) for s in space.seeds)
