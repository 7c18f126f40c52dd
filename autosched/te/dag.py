"""`ComputeDAG`: the stages of a tensor program in topological order, its FLOPs, JSON and reference."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from autosched.dtypes import is_float, np_dtype
from autosched.te.expr import Binary, Call, Expr, IterVar, Reduce, Select, TensorRead, check_name, children, substitute
from autosched.te.reference import evaluate_dag
from autosched.te.serialize import DAGFormatError, expr_from_json, expr_to_json
from autosched.te.tensor import ComputeOp, PlaceholderOp, Tensor, compute, placeholder
from tuning_db.canonical import canonical_json, sha256_text

FORMAT_VERSION = 1
_FLOP_BINARY = frozenset({"add", "sub", "mul", "div", "min", "max", "pow"})


def _count_flops(e: Expr) -> int:
    """Arithmetic on values (float or integer), not on indices: the operands of a read and the
    condition of a select are address/predicate computations, so an int32 matmul counts 2MNK like
    a float one (an earlier version counted the multiply only for floats but the add always)."""
    n = 0
    stack = [e]
    while stack:
        node = stack.pop()
        if isinstance(node, TensorRead):
            continue
        if isinstance(node, Binary) and node.op in _FLOP_BINARY:
            n += 1
        elif isinstance(node, Call) and node.func not in ("neg", "not"):
            n += 1
        if isinstance(node, Select):
            stack.extend((node.t, node.f))
        else:
            stack.extend(children(node))
    return n


class ComputeDAG:
    """All operations reachable from `outputs`, in a deterministic topological order.

    The order is a depth-first walk from the outputs, each op's inputs in the order its body reads
    them; several outputs are walked in the order of their structure (`structure_key`), not the order
    the caller listed them in, so that the stages (and the search space built on them) follow what
    the program computes, never how its author declared it (issue 29)."""

    def __init__(self, outputs: Tensor | Sequence[Tensor]) -> None:
        outs = [outputs] if isinstance(outputs, Tensor) else list(outputs)
        if not outs:
            raise ValueError("ComputeDAG needs at least one output tensor")
        for t in outs:
            if not isinstance(t, Tensor):
                raise TypeError(f"ComputeDAG outputs must be tensors, got {type(t).__name__}")
        order, by_name = _post_order(outs)  # checks cycles and names first
        if len(outs) > 1:
            order, by_name = _post_order(sorted(outs, key=structure_key))  # stable: isomorphic ties keep theirs
        self.tensors: list[Tensor] = order
        self.outputs: list[Tensor] = outs
        self.by_name = by_name

    @property
    def placeholders(self) -> list[Tensor]:
        return [t for t in self.tensors if isinstance(t.op, PlaceholderOp)]

    @property
    def computes(self) -> list[Tensor]:
        return [t for t in self.tensors if isinstance(t.op, ComputeOp)]

    def __getitem__(self, name: str) -> Tensor:
        if name not in self.by_name:
            raise KeyError(f"no tensor named {name!r} in the DAG; tensors: {list(self.by_name)}")
        return self.by_name[name]

    def consumers(self, t: Tensor) -> list[Tensor]:
        return [c for c in self.computes if any(i is t for i in c.op.input_tensors())]

    def flop_count(self) -> float:
        total = 0
        for t in self.computes:
            op = t.op
            points = int(np.prod(op.shape))
            if isinstance(op.body, Reduce):
                points *= int(np.prod([a.extent for a in op.reduce_axis]))
                total += points * (_count_flops(op.body.source) + 1)
            else:
                total += points * _count_flops(op.body)
        return float(total)

    # ---- JSON ---------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        ops = []
        for t in self.tensors:
            op = t.op
            if isinstance(op, PlaceholderOp):
                ops.append({"name": op.name, "kind": "placeholder", "shape": list(op.shape),
                            "dtype": op.dtype})
            else:
                ops.append({
                    "name": op.name, "kind": "compute",
                    "axis": [[a.name, a.extent] for a in op.axis],
                    "reduce_axis": [[a.name, a.extent] for a in op.reduce_axis],
                    "body": expr_to_json(op.body), "dtype": op.dtype, "tag": op.tag,
                })
        return {"format": "autosched-dag", "version": FORMAT_VERSION, "ops": ops,
                "outputs": [t.name for t in self.outputs]}

    def to_json(self) -> str:
        return canonical_json(self.to_dict(), allow_nan=True)

    @property
    def key(self) -> str:
        """sha256 of the canonical JSON: identical programs share a key."""
        return sha256_text(self.to_json())

    def canonical(self) -> ComputeDAG:
        """The same program with every name replaced by its place (`_positional_ops`): DAGs that differ
        only in their names and declaration order have one canonical form, and so one search space
        with the same knob names (how tuning matches the knobs of two workloads)."""
        pos = {id(t): k for k, t in enumerate(self.tensors)}
        outs = [f"t{pos[id(t)]}" for t in sorted(self.outputs, key=lambda t: pos[id(t)])]
        return ComputeDAG.from_dict({"format": "autosched-dag", "version": FORMAT_VERSION,
                                     "ops": _positional_ops(self.tensors), "outputs": outs})

    @staticmethod
    def from_dict(d: dict[str, Any]) -> ComputeDAG:
        if not isinstance(d, dict) or d.get("format") != "autosched-dag":
            raise DAGFormatError("not an autosched DAG (missing format 'autosched-dag')")
        if d.get("version") != FORMAT_VERSION:
            raise DAGFormatError(f"unsupported DAG version {d.get('version')!r}; "
                                 f"this build reads {FORMAT_VERSION}")
        tensors: dict[str, Tensor] = {}
        try:
            for o in d["ops"]:
                name = check_name(o["name"], "tensor name")
                if name in tensors:
                    raise DAGFormatError(f"tensor {name!r} defined twice")
                if o["kind"] == "placeholder":
                    tensors[name] = placeholder(tuple(o["shape"]), name, o["dtype"])
                elif o["kind"] == "compute":
                    tensors[name] = _compute_from_json(o, tensors)
                else:
                    raise DAGFormatError(f"op {name!r}: unknown kind {o['kind']!r}")
            outs = [tensors[n] for n in d["outputs"]]
        except KeyError as exc:
            raise DAGFormatError(f"missing field or tensor {exc}") from None
        except (TypeError, ValueError) as exc:
            if isinstance(exc, DAGFormatError):
                raise
            raise DAGFormatError(str(exc)) from None
        return ComputeDAG(outs)

    @staticmethod
    def from_json(text: str) -> ComputeDAG:
        try:
            d = json.loads(text)
            if isinstance(d, dict) and d.get("format") != "autosched-dag" and isinstance(d.get("dag"), dict):
                d = d["dag"]  # a workload envelope carries its DAG
            return ComputeDAG.from_dict(d)
        except json.JSONDecodeError as exc:
            raise DAGFormatError(f"DAG is not valid JSON: {exc}") from None
        except RecursionError:
            raise DAGFormatError("DAG JSON is nested too deeply") from None

    # ---- reference ----------------------------------------------------------------------------
    def random_inputs(self, seed: int = 0) -> dict[str, np.ndarray]:
        """Placeholder values: uniform in [-1, 1) for floats, small ints for ints, fixed seed."""
        rng = np.random.default_rng(seed)
        out = {}
        for t in self.placeholders:
            if is_float(t.dtype):
                arr = rng.uniform(-1.0, 1.0, size=t.shape)
            else:
                arr = rng.integers(-8, 8, size=t.shape)
            out[t.name] = np.ascontiguousarray(arr.astype(np_dtype(t.dtype)))
        return out

    def evaluate(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """numpy reference: every computed tensor by name (see `autosched.te.reference`)."""
        return evaluate_dag(self, inputs)


def _post_order(outs: Sequence[Tensor]) -> tuple[list[Tensor], dict[str, Tensor]]:
    """Every tensor reachable from `outs`, inputs before their readers, and the tensors by name."""
    order: list[Tensor] = []
    state: dict[int, int] = {}
    by_name: dict[str, Tensor] = {}

    def visit(t: Tensor) -> None:
        s = state.get(id(t))
        if s == 2:
            return
        if s == 1:
            raise ValueError(f"cycle through tensor {t.name!r}")
        state[id(t)] = 1
        for inp in t.op.input_tensors():
            visit(inp)
        state[id(t)] = 2
        other = by_name.get(t.name)
        if other is not None and other is not t:
            raise ValueError(f"two different tensors are both named {t.name!r}; "
                             "give each stage its own name")
        by_name[t.name] = t
        order.append(t)

    for t in outs:
        visit(t)
    return order, by_name


def _renamed(j: Any, axes: dict[str, str], tensors: dict[str, str]) -> Any:
    """An expression's JSON with its loops and tensors renamed, and custom reducers named `reducer`."""
    if not isinstance(j, list) or not j or j[0] == "c":
        return j
    if j[0] == "v":
        return ["v", axes.get(j[1], j[1])]
    if j[0] == "read":
        return ["read", tensors[j[1]], _renamed(j[2], axes, tensors)]
    if j[0] == "reduce":
        red = j[1] if isinstance(j[1], str) else {**j[1], "name": "reducer"}
        return ["reduce", red, _renamed(j[2], axes, tensors), [axes[n] for n in j[3]]]
    return [_renamed(x, axes, tensors) for x in j]


