"""Candidates made by the feature workers are the ones the tuner would make itself.

Real spawned worker processes; the checks compare against serial lowering config by config, and
cover the ways the workers must be refused (an expert's space with no rebuild recipe, a recipe
that rebuilds another space, one that does not rebuild at all, a bad worker count).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from autosched.space.registry import make_space
from autosched.target.key import Target
from autosched.tuning import feature_pool
from autosched.tuning.candidates import CandidateCache
from autosched.tuning.tuner import TaskTuner, TuneOptions
from autosched.workload import Workload

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]  # worker pools: each test runs guided batches


@pytest.fixture
def two_workers(monkeypatch):
    monkeypatch.setenv("AUTOSCHED_FEATURE_WORKERS", "2")
    monkeypatch.setattr(feature_pool, "_disabled_reason", "")
    yield
    feature_pool.shutdown()


def _configs(space, n: int, seed: int = 0) -> list[tuple[int, ...]]:
    rng = np.random.default_rng(seed)
    return list(dict.fromkeys(space.space.sample(rng) for _ in range(n)))


@pytest.mark.parametrize("op,args,kind", [("matmul", (64, 48, 32), "cpu"), ("softmax", (64, 128), "cpu"),
                                          ("matmul", (128, 128, 128), "cuda")])
def test_workers_make_the_same_candidates_as_the_caller(two_workers, op, args, kind) -> None:
    w = Workload.create(op, *args)
    space = make_space(w, kind)
    configs = _configs(space, 40)
    parallel = CandidateCache(w, space, kind)
    feats = parallel.features(configs)
    assert parallel.made_by_workers == len(configs)
    serial = CandidateCache(w, make_space(w, kind), kind, parallel=False)
    assert np.array_equal(feats, serial.features(configs))
    for c in configs:
        a, b = parallel.get(c), serial.get(c)
        assert (a.steps_json, a.steps_hash, a.error) == (b.steps_json, b.steps_hash, b.error)


def test_small_batches_and_cached_configs_stay_in_the_caller(two_workers) -> None:
    w = Workload.create("matmul", 32, 32, 32)
    space = make_space(w, "cpu")
    cache = CandidateCache(w, space, "cpu")
    few = _configs(space, feature_pool.MIN_PARALLEL - 1)
    cache.features(few)
    assert cache.made_by_workers == 0
    cache.features(few + _configs(space, 40, seed=1))
    assert 0 < cache.made_by_workers <= 40  # only the configs not made before went out


def test_a_space_without_a_rebuild_recipe_is_made_serially(two_workers) -> None:
    w = Workload.create("matmul", 32, 32, 32)
    space = make_space(w, "cpu")
    del space.rebuild_spec  # as an expert's own template space has none
    cache = CandidateCache(w, space, "cpu")
    cache.features(_configs(space, 40))
    assert cache.made_by_workers == 0


def test_a_recipe_for_another_space_is_caught_by_the_check(two_workers, caplog) -> None:
    w = Workload.create("matmul", 64, 64, 64)
    space = make_space(w, "cpu")
    other = Workload.create("matmul", 64, 64, 64, "float64")  # same knobs, other bytes: other features
    space.rebuild_spec = (other.to_json(), "cpu")
    cache = CandidateCache(w, space, "cpu")
    configs = _configs(space, 40)
    feats = cache.features(configs)
    assert cache.made_by_workers == 0
    assert "differs" in caplog.text
    serial = CandidateCache(w, make_space(w, "cpu"), "cpu", parallel=False)
    assert np.array_equal(feats, serial.features(configs))


def test_a_recipe_that_does_not_rebuild_falls_back_with_the_reason(two_workers, caplog) -> None:
    w = Workload.create("matmul", 32, 32, 32)
    space = make_space(w, "cpu")
    spec = json.loads(w.to_json())
    spec["dag"] = {"format": "no-such-format"}
    space.rebuild_spec = (json.dumps(spec), "cpu")
    cache = CandidateCache(w, space, "cpu")
    configs = _configs(space, 40)
    cache.features(configs)
    assert cache.made_by_workers == 0
    assert "made serially" in caplog.text
    assert all(c in cache._cache for c in configs)


def test_a_bad_worker_count_is_named(monkeypatch) -> None:
    monkeypatch.setenv("AUTOSCHED_FEATURE_WORKERS", "many")
    with pytest.raises(ValueError, match="AUTOSCHED_FEATURE_WORKERS"):
        feature_pool.worker_count()


class _SyntheticMeasurer:
    """Costs from the schedule's steps alone: the same schedule always costs the same."""

    def measure(self, inputs):
        from autosched.compile.types import ErrorCode
        from autosched.measure.types import MeasureResult

        return [MeasureResult((1e-4 * (1 + int(hashlib.sha1(i.steps_json.encode()).hexdigest()[:6], 16) % 997 / 100),),
                              ErrorCode.NO_ERROR) for i in inputs]


