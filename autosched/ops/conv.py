"""Sliding-window ops in NCHW: conv2d, depthwise conv2d and 2-D pooling.

Padding is its own stage (`pad`, an `if_then_else` on the bounds) when there is any, as in TVM:
the schedule can inline it into the window loops or materialize it; a zero padding adds no stage.
Windows use floor mode (no ceil_mode), like PyTorch's defaults.
"""

from __future__ import annotations

from autosched import te
from autosched.ops import _args as a
from autosched.te import Tensor
from autosched.workload import workload


def pad_nchw(data: Tensor, pad: tuple[int, int, int, int], value: float | int) -> Tensor:
    """`data` [N, C, H, W] padded by (top, left, bottom, right) with `value`, or `data` itself."""
    top, left, bottom, right = pad
    if not any(pad):
        return data
    N, C, H, W = data.shape
    shape = (N, C, H + top + bottom, W + left + right)

    def f(n, c, h, w):
        inside = te.all(h >= top, h < H + top, w >= left, w < W + left)
        return te.if_then_else(inside, data[n, c, h - top, w - left], te.const(value, data.dtype))

    return te.compute(shape, f, "pad")


def _window(op: str, N, C, H, W, R, S, stride, padding, dilation):
    """Validated sizes of a 2-D window op: dims, (R, S), strides, 4-side padding, dilations, (OH, OW)."""
    N, C, H, W, R, S = (a.pos_int(op, n, v) for n, v in zip("NCHWRS", (N, C, H, W, R, S)))
    sh, sw = a.pair(op, "stride", stride, 1)
    pad = a.padding4(op, padding)
    dh, dw = a.pair(op, "dilation", dilation, 1)
    oh = a.out_size(op, H, pad[0] + pad[2], R, sh, dh, "height")
    ow = a.out_size(op, W, pad[1] + pad[3], S, sw, dw, "width")
    return (N, C, H, W), (R, S), (sh, sw), pad, (dh, dw), (oh, ow)


@workload("conv2d_nchw")
def conv2d_nchw(N: int, C: int, H: int, W: int, K: int, R: int, S: int, stride: int | tuple[int, int] = 1,
                padding: int | tuple[int, ...] = 0, dilation: int | tuple[int, int] = 1,
                dtype: str = "float32") -> list[Tensor]:
    """conv[n, f, y, x] = sum_{rc, ry, rx} pad[n, rc, y*sh + ry*dh, x*sw + rx*dw] * kernel[f, rc, ry, rx].

    data [N, C, H, W], kernel [K, C, R, S] (torch's conv2d, groups=1). stride and dilation: int or
    (h, w); padding: int, (h, w) or (top, left, bottom, right)."""
    op = "conv2d_nchw"
    K = a.pos_int(op, "K", K)
    (N, C, H, W), (R, S), (sh, sw), pad, (dh, dw), (oh, ow) = _window(op, N, C, H, W, R, S, stride, padding,
                                                                        dilation)
    dtype = a.dtype(op, dtype)
    data = te.placeholder((N, C, H, W), "data", dtype)
    kernel = te.placeholder((K, C, R, S), "kernel", dtype)
    p = pad_nchw(data, pad, 0)
    rc, ry, rx = te.reduce_axis(C, "rc"), te.reduce_axis(R, "ry"), te.reduce_axis(S, "rx")
    conv = te.compute(
        (N, K, oh, ow),
        lambda n, f, y, x: te.sum(p[n, rc, y * sh + ry * dh, x * sw + rx * dw] * kernel[f, rc, ry, rx],
                                  axis=[rc, ry, rx]),
        "conv",
    )
    return [data, kernel, conv]


@workload("depthwise_conv2d_nchw")
def depthwise_conv2d_nchw(N: int, C: int, H: int, W: int, R: int, S: int, stride: int | tuple[int, int] = 1,
                          padding: int | tuple[int, ...] = 0, dilation: int | tuple[int, int] = 1,
                          dtype: str = "float32") -> list[Tensor]:
    """conv[n, c, y, x] = sum_{ry, rx} pad[n, c, y*sh + ry*dh, x*sw + rx*dw] * kernel[c, ry, rx].

    kernel [C, R, S] (channel multiplier 1: torch's conv2d with groups=C and a [C, 1, R, S] weight)."""
    op = "depthwise_conv2d_nchw"
    (N, C, H, W), (R, S), (sh, sw), pad, (dh, dw), (oh, ow) = _window(op, N, C, H, W, R, S, stride, padding,
                                                                        dilation)
    dtype = a.dtype(op, dtype)
    data = te.placeholder((N, C, H, W), "data", dtype)
    kernel = te.placeholder((C, R, S), "kernel", dtype)
    p = pad_nchw(data, pad, 0)
    ry, rx = te.reduce_axis(R, "ry"), te.reduce_axis(S, "rx")
    conv = te.compute(
        (N, C, oh, ow),
        lambda n, c, y, x: te.sum(p[n, c, y * sh + ry * dh, x * sw + rx * dw] * kernel[c, ry, rx],
                                  axis=[ry, rx]),
        "conv",
    )
    return [data, kernel, conv]


@workload("pool2d")
def pool2d(N: int, C: int, H: int, W: int, kernel: int | tuple[int, int], stride: int | tuple[int, int] = 1,
           padding: int | tuple[int, ...] = 0, kind: str = "max", dtype: str = "float32") -> list[Tensor]:
    """Max or average pooling over kernel windows of data [N, C, H, W].

    Max pooling pads with the dtype's lowest value (-inf for floats), so padding never wins.
    Average pooling divides by the full window size kh*kw, padding included: PyTorch's
    `count_include_pad=True` (its default), not TVM's default (which excludes the padding).
    As in PyTorch, padding may be at most half the kernel on each side, so no window lies wholly
    in the padding. Average pooling needs a float dtype (an integer mean would truncate).
    """
    op = "pool2d"
    kind = a.choice(op, "kind", kind, ("max", "avg"))
    kh, kw = a.pair(op, "kernel", kernel, 1)
    (N, C, H, W), _, (sh, sw), pad, _, (oh, ow) = _window(op, N, C, H, W, kh, kw, stride, padding, 1)
    if max(pad[0], pad[2]) > kh // 2 or max(pad[1], pad[3]) > kw // 2:
        raise ValueError(f"{op}: argument 'padding' {padding!r} must be at most half the kernel {(kh, kw)}")
    dtype = a.dtype(op, dtype, float_only=kind == "avg")
    data = te.placeholder((N, C, H, W), "data", dtype)
    low = te.max.identity(dtype).value  # -inf, or the integer minimum
    p = pad_nchw(data, pad, low if kind == "max" else 0)
    ry, rx = te.reduce_axis(kh, "ry"), te.reduce_axis(kw, "rx")
    red = te.max if kind == "max" else te.sum
    name = "pool" if kind == "max" else "pool_sum"
    pooled = te.compute(
        (N, C, oh, ow), lambda n, c, y, x: red(p[n, c, y * sh + ry, x * sw + rx], axis=[ry, rx]), name
    )
    if kind == "avg":
        count = float(kh * kw)
        pooled = te.compute((N, C, oh, ow), lambda n, c, y, x: pooled[n, c, y, x] / count, "pool")
    return [data, pooled]
