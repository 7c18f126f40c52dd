"""Schedule tests: a summary of the random schedules the property test built."""

from __future__ import annotations

import sys


def pytest_terminal_summary(terminalreporter) -> None:
    """After the run: how many random schedules the property test built and how many were refused."""
    fuzz = sys.modules.get("tests.support.sched_fuzz")
    lines = fuzz.summary_lines() if fuzz is not None else []
    if lines:
        terminalreporter.section("random schedules (test_schedule_property)")
        for line in lines:
            terminalreporter.write_line(line)
