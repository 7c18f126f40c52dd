"""The Ray runner on the device (an H200): a small cuda tuning whose builds are Ray CPU tasks and
whose runs go to the GPU actor (`num_gpus=1`), every candidate checked. Skipped without a CUDA
GPU or without Ray (the device image lacks Ray: tools/device-wheels.sh carries it there)."""

from __future__ import annotations

import math

import pytest

import autosched as asc

torch = pytest.importorskip("torch")
pytest.importorskip("ray")
pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU (device machine)")]


def test_ray_runner_tunes_cuda_matmul_on_the_gpu_actor(tmp_path):
    from autosched.measure.ray_runner import RayRunner

    w = asc.Workload.create("matmul", 512, 512, 512)
    with RayRunner(num_cpus=4, init_kwargs={"num_gpus": 1}, cache_dir=tmp_path / "cache") as runner:
        res = asc.tune(w, "cuda", 8, searcher="random", cost_model=None, db=str(tmp_path / "db.sqlite"),
                       runner=runner, batch_size=4, progress=False, seed=1)
        gpus = runner.devices(("gpu",))
    assert res.trials == 8
    assert math.isfinite(res.best_cost) and res.best_gflops > 100, res.errors
    assert len(gpus) == 1 and "H200" in str(gpus[0]), gpus
