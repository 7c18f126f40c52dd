"""The generality suite of issue 29: custom `te` DAGs at sizes nothing divides, tuned as a new user would.

For each workload of `generality_dags.WORKLOADS`: build it with `autosched.te`, wrap it with
`Workload.from_tensors`, tune it from an empty database and a cold kernel cache for `--trials-first`
trials (a user's first run) and keep that best kernel; then call `asc.tune` again on the same
database with `--trials` minus `--trials-first` and keep the new best. Both kernels and the torch
eager twin are checked against autosched's numpy reference (`DagReferenceProvider`, the check the
runner applies) and timed round-robin in this process; with `--tvm`, TVM MetaSchedule tunes the same
DAG (built by the same builder with `tvm.te`) with the same total trials in its own environment and
times its best kernel side by side with our final one (`tvm_peer.py --generality NAME --ours ...`).

How the continuation counts: the second `asc.tune` call resumes on the first call's database, as a
user continuing a run would, with the same seed: its model starts trained on the workload's own
records, and a stored schedule proposed again is reused without a trial, so the remaining trials go to
new schedules; each row stores the measurements and reuses of both calls, so the measurement count
beside TVM's is the real one
(docs/decisions/generality-continuation.md).

Results: benchmarks/results/generality_<machine tag>.{json,md} (`--quick`: ..._quick), written after
every workload; rows of workloads not re-run are kept from the file when they used the same trials.
Run: `.venv/bin/python benchmarks/bench_generality.py [--only NAME ...] [--tvm [NAME ...]] [--quick]`
"""

from __future__ import annotations

import os

os.environ.setdefault("GOMP_SPINCOUNT", "10000000")  # as bench_tune_cpu: set before either OpenMP loads

import argparse
import json
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import common  # noqa: E402
from bench_tune_cpu import TVM_PY, cold_cache, merged_rows, schedule_text, tvm_env  # noqa: E402
from generality_dags import WORKLOADS, GeneralityWorkload, unknown  # noqa: E402
from generality_report import METHOD, summary, table  # noqa: E402

CONTINUE_SEED = 0  # the second tune call's seed: the first call's, as a user resuming a run
QUICK = {"trials_first": 4, "trials": 8, "rounds": 3}


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="+", metavar="NAME", default=None, help=f"subset of {list(WORKLOADS)}")
    ap.add_argument("--trials-first", type=int, default=32, help="trials of a user's first run (default 32)")
    ap.add_argument("--trials", type=int, default=200, help="total trials after the continuation (default 200)")
    ap.add_argument("--tvm", nargs="*", default=None, metavar="NAME",
                    help="also tune with TVM MetaSchedule (same total trials): the workloads marked tvm, or those "
                         "listed")
    ap.add_argument("--quick", action="store_true",
                    help=f"smoke test: {QUICK['trials_first']} then {QUICK['trials']} trials, "
                         f"{QUICK['rounds']} timing rounds unless --rounds, results stem ..._quick")
    ap.add_argument("--rounds", type=int, default=None, help="interleaved timing rounds (default 15; --quick 3)")
    ap.add_argument("--out", default=None,
                    help="results stem under benchmarks/results, or a path (DIR/STEM) to write elsewhere")
    a = ap.parse_args(argv)
    if a.quick:
        a.trials_first, a.trials = QUICK["trials_first"], QUICK["trials"]
    a.rounds = a.rounds if a.rounds is not None else (QUICK["rounds"] if a.quick else 15)
    for bad in (unknown(a.only), unknown(a.tvm)):
        if bad:
            ap.error(f"unknown workload(s) {bad}; the suite has {list(WORKLOADS)}")
    if a.trials_first < 1 or a.trials <= a.trials_first:
        ap.error(f"need 1 <= --trials-first < --trials, got {a.trials_first} and {a.trials}")
    if a.rounds < 1:
        ap.error(f"--rounds must be at least 1, got {a.rounds}")
    return a


def tvm_names(a: argparse.Namespace, names: list[str]) -> set[str]:
    """The workloads TVM tunes: none without --tvm; with a bare --tvm the ones marked tvm=True."""
    if a.tvm is None:
        return set()
    return {n for n in names if (n in a.tvm if a.tvm else WORKLOADS[n].tvm)}


