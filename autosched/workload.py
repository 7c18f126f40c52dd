"""Workloads: a registered op name with its arguments, or a user's own tensor expression.

A workload is what the tuning database is keyed by, so its key must be a pure function of what
the operator *is*. For a registered op that is (name, args, kwargs) after binding the call to the
function's signature with defaults applied: `matmul(64, 64, 64)`, `matmul(64, 64, 64, "float32")`
and `matmul(M=64, N=64, K=64)` are one workload with one key, and the dtype is always part of it.
The key is the sha256 of a canonical JSON text (sorted keys, no spaces, tuples as lists, floats
in Python's shortest round-trip form), so it is the same in every process and Python version.

`to_json` also carries the DAG (and the build-argument order): a remote worker that never
imported the op library rebuilds the workload from it (DESIGN: no global registries that remote
workers must re-import).
"""

from __future__ import annotations

import importlib
import inspect
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from autosched.te.dag import ComputeDAG
from autosched.te.expr import check_name
from autosched.te.tensor import ComputeOp, PlaceholderOp, Tensor
from tuning_db.canonical import canonical_hash, canonical_json

WORKLOAD_FORMAT = "autosched-workload"
WORKLOAD_VERSION = 1
_BUILTIN_OPS = "autosched.ops"

WorkloadFunc = Callable[..., list[Tensor]]
_REGISTRY: dict[str, WorkloadFunc] = {}


class WorkloadError(ValueError):
    """An unknown workload name, invalid arguments, or a workload JSON that does not check out."""


# ---- registry --------------------------------------------------------------------------------


def workload(name: str) -> Callable[[WorkloadFunc], WorkloadFunc]:
    """Register `fn(*args, **kwargs) -> [inputs..., outputs...]` under `name` (the function is
    returned unchanged, so it stays callable directly)."""
    check_name(name, "workload name")

    def deco(fn: WorkloadFunc) -> WorkloadFunc:
        old = _REGISTRY.get(name)
        # re-registering the same function (a module reloaded) is fine; two ops sharing a name is not
        if old is not None and (old.__module__, old.__qualname__) != (fn.__module__, fn.__qualname__):
            raise WorkloadError(f"workload {name!r} is already registered by "
                                f"{old.__module__}.{old.__qualname__}")
        _REGISTRY[name] = fn
        return fn

    return deco


def _load_builtin_ops() -> None:
    importlib.import_module(_BUILTIN_OPS)


def registered_workloads() -> list[str]:
    """Names of all registered ops (the built-in library is loaded first)."""
    _load_builtin_ops()
    return sorted(_REGISTRY)


