"""Peer implementations (numpy, torch eager, torch.compile) of the CPU suite's workloads.

Our kernels write into a preallocated output, so a peer does too wherever its library offers an
`out=` (torch.matmul, torch.bmm, torch.addmm, torch.softmax, np.matmul and numpy's ufuncs); the
others allocate their result on every call, and `allocates` names them for the results tables.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

# op -> peers that write into a preallocated output; every other peer of the op allocates
# (F.conv2d, F.layer_norm, F.gelu have no out=; torch.compile'd functions return fresh tensors)
PREALLOCATED: dict[str, frozenset[str]] = {
    "matmul": frozenset({"numpy", "torch eager"}),
    "batch_matmul": frozenset({"numpy", "torch eager"}),
    "dense_bias_relu": frozenset({"numpy", "torch eager"}),
    "softmax": frozenset({"numpy", "torch eager"}),
}


def allocates(op: str, peer: str) -> bool:
    """Whether `peer`'s implementation of `op` allocates its output on every call."""
    return peer not in PREALLOCATED.get(op, frozenset())


def _np_softmax(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    np.subtract(x, x.max(1, keepdims=True), out=out)
    np.exp(out, out=out)
    out *= 1.0 / out.sum(1, keepdims=True)
    return out


def _np_dense_bias_relu(x: np.ndarray, w: np.ndarray, bias: np.ndarray, out: np.ndarray) -> np.ndarray:
    np.matmul(x, w.T, out=out)
    out += bias
    np.maximum(out, 0, out=out)
    return out


def peers(w, x: dict[str, np.ndarray], compile_torch: bool = True) -> dict[str, Callable[[], object]]:
    """Callables computing the workload's output from inputs `x`, by peer name."""
    import torch
    import torch.nn.functional as F

    t = {k: torch.from_numpy(v) for k, v in x.items()}
    name, args = w.name, list(w.args)
    o = w.dag.outputs[-1]
    o_np = np.empty(tuple(int(d) for d in o.shape), np.dtype(o.dtype))  # numpy's preallocated output
    o_t = torch.empty(o_np.shape, dtype=getattr(torch, str(o_np.dtype)))  # torch eager's
    fn: Callable | None = None  # torch eager (out= where PREALLOCATED says so)
    alloc: Callable | None = None  # the allocating torch form, for torch.compile
    npf: Callable | None = None
    if name == "matmul":
        fn = lambda: torch.matmul(t["A"], t["B"], out=o_t)
        alloc = lambda: torch.matmul(t["A"], t["B"])
        npf = lambda: np.matmul(x["A"], x["B"], out=o_np)
    elif name == "batch_matmul":
        fn = lambda: torch.bmm(t["A"], t["B"], out=o_t)
        alloc = lambda: torch.bmm(t["A"], t["B"])
        npf = lambda: np.matmul(x["A"], x["B"], out=o_np)
    elif name == "dense_bias_relu":
        fn = lambda: torch.addmm(t["bias"], t["X"], t["W"].T, out=o_t).clamp_min_(0)
        alloc = lambda: F.relu(F.linear(t["X"], t["W"], t["bias"]))
        npf = lambda: _np_dense_bias_relu(x["X"], x["W"], x["bias"], o_np)
    elif name == "softmax":
        fn = lambda: torch.softmax(t["X"], -1, out=o_t)
        alloc = lambda: torch.softmax(t["X"], dim=-1)
        npf = lambda: _np_softmax(x["X"], o_np)
    elif name == "layernorm":
        n = args[1]
        fn = alloc = lambda: F.layer_norm(t["X"], (n,), t["gamma"], t["beta"], 1e-5)
        npf = lambda: (x["X"] - x["X"].mean(1, keepdims=True)) / np.sqrt(x["X"].var(1, keepdims=True) + 1e-5) \
            * x["gamma"] + x["beta"]
    elif name == "gelu":
        fn = alloc = lambda: F.gelu(t["X"], approximate="tanh")
    elif name == "conv2d_nchw":
        stride, pad = args[7], args[8]
        fn = alloc = lambda: F.conv2d(t["data"], t["kernel"], stride=stride, padding=pad)
    elif name == "depthwise_conv2d_nchw":
        c, stride, pad = args[1], args[6], args[7]
        fn = alloc = lambda: F.conv2d(t["data"], t["kernel"].unsqueeze(1), stride=stride, padding=pad, groups=c)
    out: dict[str, Callable] = {}
    if npf is not None:
        out["numpy"] = npf
    if fn is not None:
        out["torch eager"] = fn
        if compile_torch:
            try:
                cf = torch.compile(alloc)
                cf()
                out["torch.compile"] = cf
            except Exception as exc:  # noqa: BLE001  a peer that cannot compile is reported, not fatal
                print(f"torch.compile unavailable for {name}: {type(exc).__name__}: {str(exc)[:200]}")
    return out


def check_peers(contenders: dict[str, Callable[[], object]], ref: np.ndarray) -> dict[str, float]:
    """Each peer's max abs error against the workload's reference output: a peer computing
    something else (a transposed weight, a missing bias) must not pass as a faster kernel."""
    errs = {}
    for name, fn in contenders.items():
        out = fn()
        out = out.detach().numpy() if hasattr(out, "detach") else np.asarray(out)
        if out.shape != ref.shape:
            raise ValueError(f"peer {name!r} returned shape {out.shape}, the workload's output is {ref.shape}")
        errs[name] = float(np.abs(out - ref).max())
    return errs
