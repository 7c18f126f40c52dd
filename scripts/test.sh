#!/usr/bin/env bash
# The test command (README quick start #2; .ci/run calls this). Sets up .venv, lints, runs pytest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/venv.sh
# system packages the service tests need (Chromium, chromedriver, docker-compose, PostgreSQL); idempotent
if [ "$(id -u)" = "0" ]; then bash scripts/ci-deps.sh; fi
.venv/bin/ruff check autosched tuning_db tests benchmarks
set +e
.venv/bin/python -m pytest "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then echo "pytest collected no tests: failing" >&2; exit 1; fi
exit "$rc"
