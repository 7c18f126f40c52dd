"""Random configs of every op's CPU search space, built and run against the numpy reference.

Configs are drawn uniformly (without repeats) from `make_space(workload, "cpu")` of every library
op and of the custom DAGs in `fuzz_workloads.py`, round-robin over the workloads (a workload whose
space is exhausted drops out). Each goes down the normal measure path: `space.apply` here,
`LocalBuilder` (render + compile in worker processes), `LocalRunner` (the kernel runs in the
sandbox process, checked against the reference, one untimed-floor repeat). A kernel that crashes
kills only the sandbox; an exception in this process is counted as a fuzzer crash (target 0).
Every refusal must be a ScheduleError whose message names the step, the stage and the loop.
Writes <out>.json and <out>.md.

    .venv/bin/python benchmarks/fuzz_schedules.py [--configs 10000] [--seed 0] [--jobs 2] \
        [--out benchmarks/results/fuzz/fuzz_schedules]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
for p in (str(ROOT), str(ROOT / "benchmarks")):
    if p not in sys.path:
        sys.path.insert(0, p)

from fuzz_workloads import all_workloads  # noqa: E402

from autosched.compile.builder import LocalBuilder  # noqa: E402
from autosched.compile.types import ErrorCode, MeasureInput  # noqa: E402
from autosched.measure.config import RunnerConfig  # noqa: E402
from autosched.measure.local_runner import LocalRunner  # noqa: E402
from autosched.schedule.state import ScheduleError  # noqa: E402
from autosched.space.registry import make_space  # noqa: E402
from autosched.target.host_isa import native_march_name, native_vector_bytes  # noqa: E402
from autosched.target.key import Target  # noqa: E402

OUTCOMES = ("ok", "refused", "compile_error", "runtime_error", "wrong_answer", "crash", "timeout")
CODE_OUTCOME = {
    ErrorCode.NO_ERROR: "ok", ErrorCode.COMPILE_ERROR: "compile_error", ErrorCode.BUILD_TIMEOUT: "timeout",
    ErrorCode.RUNTIME_ERROR: "runtime_error", ErrorCode.RUN_TIMEOUT: "timeout",
    ErrorCode.WRONG_ANSWER: "wrong_answer", ErrorCode.WORKER_CRASHED: "crash",
}
# the cheapest checked run the measure path offers: one call checked, one timed, no floor
RUN_CONFIG = RunnerConfig(number=1, repeat=1, min_repeat_ms=0.0, warmup=0, timeout=10.0)
BATCH = 48


@dataclass(frozen=True)
class Case:
    op: str
    label: str
    config: tuple[int, ...]
    knobs: dict
    steps_json: str = ""
    outcome: str = ""
    message: str = ""


def refusal_gaps(message: str) -> list[str]:
    """Which of step, stage and loop a refusal's message does not name."""
    low = message.lower()
    gaps = []
    if not re.search(r"\bstep\b|\b(split|fuse|reorder|tile|compute_at|compute_inline|compute_root|cache_read|"
                     r"cache_write|rfactor|parallel|vectorize|unroll|pragma|bind|annotate)\b", low):
        gaps.append("step")
    if "stage" not in low:
        gaps.append("stage")
    if "loop" not in low:
        gaps.append("loop")
    return gaps


def draw_cases(n: int, seed: int) -> tuple[list[Case], dict[str, object], dict]:
    """`n` distinct configs round-robin over the workloads; also the workloads and spaces by label."""
    rng = np.random.default_rng(seed)
    wls = all_workloads()
    spaces = {lab: make_space(w, "cpu") for lab, w in wls}
    seen: dict[str, set] = {lab: set() for lab, _ in wls}
    live = [lab for lab, _ in wls]
    workloads = dict(wls)
    cases: list[Case] = []
    while len(cases) < n and live:
        for lab in list(live):
            if len(cases) >= n:
                break
            sp = spaces[lab].space
            if len(seen[lab]) >= sp.size:
                live.remove(lab)
                continue
            for _ in range(50):
                cfg = tuple(int(x) for x in sp.sample(rng))
                if cfg not in seen[lab]:
                    break
            else:
                live.remove(lab)
                continue
            seen[lab].add(cfg)
            vals = {k: (list(v) if isinstance(v, tuple) else v) for k, v in sp.values(cfg).items()}
            cases.append(Case(workloads[lab].name, lab, cfg, vals))
    return cases, workloads, spaces


