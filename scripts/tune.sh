#!/usr/bin/env bash
# The main job (README quick start #1): a real tuning run of matmul on the CPU with the embedded
# defaults (SQLite database under ~/.cache/autosched, local Ray). Extra arguments go to the CLI.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/venv.sh
exec .venv/bin/autosched tune matmul 512 512 512 --target cpu --trials 64 "$@"
