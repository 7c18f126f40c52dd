"""Turning a request's workload into a `Workload`, within the deployment's limits.

Sizes are checked on the JSON before anything is built where that is possible (a DAG's node
count and nesting depth: the expression parser recurses), and on the built DAG after (tensor
elements and loop points: an op's shapes are computed by its function). Any failure to build a
workload from user input is the user's error and comes back as `WorkloadRequestError` (422)
naming what is wrong; nothing here executes code from the request.
"""

from __future__ import annotations

import math
from typing import Any

from autosched.service.schemas import DagWorkload, OpWorkload
from autosched.service.settings import ServiceSettings
from autosched.workload import Workload, registered_workloads


class WorkloadRequestError(ValueError):
    """The workload of a request is malformed or over a limit (HTTP 422)."""


def _as_python(v: Any) -> Any:
    return [_as_python(x) for x in v] if isinstance(v, list) else v


def json_shape(value: Any, max_nodes: int) -> tuple[int, int]:
    """(node count, depth) of a JSON value without recursion; stops counting past `max_nodes`."""
    nodes, depth = 0, 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack and nodes <= max_nodes:
        v, d = stack.pop()
        nodes += 1
        depth = max(depth, d)
        if isinstance(v, list):
            stack.extend((x, d + 1) for x in v)
        elif isinstance(v, dict):
            stack.extend((x, d + 1) for x in v.values())
    return nodes, depth


MAX_RANK = 16


def _prod(extents: Any, what: str) -> int:
    if not isinstance(extents, list) or not all(isinstance(e, int) and not isinstance(e, bool) for e in extents):
        raise WorkloadRequestError(f"{what} must be a list of integers")
    if len(extents) > MAX_RANK:
        raise WorkloadRequestError(f"{what} has {len(extents)} dimensions; at most {MAX_RANK}")
    return math.prod(extents) if extents else 1


def check_dag_json(dag: dict[str, Any], s: ServiceSettings) -> None:
    """Reject a DAG that is too big, too deep or has tensors too large, before parsing it."""
    ops = dag.get("ops")
    if not isinstance(ops, list) or not ops:
        raise WorkloadRequestError("dag.ops must be a non-empty list of tensor definitions")
    if len(ops) > s.max_dag_ops:
        raise WorkloadRequestError(f"dag has {len(ops)} ops; this server accepts at most {s.max_dag_ops}")
    nodes, depth = json_shape(dag, s.max_expr_nodes * 4)
    if nodes > s.max_expr_nodes * 4:
        raise WorkloadRequestError(f"dag has more than {s.max_expr_nodes * 4} JSON nodes")
    if depth > s.max_expr_depth:
        raise WorkloadRequestError(f"dag expressions are nested {depth} deep; the limit is {s.max_expr_depth}")
    for k, op in enumerate(ops):
        if not isinstance(op, dict):
            raise WorkloadRequestError(f"dag.ops[{k}] must be an object")
        name = op.get("name", f"#{k}")
        if op.get("kind") == "placeholder":
            _check_points(_prod(op.get("shape"), f"dag.ops[{k}].shape"), f"tensor {name!r}", s.max_tensor_elements)
        elif op.get("kind") == "compute":
            ext = [a[1] if isinstance(a, list) and len(a) == 2 else None for a in op.get("axis") or []]
            red = [a[1] if isinstance(a, list) and len(a) == 2 else None for a in op.get("reduce_axis") or []]
            out = _prod(ext, f"dag.ops[{k}].axis extents")
            _check_points(out, f"tensor {name!r}", s.max_tensor_elements)
            _check_points(out * _prod(red, f"dag.ops[{k}].reduce_axis extents"), f"loop nest of {name!r}",
                          s.max_loop_points)


def _check_points(n: int, what: str, limit: int) -> None:
    if n < 0:
        raise WorkloadRequestError(f"{what} has a negative extent")
    if n > limit:
        raise WorkloadRequestError(f"{what} has {n} points; this server accepts at most {limit}")


def check_built(w: Workload, s: ServiceSettings) -> None:
    """Limits on the built DAG: elements of every tensor and points of every loop nest."""
    dag = w.dag
    if len(dag.tensors) > s.max_dag_ops:
        raise WorkloadRequestError(f"workload has {len(dag.tensors)} tensors; this server accepts at most "
                                   f"{s.max_dag_ops}")
    for t in dag.tensors:
        if len(t.shape) > MAX_RANK:
            raise WorkloadRequestError(f"tensor {t.name!r} has {len(t.shape)} dimensions; at most {MAX_RANK}")
        n = math.prod(int(x) for x in t.shape) if t.shape else 1
        _check_points(n, f"tensor {t.name!r} {tuple(t.shape)}", s.max_tensor_elements)
        red = getattr(t.op, "reduce_axis", ()) or ()
        _check_points(n * math.prod(int(a.extent) for a in red), f"loop nest of {t.name!r}", s.max_loop_points)


def build_workload(spec: OpWorkload | DagWorkload, s: ServiceSettings) -> Workload:
    """The `Workload` a request describes, or WorkloadRequestError saying what is wrong."""
    if isinstance(spec, OpWorkload):
        ops = registered_workloads()
        if spec.op not in ops:
            raise WorkloadRequestError(f"unknown op {spec.op!r}; registered ops: {', '.join(ops)}")
        args = [_as_python(a) for a in spec.args]
        kwargs = {k: _as_python(v) for k, v in spec.kwargs.items()}
        # a too-large shape is refused before the op builds anything from it
        for v in [*args, *kwargs.values()]:
            for x in v if isinstance(v, list) else [v]:
                if isinstance(x, int) and not isinstance(x, bool) and abs(x) > s.max_tensor_elements:
                    raise WorkloadRequestError(f"argument {x} is larger than the tensor element limit "
                                               f"{s.max_tensor_elements}")
        try:
            w = Workload.create(spec.op, *args, **kwargs)
        except RecursionError:
            raise WorkloadRequestError(f"op {spec.op}: arguments nest too deeply") from None
        except Exception as exc:  # noqa: BLE001  whatever the op rejects is the request's fault
            raise WorkloadRequestError(f"op {spec.op}{tuple(args)}: {type(exc).__name__}: {exc}") from None
    else:
        check_dag_json(spec.dag, s)
        from autosched.te.dag import ComputeDAG

        try:
            dag = ComputeDAG.from_dict(spec.dag)
            tensors = []
            for n in spec.args_order:
                if n not in dag.by_name:
                    raise WorkloadRequestError(f"args_order names {n!r}, which is not a tensor of the dag "
                                               f"(tensors: {', '.join(dag.by_name)})")
                tensors.append(dag[n])
            w = Workload.from_tensors(tensors, spec.name)
        except WorkloadRequestError:
            raise
        except RecursionError:
            raise WorkloadRequestError("dag expressions nest too deeply") from None
        except Exception as exc:  # noqa: BLE001  DAGFormatError, WorkloadError, TypeError...: all the request's
            raise WorkloadRequestError(f"invalid dag: {type(exc).__name__}: {exc}") from None
    try:
        check_built(w, s)
        _ = w.key, w.flops
    except WorkloadRequestError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise WorkloadRequestError(f"workload does not check out: {type(exc).__name__}: {exc}") from None
    return w
