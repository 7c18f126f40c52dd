"""TVM MetaSchedule peer: tunes one workload with `tune_tir` and times the best schedule.

Runs inside the TVM environment (benchmarks/.tvm-venv, made by bench_tune_cpu.py --install-tvm),
never imported by autosched. Prints one JSON line: best seconds per call, tuning wall time.
Usage: python tvm_peer.py matmul 1024 1024 1024 --trials 200 [--ours LIB.so ENTRY]
       python tvm_peer.py --generality NAME [SIZES...] --trials 200 [--ours LIB.so ENTRY]
(the second form builds a workload of the generality suite, `generality_dags.py`, with `tvm.te`:
the very builder autosched's side uses, at its default shape unless SIZES are given).

With `--ours`, autosched's tuned kernel (a plain C shared library: `int ENTRY(void* arg0, ...)`, the
workload's inputs then its output) is loaded with ctypes into this process and timed side by side
with TVM's best kernel: same 64-byte-aligned input arrays, interleaved rounds with a pause between
contenders (each runtime's thread pool spins after a call), medians; the two outputs are compared.
TVM's own time_evaluator figure is reported too, as TVM reports it.

Threads: TVM's runtime uses half the logical CPUs on x86 unless TVM_NUM_THREADS is set (one thread on
a 2-vCPU VM, where our kernels use two), so TVM_NUM_THREADS defaults here to the CPUs this process
may run on, before tvm loads; MetaSchedule's LocalRunner workers and builders are child processes
and inherit it. The JSON line carries the thread count TVM's runtime reports and `tvm_curve`, the
best GFLOP/s after each measured trial, read back from the tuning database in commit order.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np

TE_OPS = ("matmul", "softmax", "dense_bias_relu", "conv2d_nchw", "layernorm")


def te_workload(op: str, args: list[int]):
    """TVM TE twins of autosched's operators (same inputs in the same order, same output), and flops."""
    from tvm import te

    if op == "matmul":
        m, n, k = args
        a = te.placeholder((m, k), name="A")
        b = te.placeholder((k, n), name="B")
        r = te.reduce_axis((0, k), name="k")
        c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
        return [a, b, c], 2.0 * m * n * k
    if op == "softmax":
        m, n = args
        x = te.placeholder((m, n), name="X")
        k1 = te.reduce_axis((0, n), name="k1")
        mx = te.compute((m,), lambda i: te.max(x[i, k1], axis=k1), name="mx")
        e = te.compute((m, n), lambda i, j: te.exp(x[i, j] - mx[i]), name="e")
        k2 = te.reduce_axis((0, n), name="k2")
        s = te.compute((m,), lambda i: te.sum(e[i, k2], axis=k2), name="s")
        # autosched.ops.nn.softmax normalizes by the row's reciprocal sum, as torch does
        rs = te.compute((m,), lambda i: te.const(1.0, "float32") / s[i], name="rs")
        o = te.compute((m, n), lambda i, j: e[i, j] * rs[i], name="o")
        return [x, o], 5.0 * m * n + m  # as autosched counts it: the reciprocal is one op per row
    if op == "dense_bias_relu":  # autosched.ops.linalg.dense_bias_relu: relu(X W^T + bias), W [N, K]
        m, n, k = args
        x = te.placeholder((m, k), name="X")
        w = te.placeholder((n, k), name="W")
        bias = te.placeholder((n,), name="bias")
        r = te.reduce_axis((0, k), name="k")
        d = te.compute((m, n), lambda i, j: te.sum(x[i, r] * w[j, r], axis=r), name="dense")
        o = te.compute((m, n), lambda i, j: te.max(d[i, j] + bias[j], te.const(0, "float32")), name="out")
        return [x, w, bias, o], 2.0 * m * n * k + 2.0 * m * n
    if op == "conv2d_nchw":  # autosched.ops.conv.conv2d_nchw: N C H W K R S [stride [padding]], dilation 1
        nb, c, h, wd, kf, rr, ss, *rest = args
        stride, pad = (rest + [1, 0][len(rest):])[:2]
        oh, ow = (h + 2 * pad - rr) // stride + 1, (wd + 2 * pad - ss) // stride + 1
        data = te.placeholder((nb, c, h, wd), name="data")
        kernel = te.placeholder((kf, c, rr, ss), name="kernel")
        src = data
        if pad:
            src = te.compute((nb, c, h + 2 * pad, wd + 2 * pad), lambda n, ci, y, x: te.if_then_else(
                te.all(y >= pad, y < h + pad, x >= pad, x < wd + pad), data[n, ci, y - pad, x - pad],
                te.const(0, "float32")), name="pad")
        rc, ry, rx = (te.reduce_axis((0, c), name="rc"), te.reduce_axis((0, rr), name="ry"),
                      te.reduce_axis((0, ss), name="rx"))
        conv = te.compute((nb, kf, oh, ow), lambda n, f, y, x: te.sum(
            src[n, rc, y * stride + ry, x * stride + rx] * kernel[f, rc, ry, rx], axis=[rc, ry, rx]), name="conv")
        return [data, kernel, conv], 2.0 * nb * kf * oh * ow * c * rr * ss
    if op == "layernorm":  # autosched.ops.nn.layernorm: two-pass variance, eps 1e-5, gamma and beta [N]
        m, n = args
        x = te.placeholder((m, n), name="X")
        gamma = te.placeholder((n,), name="gamma")
        beta = te.placeholder((n,), name="beta")
        k1 = te.reduce_axis((0, n), name="k1")
        mean = te.compute((m,), lambda i: te.sum(x[i, k1] * (1.0 / n), axis=k1), name="mean")
        k2 = te.reduce_axis((0, n), name="k2")
        var = te.compute((m,), lambda i: te.sum((x[i, k2] - mean[i]) * (x[i, k2] - mean[i]) * (1.0 / n), axis=k2),
                         name="var")
        o = te.compute((m, n), lambda i, j: (x[i, j] - mean[i]) * te.rsqrt(var[i] + 1e-5) * gamma[j] + beta[j],
                       name="out")
        return [x, gamma, beta, o], 8.0 * m * n
    raise SystemExit(f"tvm_peer: no TE definition for {op}")


