"""Torch eager twins of the generality suite's operators (`generality_dags.WORKLOADS`).

Each twin is `fn(shape, *inputs, out=None)` with the inputs in the DAG's build order; it writes into
`out` wherever torch offers an `out=` or an in-place form (so a twin allocates only where torch has
no such form: convolutions, pooling, layer_norm), and returns the output. torch is imported on first
call, so the TVM environment can import the suite's builders without it.
"""

from __future__ import annotations

from typing import Any

Shape = tuple[int, ...]


def _F() -> Any:
    import torch.nn.functional as F

    return F


def _torch() -> Any:
    import torch

    return torch


def t_matmul_nn(shape: Shape, a: Any, b: Any, out: Any = None) -> Any:
    return _torch().matmul(a, b, out=out)


def t_matmul_nt(shape: Shape, a: Any, b: Any, out: Any = None) -> Any:
    return _torch().matmul(a, b.T, out=out)


def t_matmul_tn(shape: Shape, a: Any, b: Any, out: Any = None) -> Any:
    return _torch().matmul(a.T, b, out=out)


def t_matmul_tt(shape: Shape, a: Any, b: Any, out: Any = None) -> Any:
    return _torch().matmul(a.T, b.T, out=out)


def t_bmm(shape: Shape, a: Any, b: Any, out: Any = None) -> Any:
    return _torch().bmm(a, b, out=out)


def t_dense_bias_relu(shape: Shape, x: Any, w: Any, bias: Any, out: Any = None) -> Any:
    return _torch().addmm(bias, x, w.T, out=out).clamp_min_(0.0)


def t_matmul_softmax(shape: Shape, x: Any, w: Any, out: Any = None) -> Any:
    torch = _torch()
    s = torch.matmul(x, w, out=out)
    return torch.softmax(s, -1, out=s)  # in place: softmax reads a row before it writes it


def t_matmul_bias_gelu(shape: Shape, x: Any, w: Any, bias: Any, out: Any = None) -> Any:
    torch = _torch()
    h = torch.addmm(bias, x, w, out=out)
    torch._C._nn.gelu_(h)  # F.gelu has no out=; the in-place form allocates nothing
    return h


def t_conv2d(shape: Shape, data: Any, kernel: Any, out: Any = None) -> Any:
    *_, stride, pad, dil = shape
    return _F().conv2d(data, kernel, stride=stride, padding=pad, dilation=dil)


def t_depthwise(shape: Shape, data: Any, kernel: Any, out: Any = None) -> Any:
    c, stride, pad = shape[1], shape[6], shape[7]
    return _F().conv2d(data, kernel.unsqueeze(1), stride=stride, padding=pad, groups=c)


def t_max_pool(shape: Shape, data: Any, out: Any = None) -> Any:
    win, stride, pad = shape[4:7]
    return _F().max_pool2d(data, win, stride, pad)


def t_avg_pool(shape: Shape, data: Any, out: Any = None) -> Any:
    win, stride = shape[4:6]
    return _F().avg_pool2d(data, win, stride)


def t_reduce_rows(shape: Shape, x: Any, out: Any = None) -> Any:
    return _torch().sum(x, 1, out=out)


def t_reduce_cols(shape: Shape, x: Any, out: Any = None) -> Any:
    return _torch().sum(x, 0, out=out)


def t_reduce_mid(shape: Shape, x: Any, out: Any = None) -> Any:
    return _torch().amax(x, 1, out=out)


def t_reduce_outer_inner(shape: Shape, x: Any, out: Any = None) -> Any:
    return _torch().sum(x, (0, 2), out=out)


def t_softmax(shape: Shape, x: Any, out: Any = None) -> Any:
    return _torch().softmax(x, -1, out=out)


def t_layernorm(shape: Shape, x: Any, gamma: Any, beta: Any, out: Any = None) -> Any:
    return _F().layer_norm(x, (shape[1],), gamma, beta, 1e-5)


def t_chain_tanh(shape: Shape, x: Any, a: Any, b: Any, out: Any = None) -> Any:
    torch = _torch()
    y = torch.mul(x, a, out=out)
    return y.add_(b).tanh_().mul_(x)


def t_chain_silu(shape: Shape, x: Any, mu: Any, s: Any, out: Any = None) -> Any:
    torch = _torch()
    y = torch.sub(x, mu[:, None], out=out)
    _F().silu(y, inplace=True)
    return y.mul_(s)