def _positional_ops(order: list[Tensor]) -> list[dict[str, Any]]:
    """The ops of `order` as `to_dict` writes them, with no name of the author's left: each tensor named
    by its place in `order` (t0, t1...), each loop by its place in its op (a0... spatial, r0...
    reduction), custom reducers `reducer`, no tags."""
    names = {t.name: f"t{k}" for k, t in enumerate(order)}
    ops: list[dict[str, Any]] = []
    for t in order:
        op = t.op
        if isinstance(op, PlaceholderOp):
            ops.append({"name": names[t.name], "kind": "placeholder", "shape": list(op.shape), "dtype": op.dtype})
            continue
        axes = {a.name: f"r{d}" for d, a in enumerate(op.reduce_axis)}
        axes.update({a.name: f"a{d}" for d, a in enumerate(op.axis)})
        ops.append({"name": names[t.name], "kind": "compute",
                    "axis": [[f"a{d}", a.extent] for d, a in enumerate(op.axis)],
                    "reduce_axis": [[f"r{d}", a.extent] for d, a in enumerate(op.reduce_axis)],
                    "body": _renamed(expr_to_json(op.body), axes, names), "dtype": op.dtype, "tag": ""})
    return ops


def structure_key(root: Tensor) -> str:
    """What `root` computes and from what, with no name in it (`_positional_ops` of its sub-DAG): equal
    for the same program written with other names or declared in another order. The tie-break among
    a DAG's outputs."""
    return canonical_json(_positional_ops(_post_order([root])[0]), allow_nan=True)


