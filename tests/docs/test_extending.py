"""Each walk-through of docs/extending.md, done exactly as the page says.

If one of these fails, the page is wrong (or the mechanism it describes changed): fix both together.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np
import pytest

import autosched as asc
from autosched import te
from autosched.codegen import render as render_mod
from autosched.codegen.c import C_DIALECT, render_c
from autosched.lowering import targets as lowering_targets
from autosched.lowering.loop_nest import lower_state
from autosched.search import registry as search_registry
from autosched.search.base import Searcher
from autosched.space import registry as space_registry
from autosched.space.cpu_sketch import SketchSpace
from autosched.space.knobs import Config
from autosched.target import key as target_key
from autosched.workload import Workload, registered_workloads, workload


@pytest.fixture(autouse=True)
def _serial_features(monkeypatch):
    # the page's own advice for a change that lives outside the package: propose in this process
    monkeypatch.setenv("AUTOSCHED_FEATURE_WORKERS", "1")
    monkeypatch.setenv("AUTOSCHED_QUIET", "1")


# ---- 1. an op in the op library ---------------------------------------------------------------------
@workload("docs_scaled_add")
def scaled_add(n: int, m: int, alpha: float = 2.0, dtype: str = "float32") -> list:
    """out = alpha * X + Y over [n, m]."""
    X = te.placeholder((n, m), "X", dtype)
    Y = te.placeholder((n, m), "Y", dtype)
    out = te.compute((n, m), lambda i, j: X[i, j] * alpha + Y[i, j], "out")
    return [X, Y, out]


def test_walkthrough_add_an_op(tmp_path):
    db = str(tmp_path / "tuning.db")
    w = Workload.create("docs_scaled_add", 64, 256)
    assert "docs_scaled_add" in registered_workloads()
    assert w.key == Workload.create("docs_scaled_add", 64, 256, alpha=2.0).key  # defaults are part of the key

    r = asc.tune(w, "cpu", trials=4, searcher="random", cost_model=None, db=db, progress=False)
    assert r.best_gflops > 0 and r.best_verified  # three measurements of the best: served as verified

    f = asc.apply_best(w, db=db)
    x = np.random.rand(64, 256).astype("float32")
    y = np.random.rand(64, 256).astype("float32")
    out = np.empty_like(x)
    f(x, y, out)
    np.testing.assert_allclose(out, 2.0 * x + y, rtol=1e-6)


# ---- 2. a searcher ----------------------------------------------------------------------------------
class FirstFreshSearcher(Searcher):
    """Proposes the lowest-numbered configs not yet measured (a toy, to show the interface)."""

    name: ClassVar[str] = "first_fresh"
    OPTIONS: ClassVar[dict[str, tuple[Any, str]]] = {
        "stride": (1, "step between proposed config indices"),
    }

    @classmethod
    def _check_options(cls, opts: dict[str, Any]) -> None:
        super()._check_options(opts)
        cls._require(opts["stride"] >= 1, "stride", "must be >= 1")

    def _setup(self) -> None:
        self._next = 0

    def _propose(self, n: int) -> list[Config]:
        out: list[Config] = []
        while len(out) < n and self._next < self.space.size:
            out.append(self.space.config_at(self._next))
            self._next += self.options["stride"]
        return out  # the base class drops measured/invalid ones and tops the batch up at random


@pytest.mark.slow
def test_walkthrough_add_a_searcher(tmp_path, monkeypatch):
    monkeypatch.setitem(search_registry.SEARCHERS, FirstFreshSearcher.name, FirstFreshSearcher)
    assert "first_fresh" in search_registry.available()
    with pytest.raises(ValueError, match="stride"):
        search_registry.make_searcher("first_fresh", asc_space(), options={"stride": 0})

    w = Workload.create("matmul", 64, 64, 64)
    r = asc.tune(w, "cpu", trials=4, searcher="first_fresh", cost_model=None, db=str(tmp_path / "t.db"),
                 progress=False, verify=0, searcher_options={"stride": 3})
    assert r.best_gflops > 0


def asc_space():
    return space_registry.make_space(Workload.create("matmul", 64, 64, 64), "cpu").space


# ---- 3. a target renderer row -----------------------------------------------------------------------
C_COMMENTED = dataclasses.replace(C_DIALECT, prelude="/* rendered for target c_commented */\n" + C_DIALECT.prelude)


def _c_commented(s, args, name):
    f = lower_state(s.state, list(args), "cpu", name)
    return render_c(f, dialect=C_COMMENTED), f


def test_walkthrough_add_a_renderer_row(monkeypatch):
    monkeypatch.setattr(target_key, "TARGET_KINDS", (*target_key.TARGET_KINDS, "c_commented"))
    monkeypatch.setitem(render_mod.RENDERERS, "c_commented", _c_commented)
    monkeypatch.setitem(lowering_targets.LOWERERS, "c_commented", lowering_targets.LOWERERS["cpu"])

    A = te.placeholder((16, 16), "A")
    B = te.compute((16, 16), lambda i, j: A[i, j] + 1.0, "B")
    s = asc.create_schedule(B)
    src, func = asc.render(s, [A, B], target="c_commented")
    assert src.code.startswith("/* rendered for target c_commented */")
    assert src.language == "c"
    assert "B" in asc.lower(s, [A, B], target="c_commented").show()
    plain, _ = asc.render(s, [A, B], target="cpu")
    assert src.code.split("\n", 1)[1] == plain.code


# ---- 4. a search-space rule -------------------------------------------------------------------------
class UnrollElementwiseSpace(SketchSpace):
    """The cpu sketch rules plus one: an element-wise output may unroll its parallel loop's body."""

    def _elementwise_output(self, t) -> None:
        super()._elementwise_output(t)  # its knobs and action come first
        knob = self._knob(f"{t.name}.unroll", (0, 16, 64), "unroll")

        def act(s, v: dict) -> None:
            _, outer = s._anchor  # the parallel loop the rule before left for producers
            if v[knob]:
                s[t.name].pragma(outer, "auto_unroll_max_step", v[knob])

        self.plan.actions.append(act)


@pytest.mark.slow
def test_walkthrough_add_a_space_rule(tmp_path, monkeypatch):
    monkeypatch.setitem(space_registry.SPACES, "cpu", lambda w: UnrollElementwiseSpace(w.dag, "cpu"))
    w = Workload.create("gelu", 64, 256)
    space = space_registry.make_space(w, "cpu")
    names = [k.name for k in space.space.knobs]
    assert any(n.endswith(".unroll") for n in names)

    idx = names.index(next(n for n in names if n.endswith(".unroll")))
    cfg = next(c for c in (space.space.config_at(i) for i in range(space.space.size)) if c[idx] == 2)
    steps = space.apply(cfg).to_json()
    assert "auto_unroll_max_step" in steps and "64" in steps

    r = asc.tune(w, "cpu", trials=4, searcher="random", cost_model=None, db=str(tmp_path / "t.db"),
                 progress=False, verify=0)
    assert r.best_gflops > 0
