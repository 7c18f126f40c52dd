"""The CI entry point and the venv script fail loudly: `.ci/run` exports CI=1 (so every
"skip when a tool is missing" guard fails instead), and `scripts/venv.sh` stops on a failed
`pip install` without writing its "installed" stamp (which would hide the failure next time)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STAMP = ".venv/.autosched-installed"


def _fake_checkout(tmp: Path, pip_rc: int) -> Path:
    """A copy of venv.sh beside a pyproject.toml, with a .venv whose python fails `-m pip` with `pip_rc`."""
    (tmp / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "venv.sh", tmp / "scripts" / "venv.sh")
    (tmp / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    py = tmp / ".venv" / "bin" / "python"
    py.parent.mkdir(parents=True)
    py.write_text(f"""#!/bin/sh
if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then
  echo "ERROR: No matching distribution found for somepkg" >&2
  echo "WARNING: Location noise" >&2
  exit {pip_rc}
fi
exit 0
""")
    py.chmod(py.stat().st_mode | stat.S_IEXEC)
    return tmp


def _venv_sh(checkout: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(checkout / "scripts" / "venv.sh")], capture_output=True, text=True,
                          timeout=60, check=False, cwd=checkout)


def test_venv_sh_fails_on_a_failed_pip_install_and_writes_no_stamp(tmp_path: Path) -> None:
    checkout = _fake_checkout(tmp_path, pip_rc=1)
    r = _venv_sh(checkout)
    assert r.returncode != 0, r.stdout + r.stderr
    assert "No matching distribution" in r.stderr and "failed" in r.stderr
    assert not (checkout / STAMP).exists()


def test_venv_sh_writes_the_stamp_after_a_good_install(tmp_path: Path) -> None:
    checkout = _fake_checkout(tmp_path, pip_rc=0)
    r = _venv_sh(checkout)
    assert r.returncode == 0, r.stderr
    assert (checkout / STAMP).read_text().strip()
    assert "WARNING: Location" not in r.stderr  # the noise is still filtered


def test_ci_run_exports_ci_before_the_test_command(tmp_path: Path) -> None:
    """Run .ci/run against a stand-in scripts/test.sh that reports the CI it sees."""
    (tmp_path / ".ci").mkdir()
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / ".ci" / "run", tmp_path / ".ci" / "run")
    (tmp_path / "scripts" / "test.sh").write_text('echo "CI=${CI:-unset}"\n')
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    r = subprocess.run(["bash", str(tmp_path / ".ci" / "run")], capture_output=True, text=True, timeout=60,
                       check=False, env=env)
    assert r.returncode == 0 and r.stdout.strip() == "CI=1", (r.stdout, r.stderr)