# smaller than the defaults (128 chains x 30 steps; 256 x 4 generations) to keep the test short
SMALL_SEARCH = {"annealing": {"model_chains": 48, "model_steps": 6},
                "genetic": {"model_population": 64, "model_generations": 2}}


def _guided_run(searcher: str) -> tuple[list[tuple[int, float]], int]:
    w = Workload.create("matmul", 64, 64, 64)
    t = TaskTuner(w, Target.parse("cpu"), _SyntheticMeasurer(),
                  TuneOptions(32, 16, searcher, "xgb", 3, searcher_options=SMALL_SEARCH[searcher]))
    while not t.done:
        t.step()
    return t.curve, t.cands.made_by_workers


@pytest.mark.parametrize("searcher", ["annealing", "genetic"])
def test_a_guided_run_is_the_same_with_and_without_workers(monkeypatch, searcher) -> None:
    monkeypatch.setenv("AUTOSCHED_FEATURE_WORKERS", "1")
    serial, none = _guided_run(searcher)
    monkeypatch.setenv("AUTOSCHED_FEATURE_WORKERS", "2")
    monkeypatch.setattr(feature_pool, "_disabled_reason", "")
    try:
        parallel, made = _guided_run(searcher)
    finally:
        feature_pool.shutdown()
    assert none == 0 and made > 0
    assert len(serial) == 32 and all(math.isfinite(g) for _, g in serial)
    assert parallel == serial


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _pool_pids(pool) -> list[int]:
    return sorted({pool.submit(os.getpid).result() for _ in range(16)})


def test_shutdown_stops_the_workers_now(two_workers) -> None:
    """An idle pool used to be left to wind down by itself; a process exiting right after left
    its workers (about 170 MB each) running."""
    pool = feature_pool._get_pool()
    pids = _pool_pids(pool)
    assert pids and all(_alive(p) for p in pids)
    feature_pool.shutdown()
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in pids if _alive(p)]


def test_workers_die_with_the_process_that_made_them(tmp_path) -> None:
    """SIGKILL the pool's owner (no atexit, no shutdown): the workers go too (parent-death signal)."""
    script = ("import os, sys, time\n"
              "from autosched.tuning import feature_pool\n"
              "pool = feature_pool._get_pool()\n"
              "pids = {pool.submit(os.getpid).result() for _ in range(16)}\n"
              "print(' '.join(map(str, sorted(pids))), flush=True)\n"
              "time.sleep(300)\n")
    env = {**os.environ, "AUTOSCHED_FEATURE_WORKERS": "2"}
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env,
                            cwd=Path(__file__).resolve().parents[2])
    try:
        pids = [int(p) for p in proc.stdout.readline().split()]
        assert pids and all(_alive(p) for p in pids)
    finally:
        proc.kill()
        proc.wait(timeout=10)
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [p for p in pids if _alive(p)]
    for p in left:
        os.kill(p, signal.SIGKILL)
    assert left == [], "feature workers outlived the process that made them"
