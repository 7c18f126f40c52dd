"""The tensor-expression language: describe an operator, then schedule it."""

from autosched.te.dag import ComputeDAG
from autosched.te.expr import Expr, IterVar, Reduce, Reducer, Var
from autosched.te.intrin import (
    abs,
    all,
    any,
    cast,
    ceil,
    eq,
    erf,
    exp,
    floor,
    if_then_else,
    log,
    maximum,
    minimum,
    ne,
    pow,
    power,
    rsqrt,
    sigmoid,
    sqrt,
    tanh,
)
from autosched.te.read_bounds import ReadOutOfBoundsError
from autosched.te.serialize import DAGFormatError
from autosched.te.tensor import (
    ComputeOp,
    PlaceholderOp,
    Tensor,
    comm_reducer,
    compute,
    const,
    max,
    min,
    placeholder,
    reduce_axis,
    sum,
)

__all__ = [
    "ComputeDAG", "ComputeOp", "DAGFormatError", "Expr", "IterVar", "PlaceholderOp", "ReadOutOfBoundsError", "Reduce",
    "Reducer", "Tensor", "Var", "abs", "all", "any", "cast", "ceil", "comm_reducer", "compute", "const", "eq", "erf",
    "exp", "floor", "if_then_else", "log", "max", "maximum", "min", "minimum", "ne", "placeholder", "pow",
    "power", "reduce_axis", "rsqrt", "sigmoid", "sqrt", "sum", "tanh",
]