def run_tvm(name: str, trials: int, ours: tuple[str, str], rounds: int) -> dict:
    """TVM MetaSchedule on one workload in benchmarks/.tvm-venv, our final kernel timed beside its best."""
    if not TVM_PY.exists():
        return {"missing": "TVM environment not installed (bench_tune_cpu.py --install-tvm)"}
    cores = len(os.sched_getaffinity(0))
    cmd = [str(TVM_PY), str(HERE / "tvm_peer.py"), "--generality", name, "--trials", str(trials),
           "--settle", str(common.SETTLE_S), "--rounds", str(rounds), "--ours", *ours]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=7200, env=tvm_env(cores))
    except subprocess.TimeoutExpired:
        return {"missing": "TVM run timed out after 7200 s"}
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        return {"missing": f"TVM run failed (rc {p.returncode}): {p.stderr[-600:]}"}
    out = json.loads(lines[-1])
    if out.get("threads") != cores:
        return {"missing": f"TVM ran on {out.get('threads')} threads, not the machine's {cores}", **out}
    return out


def _aligned(v: np.ndarray) -> np.ndarray:
    from autosched.measure.executor import aligned_empty

    out = aligned_empty(v.shape, v.dtype)
    out[...] = v
    return out


def _check(label: str, got: np.ndarray, ref: Any, out_name: str) -> tuple[bool, str]:
    from autosched.measure.checking import check_outputs

    c = check_outputs({out_name: np.asarray(got)}, {out_name: ref.expected[out_name]}, ref.reduce_len)
    return c.ok, (f"{label}: ok (max abs err {c.max_abs_err:.2e})" if c.ok else f"{label}: {c.message}")


def run_one(wl: GeneralityWorkload, a: argparse.Namespace, kernels_dir: str, with_tvm: bool) -> dict:
    """Tune one workload twice (first run, continuation), check and time both kernels beside torch."""
    import torch

    import autosched as asc
    from autosched import te
    from autosched.compile.types import MeasureInput
    from autosched.measure.executor import aligned_empty, poison
    from autosched.measure.reference import DagReferenceProvider
    from autosched.workload import Workload

    tensors, flops = wl.tensors(te)
    w = Workload.from_tensors(tensors, name=wl.name)
    tmp = tempfile.mkdtemp(dir=kernels_dir)
    cold_cache(tmp)
    db = f"sqlite:///{tmp}/tune.db"
    t0 = time.perf_counter()
    r1 = asc.tune(w, "cpu", a.trials_first, db=db, progress=False)
    tune_first = time.perf_counter() - t0
    f1 = asc.apply_best(w, db=db)
    t1 = time.perf_counter()
    r2 = asc.tune(w, "cpu", a.trials - a.trials_first, db=db, progress=False, seed=CONTINUE_SEED)
    tune_total = tune_first + time.perf_counter() - t1
    f2 = asc.apply_best(w, db=db)

    ref = DagReferenceProvider(seed=0)(MeasureInput(w.key, w.to_json(), r1.target, "[]"), f2.args)
    out_name = w.dag.outputs[-1].name
    x = {k: _aligned(np.asarray(v)) for k, v in ref.inputs.items()}
    outs = {s.name: aligned_empty(tuple(s.shape), np.dtype(s.dtype)) for s in f2.args if s.is_output}
    call = [x[n] if n in x else outs[n] for n in w.args_order]
    checks: dict[str, str] = {}
    correct = True
    for label, f in (("autosched@first", f1), ("autosched@total", f2)):
        for o in outs.values():
            poison(o)
        f(*call)
        ok, checks[label] = _check(label, outs[out_name], ref, out_name)
        correct &= ok
    t_in = [torch.from_numpy(x[n]) for n in w.args_order if n in x]
    t_out = torch.from_numpy(aligned_empty(outs[out_name].shape, outs[out_name].dtype))
    twin = wl.torch_call()
    # a twin that disagrees makes its ratio meaningless: flagged beside the row, not counted against ours
    torch_ok, checks["torch eager"] = _check("torch eager", twin(*t_in, out=t_out).numpy(), ref, out_name)

    contenders = {"autosched@first": lambda: f1(*call), "autosched@total": lambda: f2(*call),
                  "torch eager": lambda: twin(*t_in, out=t_out)}
    times = common.interleaved(contenders, rounds=a.rounds, settle_s=common.SETTLE_S)
    counts = common.thread_counts()
    row: dict[str, Any] = {
        "workload": wl.name, "kind": wl.kind, "shape": list(wl.shape), "gflop": flops / 1e9,
        "trials_first": a.trials_first, "trials": a.trials, "continue_seed": CONTINUE_SEED,
        "ours_first_ms": times["autosched@first"] * 1e3, "ours_ms": times["autosched@total"] * 1e3,
        "torch_ms": times["torch eager"] * 1e3, "torch_allocates": wl.torch_allocates,
        "ratio_first": times["torch eager"] / times["autosched@first"],
        "ratio": times["torch eager"] / times["autosched@total"],
        "tune_seconds_first": tune_first, "tune_seconds": tune_total,
        "measured": [r1.measured, r2.measured], "reused": [r1.reused, r2.reused],
        "errors": [r1.errors, r2.errors], "tuner_best_ms": [r1.best_cost * 1e3, r2.best_cost * 1e3],
        "threads": {"autosched": counts["autosched"], "torch eager": counts.get("torch eager", "?")},
        "correct": correct, "torch_correct": torch_ok, "checks": checks, "best_schedule": schedule_text(w, r2),
        "curve": [list(p) for p in r1.curve] + [[t + r1.trials, g] for t, g in r2.curve],
    }
    if with_tvm:
        row["tvm"] = run_tvm(wl.name, a.trials, (str(f2.library.path), f2.source_obj.entry), a.rounds)
    return row


