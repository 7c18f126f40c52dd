#!/usr/bin/env bash
# Creates (or refreshes) .venv in the repository root with autosched and its pinned dependencies.
# Re-installs only when pyproject.toml changed since the last successful install.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=".venv/.autosched-installed"
want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip==25.3 2>&1 | grep -v "^WARNING: Location" || true
  .venv/bin/python -m pip install -q --disable-pip-version-check -e ".[dev]" 2>&1 | grep -v "^WARNING: Location" || true
  .venv/bin/python -c "import autosched, numpy, xgboost, ray, sqlalchemy" 
  echo "$want" > "$stamp"
fi
