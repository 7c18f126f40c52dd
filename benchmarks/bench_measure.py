"""Measurement throughput: candidates per second through build + run.

A batch of distinct planted C kernels (64x64x64 float32 matmuls: every loop order x j-tile x
unroll, so each is a real compile and a real, checked run) goes through
  * LocalBuilder + LocalRunner (`measure_batch`), with a cold and a warm artifact cache;
  * RayRunner on an embedded cluster (`ray.init()` here);
  * RayRunner on a two-node Ray cluster on loopback (`ray start --head` + `ray start --address`).
Cluster start-up is reported apart from the throughput. Writes benchmarks/results/bench_measure.{json,md}.

    .venv/bin/python benchmarks/bench_measure.py [--n 32] [--skip-ray]
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: `tests.support.loopback_cluster` from this checkout
    sys.path.insert(0, str(ROOT))

from autosched.codegen.source import ArgSpec, KernelSource  # noqa: E402
from autosched.compile.builder import LocalBuilder  # noqa: E402
from autosched.compile.types import MeasureInput  # noqa: E402
from autosched.measure.batch import measure_batch  # noqa: E402
from autosched.measure.config import RunnerConfig  # noqa: E402
from autosched.measure.local_runner import LocalRunner  # noqa: E402
from autosched.target.host import cpu_model  # noqa: E402

M = N = K = 64
ARGS = (ArgSpec("A", (M, K), "float32", False), ArgSpec("B", (K, N), "float32", False),
        ArgSpec("C", (M, N), "float32", True))
LOOPS = {"i": f"for (int i = 0; i < {M}; ++i)", "j": "for (int j = jo; j < jo + JT; ++j)",
         "k": f"for (int k = 0; k < {K}; ++k)"}


def matmul_kernel(order: str, jt: int, unroll: int) -> KernelSource:
    loops = [LOOPS[c] for c in order]
    if unroll > 1:
        loops[-1] = f"#pragma GCC unroll {unroll}\n      " + loops[-1]
    body = "\n    ".join(loops) + f"\n        C[i * {N} + j] += A[i * {K} + k] * B[k * {N} + j];"
    code = (f"#define JT {jt}\n"
            "void mm(const float* restrict A, const float* restrict B, float* restrict C) {\n"
            f"  for (int x = 0; x < {M * N}; ++x) C[x] = 0.0f;\n"
            f"  for (int jo = 0; jo < {N}; jo += JT) {{\n    {body}\n  }}\n}}\n")
    return KernelSource("c", code, "mm", ARGS)


def kernels(n: int) -> list[KernelSource]:
    variants = itertools.product(["ikj", "ijk", "kij", "jik", "jki", "kji"], [8, 16, 32, 64], [1, 4])
    return [matmul_kernel(*v) for v in itertools.islice(variants, n)]


class MatmulReference:
    def __call__(self, inp, args):
        rng = np.random.default_rng(0)
        a = rng.uniform(-1, 1, (M, K)).astype(np.float32)
        b = rng.uniform(-1, 1, (K, N)).astype(np.float32)
        return {"A": a, "B": b}, {"C": a.astype(np.float64) @ b.astype(np.float64)}


class SourceBuilder:
    """`measure_batch` builds MeasureInputs; here each input's steps name a planted source."""

    def __init__(self, inner, sources: list[KernelSource]) -> None:
        self.inner, self.sources = inner, sources
        self.seconds = 0.0

    def build(self, inputs):
        t0 = time.perf_counter()
        out = self.inner.build_sources([self.sources[json.loads(i.steps_json)["idx"]] for i in inputs])
        self.seconds = time.perf_counter() - t0
        return out


class TimedRunner:
    def __init__(self, inner) -> None:
        self.inner, self.seconds = inner, 0.0

    def run(self, inputs, builds):
        t0 = time.perf_counter()
        out = self.inner.run(inputs, builds)
        self.seconds = time.perf_counter() - t0
        return out


def inputs_for(n: int) -> list[MeasureInput]:
    return [MeasureInput("bench_mm64", "{}", "cpu", json.dumps({"idx": i})) for i in range(n)]


def one_pass(name: str, builder, runner, sources, cache_note: str) -> dict:
    b, r = SourceBuilder(builder, sources), TimedRunner(runner)
    inputs = inputs_for(len(sources))
    t0 = time.perf_counter()
    results = measure_batch(inputs, b, r)
    total = time.perf_counter() - t0
    ok = [x for x in results if x.ok]
    row = {
        "setup": name, "cache": cache_note, "candidates": len(results), "ok": len(ok),
        "build_s": round(b.seconds, 3), "run_s": round(r.seconds, 3), "total_s": round(total, 3),
        "candidates_per_s": round(len(results) / total, 2),
        "run_candidates_per_s": round(len(results) / r.seconds, 2),
        "best_median_us": round(min(x.median for x in ok) * 1e6, 2) if ok else None,
        "nodes": sorted({x.worker_id.split("node=")[1].split()[0][:8] for x in ok if "node=" in x.worker_id}),
        "errors": sorted({x.error_msg[:120] for x in results if not x.ok}),
    }
    print(json.dumps(row), flush=True)
    return row


