"""GPU tests: CI runs the compile checks and CPU emulations; `-m gpu` tests need an NVIDIA GPU."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