def instantiate(case: Case, space: object) -> Case:
    """Apply the config in this process: a ScheduleError is a refusal, anything else a bug."""
    try:
        s = space.apply(case.config)
        return Case(**{**asdict(case), "steps_json": json.dumps(s.steps_json())})
    except ScheduleError as exc:
        return Case(**{**asdict(case), "outcome": "refused", "message": f"ScheduleError: {exc}"})
    except Exception as exc:  # noqa: BLE001 - a bug in a rule: recorded, never fatal
        tb = traceback.format_exc(limit=-2).strip().splitlines()
        return Case(**{**asdict(case), "outcome": "compile_error",
                       "message": f"space.apply raised {type(exc).__name__}: {exc} [{' | '.join(tb[-4:])}]"})


def classify(build, result) -> tuple[str, str]:
    if build.error_code == ErrorCode.INSTANTIATION_ERROR:
        if build.error_msg.startswith("ScheduleError"):
            return "refused", build.error_msg
        return "compile_error", build.error_msg
    return CODE_OUTCOME.get(result.error_code, "runtime_error"), result.error_msg


def run_cases(cases: list[Case], workloads: dict, spaces: dict, jobs: int, log=print) -> tuple[list[Case], int]:
    """Build and run every case; returns the finished cases and the count of fuzzer crashes."""
    target = Target.parse("cpu").key
    done: list[Case] = []
    fuzzer_crashes = 0
    with tempfile.TemporaryDirectory(prefix="fuzz-kernels-") as cache, \
            LocalBuilder(jobs, timeout=60.0, cache_dir=cache) as builder, \
            LocalRunner(RUN_CONFIG, lock_path=None) as runner, ThreadPoolExecutor(1) as bg:

        def prepare(batch: list[Case]):
            ready = [instantiate(c, spaces[c.label]) for c in batch]
            todo = [c for c in ready if not c.outcome]
            inputs = [MeasureInput(workloads[c.label].key, workloads[c.label].to_json(), target, c.steps_json)
                      for c in todo]
            return ready, inputs, builder.build(inputs)

        batches = [cases[i:i + BATCH] for i in range(0, len(cases), BATCH)]
        fut = bg.submit(prepare, batches[0]) if batches else None
        t0 = time.time()
        for b in range(len(batches)):
            try:
                ready, inputs, builds = fut.result()
            except Exception as exc:  # noqa: BLE001
                fuzzer_crashes += 1
                log(f"fuzzer crash preparing batch {b}: {type(exc).__name__}: {exc}")
                ready, inputs, builds = [Case(**{**asdict(c), "outcome": "crash",
                                                 "message": f"fuzzer: {exc}"}) for c in batches[b]], [], []
            fut = bg.submit(prepare, batches[b + 1]) if b + 1 < len(batches) else None
            it = iter(zip(inputs, builds))
            for c in ready:
                if c.outcome:
                    done.append(c)
                    continue
                inp, build = next(it)
                try:
                    res = runner.run_one(inp, build)
                    outcome, msg = classify(build, res)
                except Exception as exc:  # noqa: BLE001
                    fuzzer_crashes += 1
                    outcome, msg = "crash", f"fuzzer: {type(exc).__name__}: {exc}"
                done.append(Case(**{**asdict(c), "outcome": outcome, "message": msg}))
            n = len(done)
            if b % 10 == 0 or b == len(batches) - 1:
                counts = Counter(c.outcome for c in done)
                log(f"[{time.time() - t0:7.0f}s] {n}/{len(cases)} " + " ".join(f"{k}={counts[k]}" for k in OUTCOMES))
    return done, fuzzer_crashes


