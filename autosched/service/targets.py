"""Which targets a job may name: those some live worker measures on, nothing else.

A job's target key is where its records are stored, so a free-text key (another machine's, or
shell syntax) would file this host's measurements under a device they were not measured on. A
request names a kind (`cpu`, `cuda`, `triton`), resolved to a key a live worker offers, or the
exact key of one; anything else is refused naming the target and what is offered.
"""

from __future__ import annotations

from collections.abc import Sequence

from autosched.target.key import TARGET_KINDS, Target

GPU_KINDS = ("cuda", "triton")


class TargetRefused(ValueError):
    """The request names a target no live worker offers (HTTP 422)."""


def host_offers() -> list[str]:
    """Target keys this host measures on: its CPU, and the cuda/triton targets when it has a GPU."""
    from autosched.target.gpu import gpu_model

    keys = [Target.host("cpu").key]
    if gpu_model():
        keys += [Target.host(kind).key for kind in GPU_KINDS]
    return keys


def _listing(offers: Sequence[str]) -> str:
    return ", ".join(sorted(offers)) or "none (no live worker)"


def resolve_target(spec: str, offers: Sequence[str]) -> Target:
    """The target a job on `spec` measures on, given the target keys live workers `offers`.

    A bare kind resolves to this host's key when a worker offers it, else the first offered key
    of that kind; a full key must be offered exactly."""
    if spec in TARGET_KINDS:
        keys = sorted(k for k in offers if k.split("|", 1)[0] == spec)
        if not keys:
            if spec in GPU_KINDS:
                raise TargetRefused(f"no live GPU offers target {spec}; offered targets: {_listing(offers)}")
            raise TargetRefused(f"no live worker offers target {spec}; offered targets: {_listing(offers)}")
        here = Target.host(spec).key
        return Target.parse(here if here in keys else keys[0])
    if spec in offers:
        return Target.parse(spec)
    raise TargetRefused(f"target {spec!r} is not offered by any live worker; use {', '.join(TARGET_KINDS)} "
                        f"or one of the offered target keys: {_listing(offers)}")
