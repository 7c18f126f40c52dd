"""Ray's token auth for the nodes and drivers autosched starts: on unless explicitly turned off.

Anyone who can reach a Ray port of a cluster without auth can run code on it, so `serve` (with
`--ray-head` or `--ray-address`) and `worker` set `RAY_AUTH_MODE=token` unless the environment
already says `RAY_AUTH_MODE=disabled` (tests on loopback do). The token is Ray's own setting:
`RAY_AUTH_TOKEN`, else the file named by `RAY_AUTH_TOKEN_PATH`, else `~/.ray/auth_token`. A head
without one gets a fresh token written to a private file of its state folder (the path is
printed, never the token); a worker without one is refused, since it could not join.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import MutableMapping
from pathlib import Path

MODE = "RAY_AUTH_MODE"
TOKEN = "RAY_AUTH_TOKEN"
TOKEN_PATH = "RAY_AUTH_TOKEN_PATH"


def default_token_path() -> Path:
    return Path.home() / ".ray" / "auth_token"


def token_source(env: MutableMapping[str, str]) -> str | None:
    """Where Ray will read the token from, or None when there is none."""
    if env.get(TOKEN, "").strip():
        return f"${TOKEN}"
    path = env.get(TOKEN_PATH)
    if path:
        return path if _readable(Path(path)) else None
    default = default_token_path()
    return str(default) if _readable(default) else None


def _readable(path: Path) -> bool:
    try:
        return bool(path.read_text().strip())
    except OSError:
        return False


def auth_enabled(env: MutableMapping[str, str]) -> bool:
    """Token auth unless RAY_AUTH_MODE says otherwise; anything but token/disabled is refused."""
    mode = env.get(MODE, "token").strip().lower() or "token"
    if mode not in ("token", "disabled"):
        raise ValueError(f"{MODE} must be 'token' or 'disabled', got {env[MODE]!r}")
    return mode == "token"


def setup_head(env: MutableMapping[str, str], state_dir: Path) -> str:
    """Turn token auth on in `env` (os.environ: the head and this driver inherit it) and make sure
    there is a token; returns a line for the operator saying where workers get it."""
    if not auth_enabled(env):
        env[MODE] = "disabled"
        return (f"Ray token auth is OFF ({MODE}=disabled): anyone who reaches the Ray ports "
                "can run code on the cluster")
    env[MODE] = "token"
    source = token_source(env)
    if source is None:
        path = state_dir / "ray-auth-token"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))
        env[TOKEN_PATH] = str(path)
        source = str(path)
    where = "the environment" if source.startswith("$") else source
    return (f"Ray token auth is on (token from {where}); workers join with "
            f"{TOKEN}=<that token> autosched worker --address ...")


def setup_driver(env: MutableMapping[str, str]) -> None:
    """For a driver joining an existing cluster: token auth unless disabled (Ray reports a missing token)."""
    env[MODE] = "token" if auth_enabled(env) else "disabled"


def setup_worker(env: MutableMapping[str, str]) -> None:
    """Token auth for a joining node; raises ValueError when auth is on and there is no token."""
    if not auth_enabled(env):
        env[MODE] = "disabled"
        return
    env[MODE] = "token"
    if token_source(env) is None:
        raise ValueError(f"Ray token auth is on but there is no token: set {TOKEN} to the head's token "
                         f"(or {TOKEN_PATH} to a file holding it), or {MODE}=disabled on a private test network")
