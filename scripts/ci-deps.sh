#!/usr/bin/env bash
# System packages the service tests need (tests/service): headless Chromium and its WebDriver for
# the dashboard test, Debian's docker-compose to validate docker-compose.yml, and the PostgreSQL
# server binaries. Idempotent: installs only what is missing, so a warm machine pays nothing.
# Also installs the service test tools into .venv while pyproject.toml does not pin them yet.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v chromedriver >/dev/null 2>&1 || need+=(chromium-driver)
command -v docker-compose >/dev/null 2>&1 || need+=(docker-compose)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 || need+=(postgresql)
if [ "${#need[@]}" -gt 0 ]; then
  echo "ci-deps: apt-get install ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
if [ -x "$root/.venv/bin/python" ]; then
  pins=()
  "$root/.venv/bin/python" -c "import schemathesis" 2>/dev/null || pins+=("schemathesis==4.32.5")
  "$root/.venv/bin/python" -c "import selenium" 2>/dev/null || pins+=("selenium==4.38.0")
  if [ "${#pins[@]}" -gt 0 ]; then
    echo "ci-deps: pip install ${pins[*]}"
    "$root/.venv/bin/python" -m pip install -q --disable-pip-version-check "${pins[@]}"
  fi
fi
echo "ci-deps: chromium $(chromium --version 2>/dev/null | awk '{print $2}'), $(docker-compose --version 2>/dev/null)"