def results_stem(a: argparse.Namespace) -> Path:
    """Where results go: DIR/STEM from --out (a bare stem means benchmarks/results)."""
    default = f"generality_{common.machine_tag()}{'_quick' if a.quick else ''}"
    out = Path(a.out or default)
    return out if out.parent != Path(".") else common.RESULTS / out


def save(stem: Path, rows: list[dict], machine: dict, a: argparse.Namespace, command: str) -> None:
    """Write json and md; rows of the file's earlier run for other workloads are kept if their trials match."""
    path = stem.with_suffix(".json")
    kept = [r for r in merged_rows(path, rows)
            if r in rows or (r.get("trials_first"), r.get("trials")) == (a.trials_first, a.trials)]
    payload = {"machine": machine, "machine_tag": common.machine_tag(), "trials_first": a.trials_first,
               "trials": a.trials, "suite_size": len(WORKLOADS), "rows": kept}
    common.RESULTS = stem.parent  # write_results writes under common.RESULTS
    common.write_results(stem.name, payload, table(payload) + "\n\n" + summary(payload),
                         f"Generality suite: custom te DAGs ({a.trials_first} then {a.trials} trials) vs torch eager"
                         " and TVM MetaSchedule", method=f"{METHOD} Command: `{command}`.")


def main(argv: list[str] | None = None) -> None:
    a = parse(argv)
    names = a.only or list(WORKLOADS)
    with_tvm = tvm_names(a, names)
    stem = results_stem(a)
    machine, command = common.machine(), common.command_line("bench_generality.py")
    rows: list[dict] = []
    kernels = tempfile.TemporaryDirectory()  # tuned kernels stay loadable until the process ends
    for name in names:
        t0 = time.perf_counter()
        try:
            row = run_one(WORKLOADS[name], a, kernels.name, name in with_tvm)
        except Exception as exc:  # noqa: BLE001  a workload that cannot be tuned is a result, not the end of the run
            traceback.print_exc()
            row = {"workload": name, "kind": WORKLOADS[name].kind, "shape": list(WORKLOADS[name].shape),
                   "trials_first": a.trials_first, "trials": a.trials, "correct": False, "threads": {},
                   "error": f"{type(exc).__name__}: {str(exc)[:600]}"}
        row.update(date=machine["date"], command=command)
        rows.append(row)
        tv = (row.get("tvm") or {}).get("side_by_side") or {}
        print(f"{name:22s} " + (f"ERROR {row['error']}" if "error" in row else
              f"ours@{a.trials_first} {row['ours_first_ms']:.3f} ms, ours@{a.trials} {row['ours_ms']:.3f} ms, "
              f"torch {row['torch_ms']:.3f} ms ({row['ratio_first']:.2f}x / {row['ratio']:.2f}x), "
              f"tuned {row['tune_seconds']:.0f} s, correct {row['correct']}"
              + (f", vs TVM {tv['speedup_vs_tvm']:.2f}x" if tv else ""))
              + f" [{time.perf_counter() - t0:.0f} s]", flush=True)
        save(stem, rows, machine, a, command)  # after every workload: a cut-short run keeps what it finished
    print(f"results: {stem}.json, {stem}.md")


if __name__ == "__main__":
    main()
