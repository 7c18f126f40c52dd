"""Fixtures for the service suite: helpers importable whatever pytest's import mode.

No `__init__.py` here on purpose (like the other test folders): test modules are named
`test_service_*` so their basenames stay unique. The loopback Ray cluster is the measure suite's
(`tests/measure/loopback_cluster.py`): one way to start and stop nodes by pid, shared.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for p in (ROOT, Path(__file__).parent, ROOT / "tests" / "measure"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from tests.support.postgres import postgres_server_session  # noqa: E402,F401  (a session fixture)