def generality_workload(name: str, args: list[int]):
    """A generality-suite DAG built with `tvm.te` (its default shape, or `args`), and its flops."""
    from generality_dags import WORKLOADS  # beside this script: numpy-free, autosched-free builders
    from tvm import te

    if name not in WORKLOADS:
        raise SystemExit(f"tvm_peer: unknown generality workload {name!r}; the suite has {list(WORKLOADS)}")
    return WORKLOADS[name].tensors(te, tuple(args) or None)


def build_candidate(mod, target, _params):
    """MetaSchedule's default_build without its `import tvm.s_tir.tensor_intrin`.

    That import registers every tensor intrinsic (CUDA, ROCm, Hexagon, ...) and takes 20-30 s; the
    LocalBuilder starts fresh workers for every batch, so with the default each worker spent its
    whole 30 s build timeout importing and every candidate failed to build. fp32 on llvm never
    tensorizes, so the registrations are not needed. Defined here (run as __main__), cloudpickle
    ships it to the builder workers by value.
    """
    from tvm.driver import build
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    return build(RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod), target=target)


def check_ffi_abi() -> None:
    """apache-tvm 0.27.0.post1 only declares apache-tvm-ffi>=0.1.14.post0, but its libraries are built
    against 0.1.14: with 0.1.15.post2 every JSON serialization (tvm.ir.save_json, hence the
    MetaSchedule builder and database) segfaults in tvm::ffi::ToJSONGraph. Fail with a message instead."""
    import tvm
    import tvm_ffi

    if tvm.__version__.startswith("0.27.") and not tvm_ffi.__version__.startswith("0.1.14"):
        raise SystemExit(f"tvm_peer: apache-tvm {tvm.__version__} needs apache-tvm-ffi 0.1.14.x "
                         f"(found {tvm_ffi.__version__}, which segfaults on serialization); "
                         "pip install apache-tvm-ffi==0.1.14.post1 into this venv")


FAILED_RUN_S = 1e9  # MetaSchedule stores a candidate that failed to build or run with run_secs of 1e10


def tuning_curve(run_secs: list[list[float]], flops: float) -> list[list[float]]:
    """[[trial, best GFLOP/s so far], ...] from each trial's run seconds in measurement order
    (MetaSchedule ranks a record by the mean of its run_secs; a failed trial keeps the best)."""
    best, curve = 0.0, []
    for i, secs in enumerate(run_secs, 1):
        mean = sum(secs) / len(secs) if secs else float("inf")
        if mean < FAILED_RUN_S:
            best = max(best, flops / mean / 1e9)
        curve.append([i, best])
    return curve


