"""Ray token auth of the nodes autosched starts is on unless explicitly disabled, and a worker
without a token is refused before it tries to join (quick: no Ray is started)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from autosched.measure.ray_node import host_of, is_loopback
from autosched.service import ray_auth


def test_head_turns_auth_on_and_makes_a_private_token(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.ray/auth_token
    env: dict[str, str] = {}
    line = ray_auth.setup_head(env, tmp_path)
    token = tmp_path / "ray-auth-token"
    assert env == {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token)}
    assert token.stat().st_mode & 0o777 == 0o600 and len(token.read_text()) == 64
    assert str(token) in line and token.read_text() not in line


def test_head_uses_the_given_token_and_honours_an_explicit_off(tmp_path: Path) -> None:
    env = {"RAY_AUTH_TOKEN": "t" * 32}
    ray_auth.setup_head(env, tmp_path)
    assert env["RAY_AUTH_MODE"] == "token" and "RAY_AUTH_TOKEN_PATH" not in env
    assert not (tmp_path / "ray-auth-token").exists()
    env = {"RAY_AUTH_MODE": "disabled"}
    assert "OFF" in ray_auth.setup_head(env, tmp_path) and env == {"RAY_AUTH_MODE": "disabled"}
    with pytest.raises(ValueError, match="RAY_AUTH_MODE must be 'token' or 'disabled'"):
        ray_auth.setup_head({"RAY_AUTH_MODE": "tokn"}, tmp_path)


def test_worker_without_a_token_is_refused(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(ValueError, match="no token"):
        ray_auth.setup_worker({})
    ray_auth.setup_worker(env := {"RAY_AUTH_TOKEN": "x" * 32})
    assert env["RAY_AUTH_MODE"] == "token"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    r = subprocess.run([sys.executable, "-m", "autosched.cli.main", "worker", "--address", "10.1.2.3:6379"],
                       capture_output=True, text=True, timeout=60, check=False, env={**env, "HOME": str(tmp_path)})
    assert r.returncode == 2 and "RAY_AUTH_TOKEN" in r.stderr, r.stderr


def test_loopback_addresses() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1")
    assert not is_loopback("10.0.0.5") and not is_loopback("0.0.0.0") and not is_loopback("head")
    assert host_of("127.0.0.1:6379") == "127.0.0.1" and host_of("[::1]:6379") == "::1"
