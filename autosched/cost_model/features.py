"""Features of a lowered loop nest, per store, aggregated to one fixed-width vector per candidate.

They describe the program, not the knobs, so a model trained on one workload can rank schedules
of another (transfer): operation counts by kind, loop structure and annotations around each
store (parallel, vector length, unroll), bytes per access and unique bytes per buffer, the stride
of each access in the innermost loop (contiguous / invariant / strided) and arithmetic intensity.
Counts are weighted by how often the store executes and taken as log1p, so sizes compare well.
"""

from __future__ import annotations

import math

import numpy as np

from autosched.dtypes import DTYPE_BYTES
from autosched.lowering import arith
from autosched.lowering.access import flat, stride_of
from autosched.lowering.ir import Allocate, For, IfThen, Load, LoweredFunc, Seq, Stmt, Store
from autosched.te.expr import Binary, Call, Cast, Expr, Select, Var, walk

STORE_FEATURES = (
    "executions", "float_add", "float_mul", "float_div", "float_minmax", "math_calls", "selects", "casts",
    "int_ops", "n_loops", "n_parallel", "parallel_extent", "n_vectorized", "vector_len", "n_unrolled",
    "unroll_product", "innermost_extent", "innermost_is_vector", "innermost_is_reduce", "loads",
    "loads_contiguous", "loads_invariant", "loads_strided", "load_bytes", "store_bytes", "store_contiguous",
    "unique_bytes_param", "unique_bytes_local", "local_loads", "reuse_ratio", "arith_intensity",
    "guarded", "outer_serial_extent", "depth_of_vector", "is_reduction_update", "store_streaming",
)
GLOBAL_FEATURES = ("n_stores", "n_allocs", "alloc_bytes", "total_flops", "total_bytes", "parallel_fraction",
                   "loads_per_flop", "global_loads_per_flop", "bytes_per_flop", "strided_loads_per_flop",
                   "invariant_loads_per_flop", "vector_flop_fraction", "unrolled_flop_fraction",
                   "guarded_flop_fraction", "streamed_store_fraction")
"""Whole-program features. The `*_per_flop` and `*_fraction` ones do not grow with the problem size,
so they carry what a schedule does well (register reuse, vector and unrolled work, contiguous
access) from one workload's records to another's: the transfer a warm-started model relies on."""
N_STORE = len(STORE_FEATURES)
FEATURE_NAMES = tuple(f"sum_{n}" for n in STORE_FEATURES) + tuple(f"max_{n}" for n in STORE_FEATURES) + \
    GLOBAL_FEATURES
N_FEATURES = len(FEATURE_NAMES)
SIZE_FREE_COLUMNS = tuple(i for i, n in enumerate(FEATURE_NAMES) if n.endswith(("_per_flop", "_fraction")))
"""Columns that mean the same on a workload of another size: what a model trained on several
workloads' records ranks with (absolute extents and byte counts separate the workloads, not the
schedules, and a tree split on them picks what was fast *there*)."""

SIZE_SCALED_STORE_FEATURES = (
    "executions", "float_add", "float_mul", "float_div", "float_minmax", "math_calls", "selects", "casts",
    "int_ops", "loads", "loads_contiguous", "loads_invariant", "loads_strided", "load_bytes", "store_bytes",
    "local_loads", "parallel_extent", "unique_bytes_param", "outer_serial_extent",
)
"""Per-store features that grow with the problem size (counts weighted by executions, extents of the
loops over the whole problem, whole-buffer bytes). Tile-sized ones (vector length, unroll product,
innermost extent, local buffer bytes) describe the schedule itself and mean the same at any size."""
_I_FLOPS = FEATURE_NAMES.index("total_flops")
_SUM_SCALED = np.array([FEATURE_NAMES.index(f"sum_{n}") for n in SIZE_SCALED_STORE_FEATURES])
_MAX_SCALED = np.array([FEATURE_NAMES.index(f"max_{n}") for n in SIZE_SCALED_STORE_FEATURES] +
                       [FEATURE_NAMES.index(n) for n in ("alloc_bytes", "total_bytes")])
NONE_PER_FLOP = -40.0
"""Relative value of a count that is zero: below log(1 / flops) of any real problem (log 1e-15 = -34.5)."""


