"""Shared set-up for the schedule tests: the helper module is importable whatever pytest's import mode."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))


def pytest_terminal_summary(terminalreporter) -> None:
    """After the run: how many random schedules the property test built and how many were refused."""
    fuzz = sys.modules.get("sched_fuzz")
    lines = fuzz.summary_lines() if fuzz is not None else []
    if lines:
        terminalreporter.section("random schedules (test_schedule_property)")
        for line in lines:
            terminalreporter.write_line(line)
