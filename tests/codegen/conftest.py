"""Shared set-up for the codegen tests: they reuse the schedule tests' helpers."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "schedule"))