def get_workload_func(name: str) -> WorkloadFunc:
    """The registered function for `name`, loading the built-in op library on first use."""
    if name not in _REGISTRY:
        _load_builtin_ops()
    if name not in _REGISTRY:
        raise WorkloadError(f"unknown workload {name!r}; registered: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name]


# ---- canonical form --------------------------------------------------------------------------


def _canon_value(v: Any, what: str) -> Any:
    """A JSON-able, hashable form of an argument (tuples inside; numpy scalars become Python ones)."""
    if v is None or isinstance(v, bool | str):
        return v
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise WorkloadError(f"argument {what} must be finite, got {v!r}")
        return float(v)
    if hasattr(v, "dtype") and hasattr(v, "item") and getattr(v, "ndim", None) == 0:  # numpy scalar
        return _canon_value(v.item(), what)
    if isinstance(v, list | tuple):
        return tuple(_canon_value(x, f"{what}[{k}]") for k, x in enumerate(v))
    raise WorkloadError(
        f"argument {what} has type {type(v).__name__}; workload arguments must be ints, floats, strs, "
        "bools, None or lists/tuples of them"
    )


def _jsonable(v: Any) -> Any:
    return [_jsonable(x) for x in v] if isinstance(v, tuple) else v


def _sha(obj: Any) -> str:
    return canonical_hash(obj)


def _bind(name: str, fn: WorkloadFunc, args: tuple, kwargs: dict[str, Any]) -> tuple[tuple, dict[str, Any]]:
    """Bind to the signature and apply defaults, so equal calls spelled differently share a key."""
    sig = inspect.signature(fn)
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError as exc:
        raise WorkloadError(f"workload {name}{sig}: {exc}") from None
    bound.apply_defaults()
    pos: list[Any] = []
    kw: dict[str, Any] = {}
    for pname, p in sig.parameters.items():
        v = bound.arguments.get(pname)
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            pos.append(v)
        elif p.kind == p.VAR_POSITIONAL:
            vs = tuple(v or ())
            # f(*shape) accepts f(4, 5) and f((4, 5)); one canonical spelling keeps one key
            if len(vs) == 1 and isinstance(vs[0], list | tuple):
                vs = tuple(vs[0])
            pos.extend(vs)
        elif p.kind == p.KEYWORD_ONLY:
            kw[pname] = v
        else:
            kw.update(v or {})
    return tuple(pos), kw


# ---- the workload ----------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Workload:
    """One operator instance. Equality and hashing follow `key`.

    `dag_json` is set for a custom workload (its definition) and for a registered op loaded from
    JSON in a process where the op is not registered; otherwise the registry builds the tensors.
    """

    name: str
    args: tuple = ()
    kwargs: tuple[tuple[str, Any], ...] = ()
    custom: bool = False
    dag_json: str | None = field(default=None, repr=False)
    io_names: tuple[str, ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        check_name(self.name, "workload name")
        items = self.kwargs.items() if isinstance(self.kwargs, Mapping) else self.kwargs
        object.__setattr__(self, "args", tuple(_canon_value(a, f"#{k}") for k, a in enumerate(self.args)))
        kw = tuple(sorted((str(k), _canon_value(v, repr(k))) for k, v in items))
        object.__setattr__(self, "kwargs", kw)
        object.__setattr__(self, "_cache", {})
        if self.custom and self.dag_json is None:
            raise WorkloadError("a custom workload needs its DAG JSON (use Workload.from_tensors)")

    # ---- construction ---------------------------------------------------------------------
    @staticmethod
    def create(name: str, *args: Any, **kwargs: Any) -> Workload:
        """Validate `name` and the arguments (the op is built once, and kept) and return the workload."""
        fn = get_workload_func(name)
        pos, kw = _bind(name, fn, args, kwargs)
        params = list(inspect.signature(fn).parameters)
        for k, v in enumerate(pos):
            _canon_value(v, repr(params[k]) if k < len(params) else f"#{k}")
        wl = Workload(name, pos, tuple(kw.items()))
        wl._cache["tensors"] = _check_io(name, fn(*wl.args, **dict(wl.kwargs)))
        return wl

    @staticmethod
    def from_tensors(tensors: Sequence[Tensor], name: str = "custom") -> Workload:
        """A user's own tensor expression; `tensors` is the build order (inputs, then outputs)."""
        check_name(name, "workload name")
        io = _check_io(name, list(tensors))
        dag = _dag_of(io)
        wl = Workload(name, custom=True, dag_json=dag.to_json(), io_names=tuple(t.name for t in io))
        wl._cache["tensors"] = io
        wl._cache["dag"] = dag
        return wl

    # ---- identity -------------------------------------------------------------------------
    @property
    def key(self) -> str:
        """sha256 hex of the canonical JSON: (name, args, kwargs), or (name, DAG) for custom ones."""
        if "key" not in self._cache:
            if self.custom:
                self._cache["key"] = _sha({"custom": self.name, "dag": json.loads(self.dag_json or "null")})
            else:
                self._cache["key"] = _sha(self.spec())
        return self._cache["key"]

    def spec(self) -> dict[str, Any]:
        """(name, args, kwargs) as JSON-able data: what the key of a registered op is hashed from."""
        kwargs = {k: _jsonable(v) for k, v in self.kwargs}
        return {"name": self.name, "args": _jsonable(self.args), "kwargs": kwargs}

    def __getstate__(self) -> dict[str, Any]:
        # pickled (e.g. to a Ray worker) without the built tensors: they are rebuilt on first use
        return {k: v for k, v in self.__dict__.items() if k != "_cache"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.__dict__["_cache"] = {}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Workload) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    # ---- what it computes -----------------------------------------------------------------
    def tensors(self) -> list[Tensor]:
        """Build arguments in order (inputs, then outputs); built once per instance, so schedules
        made from them refer to the same tensor objects."""
        if "tensors" not in self._cache:
            if self.dag_json is not None:
                dag = ComputeDAG.from_json(self.dag_json)
                self._cache["dag"] = dag
                self._cache["tensors"] = [dag[n] for n in self.io_names]
            else:
                fn = get_workload_func(self.name)
                self._cache["tensors"] = _check_io(self.name, fn(*self.args, **dict(self.kwargs)))
        return list(self._cache["tensors"])

    @property
    def dag(self) -> ComputeDAG:
        if "dag" not in self._cache:
            self._cache["dag"] = _dag_of(self.tensors())
        return self._cache["dag"]

    @property
    def args_order(self) -> tuple[str, ...]:
        """Names of the build arguments, in order."""
        return tuple(t.name for t in self.tensors())

    @property
    def flops(self) -> float:
        return self.dag.flop_count()

    # ---- JSON -----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = self.spec()
        d.update({
            "format": WORKLOAD_FORMAT, "version": WORKLOAD_VERSION,
            "kind": "custom" if self.custom else "op", "key": self.key,
            "args_order": list(self.args_order), "dag": self.dag.to_dict(), "flops": self.flops,
        })
        return d

    def to_json(self) -> str:
        return canonical_json(self.to_dict())

    @staticmethod
    def from_json(text: str | Mapping[str, Any]) -> Workload:
        """Rebuild from `to_json` output, through the registry when the op is registered in this
        process, else from the carried DAG; the key is recomputed and must match."""
        try:
            d = json.loads(text) if isinstance(text, str | bytes) else dict(text)
        except json.JSONDecodeError as exc:
            raise WorkloadError(f"workload is not valid JSON: {exc}") from None
        return _from_dict(d)

    def __repr__(self) -> str:
        parts = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs]
        return f"Workload({self.name}({', '.join(parts)}){', custom' if self.custom else ''})"


def _from_dict(d: Any) -> Workload:
    if not isinstance(d, dict) or d.get("format") != WORKLOAD_FORMAT:
        raise WorkloadError(f"not an autosched workload (missing format {WORKLOAD_FORMAT!r})")
    if d.get("version") != WORKLOAD_VERSION:
        raise WorkloadError(f"unsupported workload version {d.get('version')!r}; "
                            f"this build reads {WORKLOAD_VERSION}")
    try:
        name, kind, key, dag_d = d["name"], d["kind"], d["key"], d["dag"]
        io_names = tuple(d["args_order"])
        if not isinstance(d["args"], list) or not isinstance(d["kwargs"], dict):
            raise WorkloadError("workload 'args' must be a list and 'kwargs' an object")
        args, kwargs = tuple(d["args"]), tuple(d["kwargs"].items())
    except KeyError as exc:
        raise WorkloadError(f"workload JSON misses field {exc}") from None
    except TypeError as exc:
        raise WorkloadError(f"malformed workload JSON: {exc}") from None
    if kind not in ("op", "custom"):
        raise WorkloadError(f"unknown workload kind {kind!r}")
    dag = ComputeDAG.from_dict(dag_d)  # DAGFormatError (a ValueError) names what is wrong
    dag_json = dag.to_json()  # normalized, so the key is over what this process will actually run
    if kind == "op" and name in _REGISTRY:
        wl = Workload(name, args, kwargs)
        if wl.dag.to_json() != dag_json:
            raise WorkloadError(f"workload {name!r}: the carried DAG differs from what this process's op "
                                "library builds for the same arguments (op library versions differ?)")
    else:
        wl = Workload(name, args, kwargs, custom=kind == "custom", dag_json=dag_json, io_names=io_names)
        unknown = [n for n in io_names if n not in dag.by_name]
        if unknown:
            raise WorkloadError(f"workload {name!r}: args_order names {unknown}, which are not in the DAG")
        wl._cache["dag"] = dag
        wl._cache["tensors"] = _check_io(name, [dag[n] for n in io_names])
    if wl.key != key:
        raise WorkloadError(f"workload {name!r}: key mismatch (JSON says {key}, content hashes to {wl.key})")
    return wl


def _check_io(name: str, tensors: Any) -> list[Tensor]:
    """The build arguments must be distinct tensors: every input the outputs read, then outputs."""
    ok = isinstance(tensors, list | tuple) and tensors and all(isinstance(t, Tensor) for t in tensors)
    if not ok:
        raise WorkloadError(f"workload {name!r} must return a non-empty list of tensors "
                            "(inputs, then outputs)")
    names = [t.name for t in tensors]
    if len(set(names)) != len(names):
        raise WorkloadError(f"workload {name!r}: build arguments have repeated names {names}")
    outs = [t for t in tensors if isinstance(t.op, ComputeOp)]
    if not outs:
        raise WorkloadError(f"workload {name!r}: no computed tensor among the build arguments")
    dag = ComputeDAG(outs)
    missing = [p.name for p in dag.placeholders if p.name not in names]
    unused = [t.name for t in tensors if isinstance(t.op, PlaceholderOp) and dag.by_name.get(t.name) is not t]
    if missing:
        raise WorkloadError(f"workload {name!r}: inputs {missing} are read but are not build arguments")
    if unused:
        raise WorkloadError(f"workload {name!r}: inputs {unused} are not read by any output")
    return list(tensors)


def _dag_of(tensors: list[Tensor]) -> ComputeDAG:
    return ComputeDAG([t for t in tensors if isinstance(t.op, ComputeOp)])


__all__ = ["Workload", "WorkloadError", "canonical_json", "get_workload_func", "registered_workloads",
           "workload"]
