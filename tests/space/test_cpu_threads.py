"""Every cpu sketch space has a `parallel` knob (`autosched.space.cpu_threads`): tiny work defaults to
one thread, larger work to all; either choice builds a correct kernel, and the serial one forks none."""

from __future__ import annotations

import numpy as np
import pytest

import autosched as asc
from autosched import te
from autosched.space.cpu_threads import PARALLEL_KNOB, SERIAL_ITERATIONS, iterations
from autosched.space.registry import make_space
from autosched.workload import Workload


def _softmax(rows: int, cols: int) -> Workload:
    x = te.placeholder((rows, cols), name="X")
    k = te.reduce_axis((0, cols), name="k")
    mx = te.compute((rows,), lambda i: te.max(x[i, k], axis=k), name="mx")
    e = te.compute((rows, cols), lambda i, j: te.exp(x[i, j] - mx[i]), name="e")
    k2 = te.reduce_axis((0, cols), name="k2")
    s = te.compute((rows,), lambda i: te.sum(e[i, k2], axis=k2), name="s")
    y = te.compute((rows, cols), lambda i, j: e[i, j] / s[i], name="y")
    return Workload.from_tensors([x, y], name="softmax_rows")


@pytest.mark.parametrize("rows,cols,serial_first", [(17, 31, True), (1031, 517, False)])
def test_the_default_follows_the_work(rows, cols, serial_first) -> None:
    w = _softmax(rows, cols)
    assert (iterations(w.dag) < SERIAL_ITERATIONS) == serial_first
    knob = {k.name: k for k in make_space(w, "cpu").space.knobs}[PARALLEL_KNOB]
    assert knob.choices[0] is (not serial_first)
    assert set(knob.choices) == {True, False}


@pytest.mark.parametrize("parallel", [True, False])
def test_either_choice_is_correct_and_serial_forks_no_threads(parallel) -> None:
    w = _softmax(17, 31)
    space = make_space(w, "cpu")
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(40):
        cfg = space.space.sample(rng)
        values = dict(space.space.values(cfg))
        values[PARALLEL_KNOB] = parallel
        try:
            f = asc.build(space.apply(space.space.index_of(values)), [w.dag[a] for a in w.args_order])
        except ValueError:
            continue  # a refused placement: the space's own rule, not this test's
        assert ("omp parallel" in f.source) is parallel
        x = w.dag.random_inputs(0)
        out = np.zeros((17, 31), np.float32)
        f(x["X"], out)
        np.testing.assert_allclose(out, w.dag.evaluate(x)["y"], rtol=1e-5, atol=1e-6)
        checked += 1
        if checked == 3:
            break
    assert checked == 3
