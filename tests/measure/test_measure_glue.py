"""measure_batch / ProgramMeasurer glue, and the default DAG reference end to end."""

from __future__ import annotations

import pytest

from autosched.compile.builder import LocalBuilder
from autosched.compile.types import ErrorCode, MeasureInput
from autosched.measure.batch import ProgramMeasurer, measure_batch
from autosched.measure.config import RunnerConfig
from autosched.measure.local_runner import LocalRunner
from autosched.measure.reference import DagReferenceProvider, ReferenceCache
from tests.support.measure_kernels import AddReference, kernel, measure_input

FAST = RunnerConfig(number=2, repeat=3, min_repeat_ms=2, timeout=3.0)


class PlantedBuilder:
    """A Builder whose 'rendering' looks the kernel kind up in the steps JSON (a planted kernel)."""

    def __init__(self, builder: LocalBuilder) -> None:
        self.inner = builder

    def build(self, inputs):
        import json

        return self.inner.build_sources([kernel(json.loads(i.steps_json)[0]["tag"], i.workload_key)
                                         for i in inputs])


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    with LocalBuilder(2, 30, tmp_path_factory.mktemp("k")) as b:
        yield PlantedBuilder(b)


@pytest.mark.slow
def test_program_measurer_tracks_best_errors_and_calls_back(planted) -> None:
    seen = []
    with LocalRunner(FAST, AddReference()) as runner:
        m = ProgramMeasurer(planted, runner, [lambda inps, res: seen.append((list(inps), list(res)))])
        batch = [measure_input("good", "wA"), measure_input("wrong", "wA"), measure_input("good_omp", "wB")]
        results = m.measure(batch)
        assert [r.error_code for r in results] == [ErrorCode.NO_ERROR, ErrorCode.WRONG_ANSWER, ErrorCode.NO_ERROR]
        assert len(seen) == 1 and seen[0][0] == batch and seen[0][1] == results
        assert set(m.best) == {"wA", "wB"} and m.best["wA"].input == batch[0]
        assert m.error_counts[ErrorCode.WRONG_ANSWER] == 1 and m.n_measured == 3
        assert measure_batch([], planted, runner) == []


def test_callback_errors_propagate(planted) -> None:
    def boom(inps, res):
        raise RuntimeError("database is down")

    with LocalRunner(FAST, AddReference()) as runner:
        m = ProgramMeasurer(planted, runner, [boom])
        with pytest.raises(RuntimeError, match="database is down"):
            m.measure([measure_input("good", "wC")])


def _matmul_input(steps: str) -> MeasureInput:
    workload = pytest.importorskip("autosched.workload")
    pytest.importorskip("autosched.compile.instantiate")
    w = workload.Workload.create("matmul", 32, 32, 48)
    return MeasureInput(w.key, w.to_json(), "cpu", steps)


@pytest.mark.slow
def test_default_reference_from_the_dag_end_to_end(tmp_path) -> None:
    """Integration with the lowering stack (skipped while it is not importable)."""
    good, bad = _matmul_input("[]"), _matmul_input('[{"no": "kind"}]')
    cache = ReferenceCache(DagReferenceProvider(0), 0)
    with LocalBuilder(2, 30, tmp_path) as builder:
        builds = builder.build([good, bad])
    key, ref = cache.get(good, builds[0].args)
    assert ref.reduce_len == 48 and set(ref.expected) <= {a.name for a in builds[0].args}
    with LocalRunner(FAST) as runner:
        res = runner.run([good, bad], builds)
    assert res[0].ok, res[0].error_msg
    assert res[1].error_code == ErrorCode.INSTANTIATION_ERROR