def size_relative(x: np.ndarray) -> np.ndarray:
    """Features with the problem's size taken out, for a ranker that learns from other sizes.

    Each size-scaled `max_*` and whole-program column becomes log(count) - log(total flops) (a zero
    count: NONE_PER_FLOP), total flops itself is zeroed, and the size-scaled `sum_*` columns (sums over
    stores of log counts, which cannot be made relative once summed) are zeroed too. Tile-sized
    columns, fractions and per-flop ratios are kept.

    Why: a ranker warm-started from another size of the same operator splits on absolute counts at
    thresholds that sit elsewhere for this size. Not better on the whole, so
    `XGBModel(size_relative=True)` is an option, not the default
    (see docs/decisions/cost-model-transfer-columns.md).
    """
    if x.ndim != 2 or x.shape[1] != N_FEATURES:
        raise ValueError(f"size_relative wants rows of {N_FEATURES} features, got shape {x.shape}")
    out = np.array(x, dtype=np.float64, copy=True)
    log_flops = out[:, _I_FLOPS][:, None]
    scaled = out[:, _MAX_SCALED]
    out[:, _MAX_SCALED] = np.where(scaled > 0, scaled - log_flops, NONE_PER_FLOP)
    out[:, _SUM_SCALED] = 0.0
    out[:, _I_FLOPS] = 0.0
    return out


def _flat(buf, indices) -> Expr:
    return flat(buf, indices)


def _stride(index: Expr, var: Var | None) -> int | None:
    if var is None:
        return 0
    return stride_of(index, var)


class _Walker:
    def __init__(self) -> None:
        self.rows: list[np.ndarray] = []
        self.n_allocs = 0
        self.alloc_bytes = 0
        self.loops: list[For] = []
        self.guards = 0

    def stmt(self, s: Stmt) -> None:
        if isinstance(s, Seq):
            for x in s.stmts:
                self.stmt(x)
        elif isinstance(s, For):
            self.loops.append(s)
            self.stmt(s.body)
            self.loops.pop()
        elif isinstance(s, IfThen):
            self.guards += 1
            self.stmt(s.body)
            self.guards -= 1
        elif isinstance(s, Allocate):
            self.n_allocs += 1
            self.alloc_bytes += s.buffer.size * DTYPE_BYTES.get(s.buffer.dtype, 4)
            self.stmt(s.body)
        elif isinstance(s, Store):
            self.rows.append(self.store(s))

    def store(self, s: Store) -> np.ndarray:
        f = dict.fromkeys(STORE_FEATURES, 0.0)
        exts = []
        for lp in self.loops:
            n = arith.const_value(lp.extent)
            exts.append(n if n is not None else 16)
        execs = float(np.prod(exts)) if exts else 1.0
        f["executions"] = execs
        for node in walk(s.value):
            if isinstance(node, Binary):
                if node.dtype in ("int32", "int64"):
                    f["int_ops"] += 1
                elif node.op in ("add", "sub"):
                    f["float_add"] += 1
                elif node.op == "mul":
                    f["float_mul"] += 1
                elif node.op in ("div", "pow"):
                    f["float_div"] += 1
                elif node.op in ("min", "max"):
                    f["float_minmax"] += 1
            elif isinstance(node, Call):
                f["math_calls"] += 1
            elif isinstance(node, Select):
                f["selects"] += 1
            elif isinstance(node, Cast):
                f["casts"] += 1
        kinds = [lp.kind for lp in self.loops]
        f["n_loops"] = len(self.loops)
        f["n_parallel"] = kinds.count("parallel")
        f["parallel_extent"] = float(np.prod([e for e, k in zip(exts, kinds) if k == "parallel"])) \
            if "parallel" in kinds else 0.0
        f["n_vectorized"] = kinds.count("vectorized")
        f["vector_len"] = float(np.prod([e for e, k in zip(exts, kinds) if k == "vectorized"])) \
            if "vectorized" in kinds else 1.0
        f["n_unrolled"] = kinds.count("unrolled")
        f["unroll_product"] = float(np.prod([e for e, k in zip(exts, kinds) if k == "unrolled"])) \
            if "unrolled" in kinds else 1.0
        inner = self.loops[-1] if self.loops else None
        f["innermost_extent"] = exts[-1] if exts else 1
        f["innermost_is_vector"] = float(inner is not None and inner.kind == "vectorized")
        vec_depth = [k for k, lp in enumerate(self.loops) if lp.kind == "vectorized"]
        f["depth_of_vector"] = float(len(self.loops) - vec_depth[-1]) if vec_depth else 0.0
        serial_outer = [e for e, k in zip(exts, kinds) if k == "serial"]
        f["outer_serial_extent"] = float(serial_outer[0]) if serial_outer else 1.0
        var = inner.var if inner is not None else None
        store_idx = _flat(s.buffer, s.indices)
        st_stride = _stride(store_idx, var)
        f["innermost_is_reduce"] = float(st_stride == 0 and inner is not None)
        f["store_contiguous"] = float(st_stride == 1)
        f["store_bytes"] = DTYPE_BYTES.get(s.buffer.dtype, 4)
        f["store_streaming"] = float(inner is not None and inner.streaming and s.buffer.scope == "param")
        loads = [n for n in walk(s.value) if isinstance(n, Load)]
        f["is_reduction_update"] = float(any(ld.buffer is s.buffer for ld in loads))
        uniq_param, uniq_local = {}, {}
        for ld in loads:
            f["loads"] += 1
            f["load_bytes"] += DTYPE_BYTES.get(ld.buffer.dtype, 4)
            stv = _stride(_flat(ld.buffer, ld.indices), var)
            if stv == 1:
                f["loads_contiguous"] += 1
            elif stv == 0:
                f["loads_invariant"] += 1
            else:
                f["loads_strided"] += 1
            nbytes = ld.buffer.size * DTYPE_BYTES.get(ld.buffer.dtype, 4)
            if ld.buffer.scope in ("local",):
                f["local_loads"] += 1
                uniq_local[id(ld.buffer)] = nbytes
            else:
                uniq_param[id(ld.buffer)] = nbytes
        f["unique_bytes_param"] = float(sum(uniq_param.values()))
        f["unique_bytes_local"] = float(sum(uniq_local.values()))
        touched = (f["load_bytes"] + f["store_bytes"]) * execs
        f["reuse_ratio"] = touched / max(1.0, f["unique_bytes_param"] + f["unique_bytes_local"])
        flops = (f["float_add"] + f["float_mul"] + f["float_div"] + f["float_minmax"] + f["math_calls"]) * execs
        f["arith_intensity"] = flops / max(1.0, touched)
        f["guarded"] = float(self.guards > 0)
        weighted = ("float_add", "float_mul", "float_div", "float_minmax", "math_calls", "selects", "casts",
                    "int_ops", "loads", "loads_contiguous", "loads_invariant", "loads_strided", "load_bytes",
                    "store_bytes", "local_loads")
        for k in weighted:
            f[k] *= execs
        return np.array([f[k] for k in STORE_FEATURES], dtype=np.float64)


