"""The progress display: plain lines off a terminal, a live rich table on one."""

from __future__ import annotations

import math
from io import StringIO
from types import SimpleNamespace

from rich.console import Console

from autosched.tuning.progress import TuneProgress


def _task(name: str, trials: int, total: int, best_cost: float, errors: int = 0):
    return SimpleNamespace(workload=SimpleNamespace(name=name, flops=2e9), trials=trials,
                           options=SimpleNamespace(trials=total), best_cost=best_cost, measured=trials,
                           reused=0, errors={"RUNTIME_ERROR": errors} if errors else {})


def test_plain_lines_when_not_a_terminal():
    out = StringIO()
    console = Console(file=out, force_terminal=False, width=200)
    with TuneProgress(["matmul"], [16], console=console) as p:
        assert not p.live
        p.update(_task("matmul", 8, 16, math.inf))
        p.update(_task("matmul", 16, 16, 0.002, errors=1))
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("[matmul] trials 8/16  best 0.0 GFLOP/s (- ms)")
    assert "trials 16/16" in lines[1] and "best 1000.0 GFLOP/s (2.0000 ms)" in lines[1]
    assert "errors 1" in lines[1] and "elapsed 0:00:00" in lines[1] and "remaining 0:00:00" in lines[1]
    assert "\x1b[" not in out.getvalue()  # no terminal codes in a pipe


def test_shared_budget_in_plain_lines():
    out = StringIO()
    with TuneProgress(["a", "b"], [40, 40], budget=40, console=Console(file=out, force_terminal=False)) as p:
        p.update(_task("a", 8, 40, 0.01))
        p.update(_task("b", 8, 40, 0.02))
    assert "all 16/40" in out.getvalue().splitlines()[1]


def test_live_rendering_on_a_terminal():
    out = StringIO()
    console = Console(file=out, force_terminal=True, width=200)
    with TuneProgress(["matmul"], [16], console=console) as p:
        assert p.live
        p.update(_task("matmul", 8, 16, 0.004))
        p.update(_task("matmul", 16, 16, 0.002, errors=3))
    text = out.getvalue()
    assert "\x1b[" in text  # rendered live, with terminal codes
    assert "16/16" in text and "1000.0 GFLOP/s" in text and "2.0000 ms" in text and "errors 3" in text
    assert "[matmul] trials" not in text  # no plain lines


def test_quiet_turns_the_display_off(monkeypatch):
    monkeypatch.setenv("AUTOSCHED_QUIET", "1")
    assert not TuneProgress.wanted(True)
    monkeypatch.delenv("AUTOSCHED_QUIET")
    assert TuneProgress.wanted(True) and not TuneProgress.wanted(False)
