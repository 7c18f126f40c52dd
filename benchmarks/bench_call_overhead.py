"""What calling a built kernel from Python costs above the C call, on a near-empty kernel (issue 29).

One elementwise op, B = A + 1 over `--n` float32 elements (default 1), so the kernel body costs next
to nothing and what is timed is the call path. Contenders: the kernel's symbol through a bare ctypes
function with pointers computed once; `BuiltKernel` called with numpy arrays and with CPU torch
tensors; the same op with its loop marked parallel (what one OpenMP region costs per call); the
kernel `apply_best` serves after tuning the op for a few trials into a temporary SQLite database;
torch eager and numpy writing into a preallocated output. Median ns per call of interleaved rounds.

Run: `.venv/bin/python benchmarks/bench_call_overhead.py` (writes
`benchmarks/results/call_overhead_<machine tag>.{json,md}`).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
import tempfile
import warnings
from pathlib import Path

# both OpenMP runtimes (ours and torch's) spin between calls, as a kernel loaded by autosched does:
# set before either loads (see docs/decisions/openmp-spin-wait.md)
os.environ.setdefault("GOMP_SPINCOUNT", "10000000")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402
from common import command_line, interleaved, machine, machine_tag, thread_counts, write_results  # noqa: E402

import autosched as asc  # noqa: E402
from autosched import te  # noqa: E402
from autosched.workload import Workload  # noqa: E402

BASELINE = "bare ctypes"


def add_one(n: int) -> list[te.Tensor]:
    A = te.placeholder((n,), "A")
    return [A, te.compute((n,), lambda i: A[i] + 1.0, "B")]


def built(n: int, parallel: bool) -> asc.BuiltKernel:
    A, B = add_one(n)
    s = asc.create_schedule(B)
    if parallel:
        s[B].parallel(B.op.axis[0])
    return asc.build(s, [A, B])


def tuned(n: int, trials: int) -> asc.BuiltKernel:
    """The kernel `apply_best` serves after a short tuning run of the op into a throwaway database."""
    w = Workload.from_tensors(add_one(n), "call_overhead_add1")
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/tune.db"
        asc.tune(w, "cpu", trials, db=url, batch_size=trials, progress=False, cost_model=None, searcher="random")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a few trials may leave the best unverified: served all the same
            return asc.apply_best(w, db=url)


def contenders(n: int, trials: int) -> tuple[dict, dict]:
    """name -> zero-argument call, each checked against numpy once; and facts about the kernels."""
    import torch

    a = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    want = a + np.float32(1)
    outs = {}

    def out(name: str) -> np.ndarray:
        outs[name] = np.full(n, np.nan, np.float32)
        return outs[name]

    serial, par, best = built(n, False), built(n, True), tuned(n, trials)
    fn = getattr(ctypes.CDLL(str(serial.library.path)), serial.source_obj.entry)  # the same symbol, bare
    fn.argtypes, fn.restype = [ctypes.c_void_p] * 2, ctypes.c_int
    b_bare = out(BASELINE)
    pa, pb = a.ctypes.data, b_bare.ctypes.data
    ta = torch.from_numpy(a)
    b_kernel, b_par, b_best = out("BuiltKernel"), out("parallel BuiltKernel"), out("apply_best kernel")
    tb, t_out = torch.from_numpy(out("BuiltKernel on tensors")), torch.from_numpy(out("torch eager"))
    np_out = out("numpy")
    calls = {
        BASELINE: lambda: fn(pa, pb),
        "BuiltKernel (numpy arrays)": lambda: serial(a, b_kernel),
        "BuiltKernel (torch CPU tensors)": lambda: serial(ta, tb),
        "BuiltKernel, loop parallel (OpenMP region)": lambda: par(a, b_par),
        "apply_best kernel": lambda: best(a, b_best),
        "torch eager (add, out=)": lambda: torch.add(ta, 1.0, out=t_out),
        "numpy (add, out=)": lambda: np.add(a, np.float32(1), out=np_out),
    }
    for call in calls.values():
        call()
    for name, got in outs.items():
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=f"{name} computed a wrong result")
    facts = {"elements": n, "tuning_trials": trials, "apply_best_returns": type(best).__name__,
             "apply_best_has_omp_region": "#pragma omp parallel" in best.source}
    return calls, facts


def table(ns: dict[str, float]) -> str:
    base = ns[BASELINE]
    rows = ["| contender | ns per call | above bare ctypes (ns) |", "|---|---:|---:|"]
    rows += [f"| {name} | {v:.0f} | {v - base:+.0f} |" for name, v in ns.items()]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1, help="elements of the op (default 1: a near-empty kernel)")
    ap.add_argument("--trials", type=int, default=4, help="tuning trials behind the apply_best kernel")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--tag", default=None, help="result file suffix (default: this machine's ISA tag)")
    a = ap.parse_args(argv)
    if a.n < 1 or a.trials < 1 or a.rounds < 1:
        ap.error("--n, --trials and --rounds must be positive")
    calls, facts = contenders(a.n, a.trials)
    ns = {name: s * 1e9 for name, s in interleaved(calls, rounds=a.rounds).items()}
    threads = {k: v for k, v in thread_counts().items() if k != "torch.compile"}  # not a contender here
    payload = {"machine": machine(), "command": command_line("bench_call_overhead.py"), "protocol": __doc__,
               "threads": threads, **facts, "ns_per_call": {k: round(v, 1) for k, v in ns.items()}}
    md = (f"`{payload['command']}`\n\nB = A + 1 over {a.n} float32 element(s); threads: "
          f"{payload['threads']}; apply_best kernel has an OpenMP region: {facts['apply_best_has_omp_region']}.\n\n"
          + table(ns))
    write_results(f"call_overhead_{a.tag or machine_tag()}", payload, md, "Kernel call overhead")
    print(md)
    return payload


if __name__ == "__main__":
    main()
