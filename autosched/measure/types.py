"""What comes out of measuring a candidate: its timings, or the error that stopped it."""

from __future__ import annotations

from dataclasses import dataclass, field

from autosched.compile.types import ErrorCode


@dataclass(frozen=True)
class MeasureResult:
    """Timing of one candidate (seconds per call), or its error."""

    costs: tuple[float, ...]
    error_code: ErrorCode
    error_msg: str = ""
    build_seconds: float = 0.0
    run_seconds: float = 0.0
    host: str = ""
    device: str = ""
    worker_id: str = ""
    timestamp: float = field(default=0.0)

    @property
    def median(self) -> float:
        """Median cost in seconds; +inf for a failed candidate."""
        if self.error_code != ErrorCode.NO_ERROR or not self.costs:
            return float("inf")
        xs = sorted(self.costs)
        n = len(xs)
        return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])

    @property
    def ok(self) -> bool:
        return self.error_code == ErrorCode.NO_ERROR
