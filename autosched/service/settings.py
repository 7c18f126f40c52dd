"""The one typed settings object of the tuning service.

Everything the service can be told (database, tokens, limits, where jobs run) is a field here.
The environment is read in exactly one place, `settings_from_env`, and the CLI overrides fields
with `dataclasses.replace`; the app, the job manager and the routes only ever see the object,
so no module changes behaviour because of a variable set somewhere far away.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

ENV_PREFIX = "AUTOSCHED_"


def parse_tokens(text: str) -> dict[str, str]:
    """`"alice:tok1,bob:tok2"` (or a bare `"tok"`, owner "default") -> {token: owner name}."""
    out: dict[str, str] = {}
    for item in text.replace("\n", ",").split(","):
        item = item.strip()
        if not item or item.startswith("#"):
            continue
        name, sep, tok = item.partition(":")
        if not sep:
            name, tok = "default", item
        name, tok = name.strip(), tok.strip()
        if len(tok) < 8:
            raise ValueError(f"token for {name!r} is shorter than 8 characters")
        if not name.replace("-", "").replace("_", "").isalnum():
            raise ValueError(f"token owner name {name!r} must be letters, digits, '-' or '_'")
        out[tok] = name
    return out


@dataclass(frozen=True)
class ServiceSettings:
    """How the API server and its job manager behave.

    Tokens map a secret to an owner name: `write_tokens` may submit, import and cancel their own
    jobs; `admin_tokens` may also cancel anyone's job (an admin token is a write token too); reads
    are open unless `read_auth` is set, then any read, write or admin token may read. `ray_address` None runs
    jobs in worker threads of the API process (each with a local process-pool builder); an address
    runs every job as a Ray task on the cluster's head node, measuring on all nodes.
    `max_running_jobs` jobs run at once (0: this process only serves, never runs jobs);
    `quantum_s` is how long a running job may keep its slot while an equal or higher priority
    job waits (round robin between batches; a preempted job resumes from its records).
    """

    db_url: str = ""
    host: str = "127.0.0.1"
    port: int = 8000
    write_tokens: Mapping[str, str] = field(default_factory=dict)
    read_tokens: Mapping[str, str] = field(default_factory=dict)
    admin_tokens: Mapping[str, str] = field(default_factory=dict)
    read_auth: bool = False
    ray_address: str | None = None
    max_running_jobs: int = 1
    quantum_s: float = 120.0
    poll_interval_s: float = 0.5
    job_attempts: int = 3
    # limits on what one request may ask for
    max_trials: int = 10_000
    max_batch_size: int = 256
    max_tensor_elements: int = 1 << 28
    max_loop_points: int = 1 << 36
    max_dag_ops: int = 64
    max_expr_nodes: int = 4096
    max_expr_depth: int = 64
    max_body_bytes: int = 1 << 20
    max_import_bytes: int = 64 << 20
    max_list: int = 1000
    body_timeout_s: float = 30.0  # a request body that sends nothing for this long gets 408

    def __post_init__(self) -> None:
        if not isinstance(self.port, int) or not 0 <= self.port < 65536:
            raise ValueError(f"port must be 0..65535, got {self.port!r}")
        if self.max_running_jobs < 0:
            raise ValueError("max_running_jobs must be >= 0")
        for name in ("max_trials", "max_batch_size", "max_tensor_elements", "max_dag_ops", "max_body_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        if self.quantum_s <= 0 or self.poll_interval_s <= 0:
            raise ValueError("quantum_s and poll_interval_s must be > 0")
        if not self.body_timeout_s > 0:
            raise ValueError(f"body_timeout_s must be > 0, got {self.body_timeout_s!r}")

    @property
    def can_write(self) -> bool:
        return bool(self.write_tokens) or bool(self.admin_tokens)

    def owner_of(self, token: str, *, write: bool) -> str | None:
        """The owner of `token` if it grants the access asked for (constant-time compare)."""
        pools = [self.admin_tokens, self.write_tokens]
        if not write:
            pools.append(self.read_tokens)
        for pool in pools:
            owner = _lookup(pool, token)
            if owner is not None:
                return owner
        return None

    def is_admin(self, token: str) -> bool:
        """Whether `token` is an admin token (may cancel any owner's job)."""
        return _lookup(self.admin_tokens, token) is not None


def _lookup(pool: Mapping[str, str], token: str) -> str | None:
    """Every token of `pool` is compared (constant time each), so timing tells nothing of which matched."""
    found = None
    for tok, owner in pool.items():
        if secrets.compare_digest(tok.encode(), token.encode()):
            found = owner
    return found


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(ENV_PREFIX + name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{ENV_PREFIX}{name} must be an integer, got {raw!r}") from None


def _float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(ENV_PREFIX + name, "").strip()
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"{ENV_PREFIX}{name} must be a number, got {raw!r}") from None


def _read_token_file(path: str) -> str:
    return Path(path).expanduser().read_text() if path else ""


def settings_from_env(env: Mapping[str, str] | None = None) -> ServiceSettings:
    """Settings from `AUTOSCHED_*` variables (the only place the service reads the environment).

    AUTOSCHED_DB_URL, AUTOSCHED_TOKENS / AUTOSCHED_TOKENS_FILE ("name:token,..."),
    AUTOSCHED_READ_TOKENS, AUTOSCHED_ADMIN_TOKENS, AUTOSCHED_READ_AUTH=1, AUTOSCHED_BODY_TIMEOUT_S,
    AUTOSCHED_RAY_ADDRESS, AUTOSCHED_MAX_RUNNING_JOBS,
    AUTOSCHED_MAX_TRIALS, AUTOSCHED_MAX_TENSOR_ELEMENTS, AUTOSCHED_MAX_BODY_BYTES.
    """
    src = os.environ if env is None else env
    from tuning_db.settings import db_settings_from_env

    tokens = parse_tokens(src.get(ENV_PREFIX + "TOKENS", "") + "," +
                          _read_token_file(src.get(ENV_PREFIX + "TOKENS_FILE", "")))
    base = ServiceSettings()
    return ServiceSettings(
        db_url=db_settings_from_env(src).url,
        write_tokens=tokens,
        read_tokens=parse_tokens(src.get(ENV_PREFIX + "READ_TOKENS", "")),
        admin_tokens=parse_tokens(src.get(ENV_PREFIX + "ADMIN_TOKENS", "")),
        read_auth=src.get(ENV_PREFIX + "READ_AUTH", "").strip().lower() in ("1", "true", "yes"),
        ray_address=src.get(ENV_PREFIX + "RAY_ADDRESS", "").strip() or None,
        max_running_jobs=_int(src, "MAX_RUNNING_JOBS", base.max_running_jobs),
        max_trials=_int(src, "MAX_TRIALS", base.max_trials),
        max_tensor_elements=_int(src, "MAX_TENSOR_ELEMENTS", base.max_tensor_elements),
        max_body_bytes=_int(src, "MAX_BODY_BYTES", base.max_body_bytes),
        body_timeout_s=_float(src, "BODY_TIMEOUT_S", base.body_timeout_s),
    )