def main() -> None:
    # before tvm loads: its pool reads TVM_NUM_THREADS once, and defaults to half the logical CPUs
    os.environ.setdefault("TVM_NUM_THREADS", str(len(os.sched_getaffinity(0))))
    # our kernel's libgomp may initialise after TVM's pool pinned this thread to one core; its thread
    # count must not follow that pin
    os.environ.setdefault("OMP_NUM_THREADS", str(len(os.sched_getaffinity(0))))
    import tvm
    from tvm import te

    ap = argparse.ArgumentParser()
    ap.add_argument("op", nargs="?", help="an op of TE_OPS (or none with --generality)")
    ap.add_argument("args", nargs="*", type=int)
    ap.add_argument("--generality", metavar="NAME", default=None,
                    help="a workload of generality_dags.WORKLOADS instead of an op (sizes: its default shape)")
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--ours", nargs=2, metavar=("LIB", "ENTRY"), default=None,
                    help="autosched's compiled kernel to time side by side with TVM's best")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--settle", type=float, default=1.0,
                    help="seconds between contenders, longer than either pool spins after a call")
    ap.add_argument("--mcpu", default=None, help="LLVM CPU to tune for (default: this host's, as LLVM names it)")
    a = ap.parse_args()
    if a.generality is not None:
        if a.op is not None and not a.op.isdigit():
            ap.error(f"--generality {a.generality} takes sizes only, not an op ({a.op!r})")
        a.args = ([int(a.op)] if a.op is not None else []) + a.args
        a.op = f"generality:{a.generality}"
    elif a.op is None or not a.args:
        ap.error("give an op and its sizes, or --generality NAME")
    check_ffi_abi()
    if a.generality is not None:
        tensors, flops = generality_workload(a.generality, a.args)
    else:
        tensors, flops = te_workload(a.op, a.args)
    func = te.create_prim_func(tensors).with_attr("global_symbol", "main")
    mod = tvm.IRModule({"main": func})
    cores = len(os.sched_getaffinity(0))
    # BENCHMARKS.md measured TVM with -mcpu=rocketlake on its Rocket Lake host: LLVM's name for the host
    # CPU gives that there and the right ISA and cost tables elsewhere (znver4 on a Zen 4)
    mcpu = a.mcpu or tvm.target.codegen.llvm_get_system_cpu()
    target = tvm.target.Target({"kind": "llvm", "mcpu": mcpu, "num-cores": cores})
    # MetaSchedule logs (Python and C++, and its worker processes) go to stdout; send fd 1 to stderr while
    # tuning and timing so stdout carries only the JSON line
    sys.stdout.flush()
    stdout_fd = os.dup(1)
    os.dup2(2, 1)
    try:
        med, tune_s, side, curve = tune_and_time(a, mod, tensors, target, cores, flops)
    finally:
        sys.stdout.flush()
        os.dup2(stdout_fd, 1)
        os.close(stdout_fd)
    print(json.dumps({"peer": "tvm-metaschedule", "tvm": tvm.__version__, "mcpu": mcpu, "op": a.op,
                      "args": a.args,
                      "trials": a.trials, "measured": len(curve), "tune_seconds": tune_s, "best_seconds": med,
                      "gflops": flops / med / 1e9, "side_by_side": side, "tvm_curve": curve,
                      "threads": int(tvm.get_global_func("runtime.NumThreads")()),
                      "TVM_NUM_THREADS": os.environ["TVM_NUM_THREADS"], "cores": cores,
                      "allocates": False}))


def aligned(x: np.ndarray, align: int = 64) -> np.ndarray:
    raw = np.empty(x.nbytes + align, dtype=np.uint8)
    off = (-raw.ctypes.data) % align
    out = raw[off:off + x.nbytes].view(x.dtype).reshape(x.shape)
    out[...] = x
    return out


def interleaved(contenders: dict, rounds: int, min_batch_s: float = 0.05, settle_s: float = 1.0) -> dict:
    """Median seconds per call of each contender, timed round-robin (as benchmarks/common.py)."""
    batch = {}
    for name, fn in contenders.items():
        fn()
        fn()
        t0 = time.perf_counter()
        fn()
        batch[name] = max(1, int(min_batch_s / max(time.perf_counter() - t0, 1e-7)))
    samples: dict = {n: [] for n in contenders}
    for _ in range(rounds):
        for name, fn in contenders.items():
            time.sleep(settle_s)  # let the other runtime's spinning pool go to sleep
            fn()
            t0 = time.perf_counter()
            for _ in range(batch[name]):
                fn()
            samples[name].append((time.perf_counter() - t0) / batch[name])
    return {n: float(np.median(v)) for n, v in samples.items()}


