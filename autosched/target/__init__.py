"""The target key and every device fact: host ISA, vector lanes, register budget, GPU limits, probes."""

from autosched.target.key import TARGET_KINDS, Target

__all__ = ["TARGET_KINDS", "Target"]