def summarize(done: list[Case], fuzzer_crashes: int, args: argparse.Namespace, seconds: float) -> dict:
    per_op: dict[str, Counter] = defaultdict(Counter)
    for c in done:
        per_op[c.op][c.outcome] += 1
    total = Counter(c.outcome for c in done)
    refusals = [c for c in done if c.outcome == "refused"]
    unnamed = [{"label": c.label, "gaps": refusal_gaps(c.message), "message": c.message}
               for c in refusals if refusal_gaps(c.message)]
    failures = [asdict(c) for c in done if c.outcome not in ("ok", "refused")]
    templates = Counter(re.sub(r"'[^']*'|\d+", "_", c.message)[:160] for c in refusals)
    return {
        "configs": len(done), "seed": args.seed, "jobs": args.jobs, "seconds": round(seconds, 1),
        "target": Target.host("cpu").key,
        "cpu_isa": f"-march={native_march_name()}, {8 * native_vector_bytes()}-bit vectors",
        "distinct_workloads": len({c.label for c in done}),
        "total": {k: total[k] for k in OUTCOMES}, "fuzzer_crashes": fuzzer_crashes,
        "per_op": {op: {k: cnt[k] for k in OUTCOMES} for op, cnt in sorted(per_op.items())},
        "refusals_not_naming_step_stage_loop": len(unnamed), "unnamed_refusals": unnamed[:50],
        "refusal_kinds": templates.most_common(30), "failures": failures,
    }


def markdown(rep: dict) -> str:
    cols = OUTCOMES
    lines = [f"# Schedule fuzz: {rep['configs']} random CPU configs (seed {rep['seed']}, {rep['jobs']} build jobs)",
             "", "Generated by `benchmarks/fuzz_schedules.py` (see docs/benchmarks.md).", "",
             f"Machine: `{rep.get('target', '?')}` ({rep.get('cpu_isa', '?')}).", "",
             f"Workloads: {rep['distinct_workloads']}; wall time {rep['seconds']:.0f} s; fuzzer process crashes: "
             f"{rep['fuzzer_crashes']}; refusals whose message lacks the step, stage or loop: "
             f"{rep['refusals_not_naming_step_stage_loop']}.", "",
             "| op | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]
    for op, cnt in rep["per_op"].items():
        lines.append(f"| {op} | " + " | ".join(str(cnt[k]) for k in cols) + " |")
    lines.append("| **total** | " + " | ".join(f"**{rep['total'][k]}**" for k in cols) + " |")
    lines += ["", "## Failures (not ok, not refused)", ""]
    if not rep["failures"]:
        lines.append("None.")
    for f in rep["failures"]:
        lines += [f"### {f['outcome']}: {f['label']}", "", f"knobs: `{json.dumps(f['knobs'])}`", "",
                  f"message: {f['message'][:800]}", "", f"steps: `{f['steps_json'][:2000]}`", ""]
    lines += ["", "## Refusal kinds", ""]
    lines += [f"- {n} x `{t}`" for t, n in rep["refusal_kinds"]] or ["None."]
    if rep["unnamed_refusals"]:
        lines += ["", "## Refusals not naming step, stage and loop", ""]
        lines += [f"- {u['label']} (lacks {', '.join(u['gaps'])}): {u['message'][:300]}"
                  for u in rep["unnamed_refusals"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--configs", type=int, default=10000, help="configs to draw in all (default 10000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2, help="parallel build workers (default 2)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/fuzz/fuzz_schedules"),
                    help="report path without extension: writes OUT.json and OUT.md")
    ap.add_argument("--only", default="", help="comma-separated op names to fuzz (default: all)")
    args = ap.parse_args(argv)
    if args.configs < 1 or args.jobs < 1:
        ap.error("--configs and --jobs must be >= 1")
    t0 = time.time()
    cases, workloads, spaces = draw_cases(args.configs, args.seed)
    if args.only:
        keep = set(args.only.split(","))
        cases = [c for c in cases if c.op in keep]
    print(f"{len(cases)} configs over {len({c.label for c in cases})} workloads", flush=True)
    done, crashes = run_cases(cases, workloads, spaces, args.jobs, log=lambda m: print(m, flush=True))
    rep = summarize(done, crashes, args, time.time() - t0)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(rep, indent=1) + "\n")
    out.with_suffix(".md").write_text(markdown(rep))
    print(json.dumps({"total": rep["total"], "fuzzer_crashes": crashes,
                      "unnamed_refusals": rep["refusals_not_naming_step_stage_loop"]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