def side_by_side(lib, tensors, dev, ours: list[str], rounds: int, settle_s: float) -> dict:
    """TVM's kernel and autosched's, same aligned inputs, interleaved; outputs compared."""
    import ctypes

    import tvm

    rng = np.random.default_rng(0)
    host = [aligned(rng.uniform(-1, 1, [int(d) for d in t.shape]).astype("float32")) for t in tensors]
    host[-1][...] = 0.0
    ours_out = aligned(np.zeros_like(host[-1]))
    tvm_arrays = [tvm.runtime.tensor(x, dev) for x in host]
    dll = ctypes.CDLL(ours[0])
    fn = getattr(dll, ours[1])
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p] * len(tensors)
    ptrs = [x.ctypes.data for x in host[:-1]] + [ours_out.ctypes.data]
    main = lib["main"]
    everything = os.sched_getaffinity(0)

    def ours_call() -> None:
        # TVM's pool pins the calling thread to one core; OpenMP threads inherit that mask, so give the
        # thread every core back before our kernel's parallel region (a syscall: microseconds)
        os.sched_setaffinity(0, everything)
        fn(*ptrs)

    if fn(*ptrs) != 0:
        raise SystemExit("tvm_peer: autosched kernel returned an error")
    main(*tvm_arrays)
    tvm_pin = os.sched_getaffinity(0)  # where TVM's pool put the calling thread beside its pinned workers

    def tvm_call() -> None:
        # give TVM back the pin it chose: left on every core after our call, the calling thread can share
        # a core with TVM's pinned worker until the scheduler moves it, which halves TVM's speed
        os.sched_setaffinity(0, tvm_pin)
        main(*tvm_arrays)

    tvm_out = tvm_arrays[-1].numpy()
    err = float(np.abs(tvm_out - ours_out).max())
    scale = float(np.abs(tvm_out).max()) or 1.0
    if not err <= 1e-3 * scale:
        raise SystemExit(f"tvm_peer: autosched and TVM outputs differ (max abs {err:.3g}); argument order?")
    times = interleaved({"tvm": tvm_call, "autosched": ours_call}, rounds, settle_s=settle_s)
    pinned = sorted(os.sched_getaffinity(0))
    try:
        ours_threads: int | None = int(ctypes.CDLL("libgomp.so.1").omp_get_max_threads())
    except (OSError, AttributeError):
        ours_threads = None
    return {"autosched_threads": ours_threads, "tvm_threads": int(tvm.get_global_func("runtime.NumThreads")()),
            "tvm_seconds": times["tvm"], "autosched_seconds": times["autosched"], "max_abs_diff": err,
            "rounds": rounds, "settle_s": settle_s, "speedup_vs_tvm": times["tvm"] / times["autosched"],
            "main_thread_cpus_after_tvm": pinned, "main_thread_cpus_for_tvm": sorted(tvm_pin)}


def tune_and_time(a, mod, tensors, target, cores: int, flops: float
                  ) -> tuple[float, float, dict | None, list[list[float]]]:
    """Tune with tune_tir from an empty work dir and database (a cold start, as ours), build the best
    schedule; (median s per call, tuning wall s, side-by-side, tuning curve)."""
    import tvm
    from tvm.s_tir import meta_schedule as ms

    with tempfile.TemporaryDirectory() as work:
        t0 = time.perf_counter()
        builder = ms.builder.LocalBuilder(max_workers=cores, timeout_sec=60.0, f_build=build_candidate)
        db = ms.tune_tir(mod, target, work, max_trials_global=a.trials, num_trials_per_iter=64,
                         builder=builder, database="memory")
        tune_s = time.perf_counter() - t0
        records = db.get_all_tuning_records()
        curve = tuning_curve([[float(x) for x in (r.run_secs or [])] for r in records], flops)
        sch = ms.tir_integration.compile_tir(db, mod, target)
        if sch is None:
            raise SystemExit(f"tvm_peer: no candidate built and ran (see MetaSchedule logs above); {a.op} {a.args}")
        lib = tvm.compile(sch.mod, target=target).jit()  # 0.27: compile gives an Executable; jit() the Module
        dev = tvm.cpu()
        rng = np.random.default_rng(0)
        arrays = [tvm.runtime.tensor(rng.uniform(-1, 1, [int(d) for d in t.shape]).astype("float32"), dev)
                  for t in tensors]
        timer = lib.time_evaluator("main", dev, number=10, repeat=15, min_repeat_ms=50)
        res = timer(*arrays)
        side = side_by_side(lib, tensors, dev, a.ours, a.rounds, a.settle) if a.ours else None
        return float(np.median(res.results)), tune_s, side, curve


if __name__ == "__main__":
    main()
