"""The public options object, the shared wiring and its rule for reused records, and the protocols."""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import pytest

import autosched as asc
from autosched.compile.types import MeasureInput
from autosched.cost_model.random_model import RandomModel
from autosched.cost_model.xgb_model import XGBModel
from autosched.measure.types import MeasureResult
from autosched.space.registry import make_space
from autosched.target.key import Target
from autosched.tuning import api
from autosched.tuning.options import TuneOptions
from autosched.tuning.protocols import CostModel, Database, Measurer, SearchSpace
from autosched.tuning.tuner import Prior, TaskTuner
from autosched.workload import Workload


def test_tune_options_is_public_and_keeps_positional_order():
    assert asc.TuneOptions is TuneOptions
    o = TuneOptions(32, 8, "random", None, 3)
    assert (o.trials, o.batch_size, o.searcher, o.cost_model, o.seed) == (32, 8, "random", None, 3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.trials = 4  # type: ignore[misc]


def test_resolve_applies_options_then_trials_then_overrides():
    base = TuneOptions(trials=50, searcher="random", seed=9)
    o = TuneOptions.resolve(base, {"seed": 1, "progress": False}, "tune", trials=12)
    assert (o.trials, o.searcher, o.seed, o.progress) == (12, "random", 1, False)
    assert TuneOptions.resolve(base, {}, "tune", trials=None).trials == 50
    assert TuneOptions.resolve(None, {}, "tune", trials=None) == TuneOptions()


def test_unknown_keywords_raise_type_error_naming_them():
    with pytest.raises(TypeError, match="bogus, zzz"):
        asc.tune("matmul", "cpu", 4, zzz=1, bogus=2)
    with pytest.raises(TypeError, match="wrong"):
        asc.tune_many([Workload.create("matmul", 8, 8, 8)], "cpu", 4, wrong=True)
    with pytest.raises(TypeError, match="options must be a TuneOptions"):
        asc.tune("matmul", "cpu", 4, options={"seed": 1})
    with pytest.raises(ValueError):
        asc.tune(Workload.create("matmul", 8, 8, 8), "cpu", options=TuneOptions(), batch_size=0)


def test_tune_many_refuses_a_template():
    with pytest.raises(TypeError, match="template"):
        asc.tune_many([Workload.create("matmul", 8, 8, 8)], "cpu", 4, template=lambda *a: None)


def _rec(h: str, median: float | None, error_code: int = 0, origin: str = ""):
    return SimpleNamespace(steps_hash=h, median=median, error_code=error_code, origin=origin, ok=error_code == 0)


class _FakeDB:
    def __init__(self, records):
        self._records = records

    def records(self, workload_key=None, target_key=None, ok_only=False):
        return list(self._records)


def test_known_schedules_skip_non_measurements_imports_and_rule_out_failed_checks():
    db = _FakeDB([_rec("a", 2.0), _rec("a", 1.0), _rec("a", 3.0), _rec("b", 0.0), _rec("c", None),
                  _rec("d", math.inf), _rec("e", 5.0), _rec("f", 4.0), _rec("f", 1.0),
                  _rec("g", 1e-9, origin="import"), _rec("h", 1.0), _rec("h", None, error_code=6),
                  _rec("i", None, error_code=2)])
    known = api.known_schedules(db, "w", "t")
    # b, c, d: no measurement; g: imported, measured again here; i: a compile error rules nothing out
    assert set(known) == {"a", "e", "f", "h"}
    assert known["a"] == Prior((2.0, 1.0, 3.0)) and known["f"] == Prior((4.0, 1.0))
    assert known["h"].disqualified  # a wrong answer: never reused, never served


def test_tune_and_tune_many_reuse_the_same_records(tmp_path, monkeypatch):
    """Both wire their tasks through Session.task, so both start from known_schedules."""
    url = f"sqlite:///{tmp_path}/k.db"
    w = Workload.create("matmul", 16, 16, 16)
    asc.tune(w, "cpu", 6, db=url, batch_size=6, progress=False, cost_model=None, searcher="random", verify=0)
    seen = []
    real = api.known_schedules
    monkeypatch.setattr(api, "known_schedules", lambda *a: seen.append(real(*a)) or seen[-1])
    asc.tune(w, "cpu", 6, db=url, batch_size=6, progress=False, cost_model=None, searcher="random", verify=0)
    asc.tune_many([w], "cpu", 6, db=url, batch_size=6, progress=False, cost_model=None, searcher="random",
                  verify=0)
    # both asked known_schedules (the second run's new records are known to tune_many too)
    assert len(seen) == 2 and seen[0] and set(seen[0]) <= set(seen[1])


def test_collaborators_satisfy_the_protocols(tmp_path):
    w = Workload.create("matmul", 16, 16, 16)
    assert isinstance(make_space(w, "cpu"), SearchSpace)
    assert isinstance(XGBModel(seed=0), CostModel) and isinstance(RandomModel(seed=0), CostModel)
    assert isinstance(api.open_db(f"sqlite:///{tmp_path}/p.db"), Database)

    class _M:
        def measure(self, inputs: list[MeasureInput]) -> list[MeasureResult]:
            return []

    assert isinstance(_M(), Measurer)
    task = TaskTuner(w, Target.parse("cpu"), _M(), TuneOptions(1, 1, "random", None))
    assert task.config_space is task.space.space
