"""Peer implementations (numpy, torch eager, torch.compile) of the CPU suite's workloads."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def peers(w, x: dict[str, np.ndarray], compile_torch: bool = True) -> dict[str, Callable[[], object]]:
    """Callables computing the workload's output from inputs `x`, by peer name."""
    import torch
    import torch.nn.functional as F

    t = {k: torch.from_numpy(v) for k, v in x.items()}
    name, args = w.name, list(w.args)
    fn: Callable | None = None
    npf: Callable | None = None
    if name == "matmul":
        fn = lambda: torch.matmul(t["A"], t["B"])
        npf = lambda: x["A"] @ x["B"]
    elif name == "batch_matmul":
        fn = lambda: torch.bmm(t["A"], t["B"])
        npf = lambda: np.matmul(x["A"], x["B"])
    elif name == "dense_bias_relu":
        fn = lambda: F.relu(F.linear(t["X"], t["W"], t["bias"]))
        npf = lambda: np.maximum(x["X"] @ x["W"].T + x["bias"], 0)
    elif name == "softmax":
        fn = lambda: torch.softmax(t["X"], dim=-1)
        npf = lambda: (lambda e: e / e.sum(1, keepdims=True))(np.exp(x["X"] - x["X"].max(1, keepdims=True)))
    elif name == "layernorm":
        n = args[1]
        fn = lambda: F.layer_norm(t["X"], (n,), t["gamma"], t["beta"], 1e-5)
        npf = lambda: (x["X"] - x["X"].mean(1, keepdims=True)) / np.sqrt(x["X"].var(1, keepdims=True) + 1e-5) \
            * x["gamma"] + x["beta"]
    elif name == "gelu":
        fn = lambda: F.gelu(t["X"], approximate="tanh")
    elif name == "conv2d_nchw":
        stride, pad = args[7], args[8]
        fn = lambda: F.conv2d(t["data"], t["kernel"], stride=stride, padding=pad)
    elif name == "depthwise_conv2d_nchw":
        c, stride, pad = args[1], args[6], args[7]
        fn = lambda: F.conv2d(t["data"], t["kernel"].unsqueeze(1), stride=stride, padding=pad, groups=c)
    out: dict[str, Callable] = {}
    if npf is not None:
        out["numpy"] = npf
    if fn is not None:
        out["torch eager"] = fn
        if compile_torch:
            try:
                cf = torch.compile(fn)
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
