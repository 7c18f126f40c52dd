"""`RunnerConfig`: how a runner times and checks a candidate, one frozen object for all runners.

It crosses process and node boundaries (the kernel process, Ray actors), so it is plain data.
Defaults follow Ansor's LocalRunner: a few calls per repeat, a `min_repeat_ms` floor so that
sub-microsecond kernels are not dominated by timer resolution, and a per-candidate timeout.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RunnerConfig:
    """Timing and checking settings.

    number: calls per repeat (raised adaptively until a repeat lasts `min_repeat_ms`; 1, with one
        warm-up call, when a single call lasts the floor).
    repeat: repeats; each gives one cost (seconds per call), the median is reported.
    min_repeat_ms: floor on the duration of one repeat; 0 keeps `number` as given.
    timeout: seconds one candidate may take on the device (check + timing) before it is killed.
    flush_cache: write a buffer larger than the last-level cache before each repeat (cold cache).
    seed: seed of the random inputs, so every candidate of a workload sees the same data.
    enable_check: compare the output with the reference before timing (WRONG_ANSWER otherwise).
    warmup: untimed calls before the first repeat (page faults, OpenMP thread start-up); the
        median over repeats absorbs a first repeat that is still warming up.
    max_number: ceiling for the adaptive `number`.
    """

    number: int = 3
    repeat: int = 3
    min_repeat_ms: float = 30.0
    timeout: float = 10.0
    flush_cache: bool = False
    seed: int = 0
    enable_check: bool = True
    warmup: int = 2
    max_number: int = 1_000_000

    def __post_init__(self) -> None:
        if self.number < 1 or self.repeat < 1:
            raise ValueError(f"number and repeat must be >= 1, got {self.number}, {self.repeat}")
        if self.min_repeat_ms < 0 or self.timeout <= 0 or self.warmup < 0:
            raise ValueError("min_repeat_ms and warmup must be >= 0 and timeout > 0")
        if self.max_number < self.number:
            raise ValueError(f"max_number {self.max_number} < number {self.number}")
