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
# pip's output without its "WARNING: Location" noise; pip's own exit status, so a failed install
# stops the script (set -e) before the stamp is written
pip_install() {
  local out rc=0
  out="$(.venv/bin/python -m pip install -q --disable-pip-version-check "$@" 2>&1)" || rc=$?
  if [ -n "$out" ]; then printf '%s\n' "$out" | grep -v "^WARNING: Location" >&2 || true; fi
  if [ "$rc" -ne 0 ]; then echo "venv.sh: pip install $* failed (exit $rc)" >&2; fi
  return "$rc"
}
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  rm -f "$stamp"
  pip_install --upgrade pip==25.3
  pip_install -e ".[dev]"
  .venv/bin/python -c "import autosched, numpy, xgboost, ray, sqlalchemy, triton"
  echo "$want" > "$stamp"
fi