def extract_features(func: LoweredFunc) -> np.ndarray:
    """One fixed-width feature vector (length N_FEATURES) for a lowered function."""
    w = _Walker()
    w.stmt(func.body)
    rows = np.array(w.rows) if w.rows else np.zeros((1, N_STORE))
    logs = np.log1p(np.maximum(rows, 0.0))
    flop_idx = [STORE_FEATURES.index(k) for k in ("float_add", "float_mul", "float_div", "float_minmax",
                                                  "math_calls")]
    total_flops = float(rows[:, flop_idx].sum())
    total_bytes = float(rows[:, STORE_FEATURES.index("load_bytes")].sum() +
                        rows[:, STORE_FEATURES.index("store_bytes")].sum())
    col = {k: rows[:, STORE_FEATURES.index(k)] for k in ("n_parallel", "executions", "loads", "local_loads",
                                                          "load_bytes", "store_bytes", "loads_strided",
                                                          "loads_invariant", "n_vectorized", "n_unrolled",
                                                          "guarded", "store_streaming")}
    par = col["n_parallel"] > 0
    execs = col["executions"]
    par_frac = float(execs[par].sum() / max(1.0, execs.sum()))
    row_flops = rows[:, flop_idx].sum(axis=1)
    per_flop = max(1.0, total_flops)

    def ratio(x: float) -> float:  # log scale, positive, size-free
        return math.log1p(1000.0 * x / per_flop)

    def flop_fraction(mask: np.ndarray) -> float:
        return float(row_flops[mask].sum() / per_flop)

    glob = np.array([len(w.rows), w.n_allocs, math.log1p(w.alloc_bytes), math.log1p(total_flops),
                     math.log1p(total_bytes), par_frac,
                     ratio(col["loads"].sum()), ratio(col["loads"].sum() - col["local_loads"].sum()),
                     ratio(col["load_bytes"].sum() + col["store_bytes"].sum()), ratio(col["loads_strided"].sum()),
                     ratio(col["loads_invariant"].sum()), flop_fraction(col["n_vectorized"] > 0),
                     flop_fraction(col["n_unrolled"] > 0), flop_fraction(col["guarded"] > 0),
                     float((col["store_bytes"] * (col["store_streaming"] > 0)).sum() /
                           max(1.0, col["store_bytes"].sum()))])
    return np.concatenate([logs.sum(axis=0), logs.max(axis=0), glob])