def _compute_from_json(o: dict[str, Any], tensors: dict[str, Tensor]) -> Tensor:
    axis = [IterVar(n, e, "spatial") for n, e in o["axis"]]  # IterVar rejects non-int extents
    raxis = [IterVar(n, e, "reduce") for n, e in o["reduce_axis"]]
    if not isinstance(o.get("tag", ""), str):
        raise DAGFormatError(f"compute {o['name']!r}: tag must be a string")
    vars_ = {a.name: a for a in axis + raxis}
    if len(vars_) != len(axis) + len(raxis):
        raise DAGFormatError(f"compute {o['name']!r}: duplicate axis names")
    body = expr_from_json(o["body"], vars_, tensors)
    if body.dtype != o["dtype"]:
        raise DAGFormatError(f"compute {o['name']!r}: body dtype {body.dtype} != declared {o['dtype']}")
    return compute(tuple(a.extent for a in axis), _const_fn(body, axis), o["name"], tag=o.get("tag", ""),
                   axis_names=[a.name for a in axis])


def _const_fn(body: Expr, axis: list[IterVar]):
    """fcompute that returns the loaded body with `compute`'s fresh axes substituted in."""
    def f(*new_axis: IterVar) -> Expr:
        mapping = dict(zip(axis, new_axis))
        if isinstance(body, Reduce):
            return Reduce(body.reducer, substitute(body.source, mapping), body.axes)
        return substitute(body, mapping)

    return f
