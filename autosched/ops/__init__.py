"""The op library: every op is a registered workload (see `autosched.workload`).

Importing this package registers them; `Workload.create(name, ...)` imports it on first use.
Each function can also be called directly and returns the build arguments (inputs, then outputs).
"""

from autosched.ops.conv import conv2d_nchw, depthwise_conv2d_nchw, pad_nchw, pool2d
from autosched.ops.linalg import batch_matmul, dense_bias_relu, matmul
from autosched.ops.nn import gelu, layernorm, softmax
from autosched.ops.tensor_ops import reduce, transpose

__all__ = [
    "batch_matmul", "conv2d_nchw", "dense_bias_relu", "depthwise_conv2d_nchw", "gelu", "layernorm", "matmul",
    "pad_nchw", "pool2d", "reduce", "softmax", "transpose",
]
