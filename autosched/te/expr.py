"""Expression nodes of the tensor-expression language.

Expressions are immutable trees. Python operators build them; `==` keeps Python's identity
meaning (so variables can be dictionary keys) and `te.eq`/`Expr.equal` build comparisons.
The same nodes are used by the lowered loop-nest IR, so the renderers see one expression type.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Sequence
from typing import Any, Protocol

from autosched.dtypes import check_dtype, is_float, promote


class Tensor(Protocol):
    """What an expression needs of a tensor it reads (the class is `autosched.te.tensor.Tensor`)."""

    name: str
    dtype: str
    shape: tuple[int, ...]

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

BINARY_OPS = ("add", "sub", "mul", "div", "floordiv", "mod", "min", "max", "pow",
              "lt", "le", "gt", "ge", "eq", "ne", "and", "or")
COMPARE_OPS = frozenset({"lt", "le", "gt", "ge", "eq", "ne", "and", "or"})
FLOAT_FUNCS = frozenset({"exp", "log", "sqrt", "rsqrt", "tanh", "erf", "sigmoid"})  # ints are cast first
UNARY_FUNCS = ("neg", "exp", "log", "sqrt", "rsqrt", "tanh", "erf", "sigmoid", "abs", "not", "floor", "ceil")


def check_name(name: str, what: str = "name") -> str:
    """Names reach generated source: they must be plain identifiers."""
    if not isinstance(name, str) or not _IDENT.fullmatch(name) or len(name) > 64:  # `$` would allow "A\n"
        raise ValueError(f"invalid {what} {name!r}: use letters, digits and '_' (not starting with a digit)")
    return name


def as_extent(x: Any) -> int | None:
    """`x` as a positive Python int (numpy integers welcome), or None: floats and bools are refused
    rather than truncated, so a shape of 2.5 is an error and not a silent 2."""
    if isinstance(x, bool):
        return None
    try:
        n = operator.index(x)
    except TypeError:
        return None
    return n if n > 0 else None


class Expr:
    """Base of all expression nodes."""

    __slots__ = ("dtype",)
    dtype: str

    # arithmetic -----------------------------------------------------------
    def __add__(self, o: Any) -> Expr:
        return binary("add", self, o)

    def __radd__(self, o: Any) -> Expr:
        return binary("add", o, self)

    def __sub__(self, o: Any) -> Expr:
        return binary("sub", self, o)

    def __rsub__(self, o: Any) -> Expr:
        return binary("sub", o, self)

    def __mul__(self, o: Any) -> Expr:
        return binary("mul", self, o)

    def __rmul__(self, o: Any) -> Expr:
        return binary("mul", o, self)

    def __truediv__(self, o: Any) -> Expr:
        return binary("div", self, o)

    def __rtruediv__(self, o: Any) -> Expr:
        return binary("div", o, self)

    def __floordiv__(self, o: Any) -> Expr:
        return binary("floordiv", self, o)

    def __rfloordiv__(self, o: Any) -> Expr:
        return binary("floordiv", o, self)

    def __mod__(self, o: Any) -> Expr:
        return binary("mod", self, o)

    def __rmod__(self, o: Any) -> Expr:
        return binary("mod", o, self)

    def __pow__(self, o: Any) -> Expr:
        return binary("pow", self, o)

    def __neg__(self) -> Expr:
        return Call("neg", (self,), self.dtype)

    def __lt__(self, o: Any) -> Expr:
        return binary("lt", self, o)

    def __le__(self, o: Any) -> Expr:
        return binary("le", self, o)

    def __gt__(self, o: Any) -> Expr:
        return binary("gt", self, o)

    def __ge__(self, o: Any) -> Expr:
        return binary("ge", self, o)

    def __and__(self, o: Any) -> Expr:
        return binary("and", self, o)

    def __or__(self, o: Any) -> Expr:
        return binary("or", self, o)

    def __invert__(self) -> Expr:
        return Call("not", (self,), "bool")

    def equal(self, o: Any) -> Expr:
        return binary("eq", self, o)

    def __eq__(self, o: object) -> bool:
        if isinstance(o, int | float) and not isinstance(o, bool):
            raise TypeError("`==` between a te expression and a number is not a comparison: "
                            "use te.eq(a, b) (or a.equal(b))")
        return self is o

    def __ne__(self, o: object) -> bool:
        if isinstance(o, int | float) and not isinstance(o, bool):
            raise TypeError("`!=` between a te expression and a number is not a comparison: use te.ne(a, b)")
        return self is not o

    def __bool__(self) -> bool:
        raise TypeError("a te expression has no truth value: "
                        "use te.if_then_else / te.all instead of `if`/`and`")

    __hash__ = object.__hash__

    def astype(self, dtype: str) -> Expr:
        return Cast(check_dtype(dtype), self)


class Const(Expr):
    __slots__ = ("value",)

    def __init__(self, value: float | int | bool, dtype: str) -> None:
        self.value = value
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"Const({self.value!r}, {self.dtype})"


class Var(Expr):
    """A scalar integer variable: loop variables of the lowered IR."""

    __slots__ = ("name",)

    def __init__(self, name: str, dtype: str = "int32") -> None:
        self.name = name
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"Var({self.name})"


class IterVar(Var):
    """An axis of a compute: spatial ("spatial") or reduction ("reduce"), with a constant extent."""

    __slots__ = ("extent", "kind")

    def __init__(self, name: str, extent: int, kind: str) -> None:
        super().__init__(check_name(name, "axis name"), "int32")
        n = as_extent(extent)
        if n is None:
            raise ValueError(f"axis {name!r}: extent must be a positive int, got {extent!r}")
        self.extent = n
        self.kind = kind

    def __repr__(self) -> str:
        return f"IterVar({self.name}, {self.extent}, {self.kind})"


class Binary(Expr):
    __slots__ = ("op", "a", "b")

    def __init__(self, op: str, a: Expr, b: Expr, dtype: str) -> None:
        self.op, self.a, self.b, self.dtype = op, a, b, dtype


class Call(Expr):
    """An intrinsic function applied elementwise (exp, log, ..., neg, not)."""

    __slots__ = ("func", "args")

    def __init__(self, func: str, args: tuple[Expr, ...], dtype: str) -> None:
        self.func, self.args, self.dtype = func, args, dtype


class Cast(Expr):
    __slots__ = ("value",)

    def __init__(self, dtype: str, value: Expr) -> None:
        self.dtype, self.value = dtype, value


class Select(Expr):
    """`cond ? t : f`; only the chosen branch is evaluated (padding reads rely on that)."""

    __slots__ = ("cond", "t", "f")

    def __init__(self, cond: Expr, t: Expr, f: Expr, dtype: str) -> None:
        self.cond, self.t, self.f, self.dtype = cond, t, f, dtype


class TensorRead(Expr):
    __slots__ = ("tensor", "indices")

    def __init__(self, tensor: Tensor, indices: tuple[Expr, ...]) -> None:
        self.tensor, self.indices, self.dtype = tensor, indices, tensor.dtype


class Reducer:
    """A commutative reduction: `combine(x, y)` over two variables and an identity per dtype."""

    def __init__(
        self, name: str, combine: Expr, lhs: Var, rhs: Var, identity: dict[str, float] | float
    ) -> None:
        self.name = check_name(name, "reducer name")
        self.combine, self.lhs, self.rhs = combine, lhs, rhs
        self.identity_spec = identity

    def __reduce__(self) -> Any:
        # builtins are recognized by identity (JSON writes them by name, the reference takes the
        # numpy fast path): a pickled te.sum must come back as te.sum, not as a lookalike copy
        if builtin_reducer_name(self) is not None:
            return (_builtin_reducer, (self.name,))
        return (Reducer, (self.name, self.combine, self.lhs, self.rhs, self.identity_spec))

    def identity(self, dtype: str) -> Const:
        spec = self.identity_spec
        val = spec.get(dtype, spec.get("default")) if isinstance(spec, dict) else spec
        if val is None:
            raise ValueError(f"reducer {self.name!r} has no identity for dtype {dtype}")
        if not is_float(dtype) and isinstance(val, float) and math.isinf(val):
            val = -(2 ** 31) if val < 0 else 2 ** 31 - 1
            if dtype == "int64":
                val = -(2 ** 63) if val < 0 else 2 ** 63 - 1
        return Const(val if is_float(dtype) else int(val), dtype)

    def __call__(self, expr: Expr, axis: IterVar | Sequence[IterVar], where: Expr | None = None) -> Reduce:
        if not isinstance(axis, IterVar) and not (isinstance(axis, list | tuple) and axis):
            # te.max(a, b) with two values: the elementwise combine, as in TVM
            return _elementwise(self, expr, axis)
        axes = (axis,) if isinstance(axis, IterVar) else tuple(axis)
        if not axes:
            raise ValueError(f"te.{self.name}: needs at least one reduce axis")
        for ax in axes:
            if not isinstance(ax, IterVar) or ax.kind != "reduce":
                raise ValueError(f"te.{self.name}: axis {ax!r} is not a reduce axis "
                                 "(make it with te.reduce_axis)")
        src = as_expr(expr)
        if where is not None:
            src = Select(as_expr(where), src, self.identity(src.dtype), src.dtype)
        return Reduce(self, src, axes)


def _builtin_reducer(name: str) -> Reducer:
    return BUILTIN_REDUCERS[name]


# the builtin reducers, recognized by identity (JSON writes them by name; the reference takes numpy's path)
_lx, _ly = Var("x", "float64"), Var("y", "float64")
BUILTIN_REDUCERS: dict[str, Reducer] = {
    "sum": Reducer("sum", Binary("add", _lx, _ly, "float64"), _lx, _ly, 0.0),
    "max": Reducer("max", Binary("max", _lx, _ly, "float64"), _lx, _ly, float("-inf")),
    "min": Reducer("min", Binary("min", _lx, _ly, "float64"), _lx, _ly, float("inf")),
}


def builtin_reducer_name(r: Reducer) -> str | None:
    """"sum", "max" or "min" when `r` is that builtin reducer itself, else None: a user's reducer is
    known by what it combines, never by its name (a custom reducer may be called "sum" and multiply)."""
    return r.name if BUILTIN_REDUCERS.get(r.name) is r else None


def _elementwise(r: Reducer, a: Any, b: Any) -> Expr:
    if isinstance(r.combine, Binary) and r.combine.a is r.lhs and r.combine.b is r.rhs:
        return binary(r.combine.op, a, b)
    raise ValueError(f"te.{r.name}(a, b): elementwise use needs a simple binary reducer")


class Reduce(Expr):
    """A reduction; it must be the whole body of a compute (as in TVM)."""

    __slots__ = ("reducer", "source", "axes")

    def __init__(self, reducer: Reducer, source: Expr, axes: tuple[IterVar, ...]) -> None:
        self.reducer, self.source, self.axes, self.dtype = reducer, source, axes, source.dtype


# ---------------------------------------------------------------------------------------------


def as_expr(x: Any, dtype_hint: str | None = None) -> Expr:
    """Lift Python scalars to constants (taking the other operand's dtype, as TVM does)."""
    if isinstance(x, Expr):
        return x
    if isinstance(x, bool):
        return Const(x, "bool")
    if isinstance(x, int):
        fits32 = -(2 ** 31) <= x < 2 ** 31
        if dtype_hint is not None and dtype_hint != "bool":
            if is_float(dtype_hint):
                return Const(float(x), dtype_hint)
            # `i + 2**40` must not become an int32 constant that C would truncate
            return Const(x, dtype_hint if fits32 or dtype_hint != "int32" else "int64")
        return Const(x, "int32" if fits32 else "int64")
    if isinstance(x, float):
        if dtype_hint is not None and is_float(dtype_hint):
            return Const(x, dtype_hint)
        return Const(x, "float32")
    raise TypeError(f"cannot use {type(x).__name__} {x!r} in a tensor expression")


def binary(op: str, a: Any, b: Any) -> Expr:
    if isinstance(a, Expr) and not isinstance(b, Expr):
        b = as_expr(b, a.dtype)
    elif isinstance(b, Expr) and not isinstance(a, Expr):
        a = as_expr(a, b.dtype)
    else:
        a, b = as_expr(a), as_expr(b)
    if isinstance(a, Reduce) or isinstance(b, Reduce):
        raise ValueError("a reduction (te.sum/max/min) must be the whole body of a compute; "
                         "put arithmetic on it in a later stage")
    if op in COMPARE_OPS:
        return Binary(op, a, b, "bool")
    dtype = promote(a.dtype, b.dtype)
    if op == "div" and not is_float(dtype):
        op = "floordiv"  # integer `/` is floor division (index arithmetic)
    return Binary(op, a, b, dtype)


def call(func: str, *args: Any) -> Expr:
    xs = tuple(as_expr(a) for a in args)
    dtype = xs[0].dtype
    if func in FLOAT_FUNCS and not is_float(dtype):
        dtype = "float32"
        xs = tuple(Cast("float32", x) for x in xs)
    return Call(func, xs, dtype)


def children(e: Expr) -> tuple[Expr, ...]:
    if isinstance(e, Binary):
        return (e.a, e.b)
    if isinstance(e, Call):
        return e.args
    if isinstance(e, Cast):
        return (e.value,)
    if isinstance(e, Select):
        return (e.cond, e.t, e.f)
    if isinstance(e, TensorRead):
        return e.indices
    if isinstance(e, Reduce):
        return (e.source,)
    return ()


def walk(e: Expr):
    """Pre-order traversal."""
    stack = [e]
    while stack:
        x = stack.pop()
        yield x
        stack.extend(reversed(children(x)))


def rebuild(e: Expr, kids: Sequence[Expr]) -> Expr:
    """A copy of `e` with new children (same kind and attributes)."""
    if isinstance(e, Binary):
        return Binary(e.op, kids[0], kids[1], e.dtype)
    if isinstance(e, Call):
        return Call(e.func, tuple(kids), e.dtype)
    if isinstance(e, Cast):
        return Cast(e.dtype, kids[0])
    if isinstance(e, Select):
        return Select(kids[0], kids[1], kids[2], e.dtype)
    if isinstance(e, TensorRead):
        return TensorRead(e.tensor, tuple(kids))
    if isinstance(e, Reduce):
        return Reduce(e.reducer, kids[0], e.axes)
    return e


def transform(e: Expr, fn) -> Expr:
    """Bottom-up rewrite: `fn(node_with_rewritten_children)` returns a replacement or None."""
    kids = children(e)
    if kids:
        new = [transform(k, fn) for k in kids]
        if any(n is not k for n, k in zip(new, kids)):
            e = rebuild(e, new)
    out = fn(e)
    return e if out is None else out


def substitute(e: Expr, mapping: dict[Var, Expr]) -> Expr:
    """Replace variables (by identity)."""
    if not mapping:
        return e
    return transform(e, lambda x: mapping.get(x) if isinstance(x, Var) else None)
