"""Canonical JSON and hashes: the same steps must give the same bytes (and hash) on every writer.

Records are deduplicated and resumed by `steps_hash`, so two processes that serialize one schedule
must agree byte for byte: keys sorted, no whitespace, no NaN/Infinity (which are not JSON).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from typing import Any


def canonical_json(value: Any, *, allow_nan: bool = False) -> str:
    """Deterministic JSON text of `value` (sorted keys, compact; NaN/inf raise ValueError unless
    `allow_nan`, which a DAG needs for the -inf that starts a max reduction)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=allow_nan)


def sha256_text(text: str) -> str:
    """sha256 hex (64 characters) of UTF-8 text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def canonical_hash(value: Any, *, allow_nan: bool = False) -> str:
    """sha256 hex of the canonical JSON of `value`: the one way every key in autosched is made
    (workload keys, DAG keys, config-space fingerprints, steps hashes)."""
    return sha256_text(canonical_json(value, allow_nan=allow_nan))


def steps_hash(steps: Any) -> str:
    """sha256 hex of the canonical JSON of a schedule's steps (what `records.steps_hash` holds)."""
    return canonical_hash(parse_steps(steps))


def parse_steps(steps: Any) -> Any:
    """Steps as a JSON value; a string is taken to be JSON text (e.g. `MeasureInput.steps_json`)."""
    if isinstance(steps, str):
        try:
            return json.loads(steps)
        except json.JSONDecodeError as e:
            raise ValueError(f"steps is not valid JSON text: {e}") from e
    return steps


def median(costs: Sequence[float]) -> float:
    """Median as `autosched.measure.types.MeasureResult.median` computes it (mean of the middle pair)."""
    xs = sorted(costs)
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def is_finite_number(x: Any) -> bool:
    """True for int/float values that are finite (bool is not a number here)."""
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