def bench_local(sources, config) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as cache, LocalBuilder(os.cpu_count(), 60, cache) as builder, \
            LocalRunner(config, MatmulReference()) as runner:
        builder.build_sources(sources[:1])  # start the pool outside the timing
        rows.append(one_pass("LocalBuilder+LocalRunner", builder, runner, sources, "cold"))
        rows.append(one_pass("LocalBuilder+LocalRunner", builder, runner, sources, "warm"))
    return rows


def bench_ray_embedded(sources, config) -> list[dict]:
    from autosched.measure.ray_runner import RayRunner

    with tempfile.TemporaryDirectory() as cache:
        t0 = time.perf_counter()
        runner = RayRunner(config=config, reference=MatmulReference(), cache_dir=cache)
        try:
            runner.devices()
            startup = time.perf_counter() - t0
            rows = [one_pass("RayRunner embedded", runner, runner, sources, "cold")]
            rows.append(one_pass("RayRunner embedded", runner, runner, sources, "warm"))
        finally:
            runner.shutdown()
    for row in rows:
        row["startup_s"] = round(startup, 2)
    return rows


def bench_ray_loopback(sources, config) -> list[dict]:
    import ray

    from autosched.measure.ray_runner import RayRunner
    from tests.support.loopback_cluster import LoopbackCluster

    with tempfile.TemporaryDirectory() as cache, LoopbackCluster() as cluster:
        t0 = time.perf_counter()
        cluster.start_head("node_a")
        cluster.start_worker("node_b", num_gpus=1)
        runner = RayRunner(cluster.address, config, reference=MatmulReference(), cache_dir=cache)
        try:
            while sum(n["Alive"] for n in ray.nodes()) < 2:
                time.sleep(0.2)
            runner.devices()
            startup = time.perf_counter() - t0
            rows = [one_pass("RayRunner 2-node loopback", runner, runner, sources, "cold")]
            rows.append(one_pass("RayRunner 2-node loopback", runner, runner, sources, "warm"))
        finally:
            runner.shutdown()
    for row in rows:
        row["startup_s"] = round(startup, 2)
    return rows


def write_docs(report: dict, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_measure.json").write_text(json.dumps(report, indent=2) + "\n")
    cfg = report["config"]
    lines = [
        "# Measurement throughput (build + run)", "",
        f"Measured {report['date']} on {report['machine']['cpu']} ({report['machine']['cores']} cores, "
        f"{report['machine']['mem_gib']} GiB), Python {report['machine']['python']}, Ray {report['machine']['ray']}.",
        f"1-minute load average before/after: {report['machine']['loadavg_1m_before_after']} (the machine is "
        "shared with other work; on a 2-core VM that shows in the figures).",
        "", f"Batch: {report['n']} distinct planted C kernels (64x64x64 float32 matmul; loop order x j-tile x "
        "unroll), each compiled (gcc -O3 -march=native -fopenmp), checked against numpy, and timed with "
        f"number={cfg['number']}, repeat={cfg['repeat']}, min_repeat_ms={cfg['min_repeat_ms']}. "
        "'cold' compiles into an empty artifact cache; 'warm' measures the same batch again (cache hits). "
        "Cluster start-up is not in the throughput.", "",
        "| setup | cache | ok/candidates | build s | run s | total s | candidates/s | runs/s | nodes | start-up s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["rows"]:
        lines.append(f"| {r['setup']} | {r['cache']} | {r['ok']}/{r['candidates']} | {r['build_s']} | {r['run_s']} | "
                     f"{r['total_s']} | **{r['candidates_per_s']}** | {r['run_candidates_per_s']} | "
                     f"{len(r['nodes']) or '-'} | {r.get('startup_s', '-')} |")
    lines += ["", "Notes:", "",
              "- Runs are serialized per device by design (one timed run per device at a time; the two loopback "
              "nodes share one physical CPU, so a host-wide lock makes their runs take turns). Timing "
              "(repeat x min_repeat_ms per candidate) bounds runs/s; builds are parallel.",
              "- The CPU device lock is host-wide: timed runs of any other autosched process on this host "
              "(other sessions' test suites were running) are waited for, and their load shares the 2 cores, so "
              "these figures are lower bounds and vary from run to run (see the load average above).",
              "- Best median of the batch is in the JSON (`best_median_us`)."]
    (out / "bench_measure.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--skip-ray", action="store_true")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = ap.parse_args()
    config = RunnerConfig()
    load_before = os.getloadavg()
    sources = kernels(args.n)
    assert len({s.source_hash for s in sources}) == args.n
    rows = bench_local(sources, config)
    if not args.skip_ray:
        # one auth mode for every Ray session of this process: Ray 2.60 cancels the actors of an
        # auth-disabled cluster joined after a token-auth embedded session in the same process
        os.environ["RAY_AUTH_MODE"] = "disabled"
        rows += bench_ray_embedded(sources, config)
        rows += bench_ray_loopback(sources, config)
    import ray

    report = {
        "date": dt.datetime.now().strftime("%Y-%m-%d %H:%M"), "n": args.n,
        "machine": {"cpu": cpu_model(), "cores": os.cpu_count(), "arch": platform.machine(),
                    "mem_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
                    "python": platform.python_version(), "ray": ray.__version__,
                    "loadavg_1m_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)]},
        "config": {"number": config.number, "repeat": config.repeat, "min_repeat_ms": config.min_repeat_ms,
                   "warmup": config.warmup, "enable_check": config.enable_check},
        "rows": rows,
    }
    write_docs(report, args.out)


if __name__ == "__main__":
    main()
