#!/usr/bin/env bash
# The test command (README quick start #2; .ci/run calls this). Sets up .venv, lints, runs pytest.
#   bash scripts/test.sh            everything but `-m gpu` tests (those skip without an NVIDIA GPU): what CI runs
#   bash scripts/test.sh --quick    the quick tier: no Ray, PostgreSQL, slow (browser, compose, fuzzing) or gpu tests
# Other arguments go to pytest.
set -euo pipefail
QUICK_MARKERS="not ray and not postgres and not slow and not gpu"
args=()
quick=0
for a in "$@"; do
  if [ "$a" = "--quick" ]; then quick=1; else args+=("$a"); fi
done
if [ "$quick" -eq 1 ]; then args=(-m "$QUICK_MARKERS" "${args[@]}"); fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/venv.sh
# system packages the service tests need (Chromium, chromedriver, docker-compose, PostgreSQL); idempotent
if [ "$(id -u)" = "0" ]; then bash scripts/ci-deps.sh; fi
.venv/bin/ruff check autosched tuning_db tests benchmarks
set +e
.venv/bin/python -m pytest "${args[@]}"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then echo "pytest collected no tests: failing" >&2; exit 1; fi
exit "$rc"
