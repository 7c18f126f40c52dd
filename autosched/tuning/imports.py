"""Importing records from another database: every line is checked against the workload it names
before it is stored, so an import can add measurements but never plant a schedule.

`tuning_db` checks what it can know alone (costs finite and positive, flops positive, text without
NUL characters, the file format); this module adds what only autosched can check: the workload key
is the hash of its spec, the flops are the spec's, the target is one autosched knows, and the
steps replay on the workload and lower. A refused line is reported with its number and reason and
the rest of the file is kept. Imported records keep their origin and stay unverified until they
are measured again here (`autosched verify`).
"""

from __future__ import annotations

import math

from autosched.lowering.targets import LOWERERS
from autosched.schedule.replay import schedule_from_steps
from autosched.target.key import TARGET_KINDS, Target
from autosched.workload import Workload
from tuning_db import TuningDB, jsonl
from tuning_db.canonical import canonical_json
from tuning_db.types import ORIGIN_IMPORT, ImportReport

FLOPS_REL_TOL = 1e-9
"""Relative difference allowed between a line's flops and its workload's (float printing only)."""

REPLAY_CACHE_MAX = 4096
"""Schedules remembered as checked; an export holds many records of one schedule."""


class ImportValidator:
    """`validate(line)` raises ValueError(reason) for a line that must not be stored.

    Workloads and checked schedules are cached, so a file of many records of a few workloads
    replays each schedule once.
    """

    def __init__(self) -> None:
        self._workloads: dict[str, Workload] = {}
        self._checked: dict[tuple[str, str, str], str] = {}  # (workload, kind, steps hash) -> "" or reason

    def __call__(self, line: jsonl.ImportLine) -> None:
        rec = line.record
        kind = line.target_kind
        if kind not in TARGET_KINDS:
            raise ValueError(f"target kind {kind!r} is not one of {', '.join(TARGET_KINDS)}")
        try:
            target = Target.parse(rec.target_key)
        except ValueError as exc:
            raise ValueError(f"target key {rec.target_key!r}: {exc}") from None
        if target.kind != kind:
            raise ValueError(f"target key {rec.target_key!r} is of kind {target.kind!r}, the line says {kind!r}")
        w = self._workload(rec.workload_key, line.workload_spec)
        if not (math.isfinite(line.workload_flops) and
                math.isclose(line.workload_flops, w.flops, rel_tol=FLOPS_REL_TOL)):
            raise ValueError(f"workload flops {line.workload_flops!r} differ from its spec's {w.flops!r}")
        steps = rec.steps if isinstance(rec.steps, str) else canonical_json(rec.steps)
        ident = (w.key, kind, steps)
        reason = self._checked.get(ident)
        if reason is None:
            reason = _replay_reason(w, steps, kind)
            if len(self._checked) >= REPLAY_CACHE_MAX:
                self._checked.pop(next(iter(self._checked)))
            self._checked[ident] = reason
        if reason:
            raise ValueError(reason)

    def _workload(self, key: str, spec: dict) -> Workload:
        w = self._workloads.get(key)
        if w is not None:
            return w
        try:
            w = Workload.from_json(spec)
        except Exception as exc:  # noqa: BLE001  any failure to load is the line's fault, reported by name
            raise ValueError(f"workload spec does not load: {type(exc).__name__}: {exc}") from None
        if w.key != key:
            raise ValueError(f"workload key {key!r} is not the hash of its spec (the spec hashes to {w.key!r})")
        self._workloads[key] = w
        return w


def _replay_reason(w: Workload, steps: str, kind: str) -> str:
    """'' when `steps` replay on `w` and lower for `kind`, else why not."""
    try:
        s, args = schedule_from_steps(w, steps)
        LOWERERS[kind](s, list(args), "imported")
    except Exception as exc:  # noqa: BLE001  a schedule that does not replay is refused, whatever the cause
        return f"steps do not describe a schedule of {w.name}: {type(exc).__name__}: {exc}"
    return ""


def import_records(db: TuningDB, fp_or_path: jsonl.PathOrFile, *, origin: str = ORIGIN_IMPORT) -> ImportReport:
    """Import an exported JSON-lines file into `db`, line by line: valid lines are stored (as
    unverified, with `origin`), refused ones reported with their line number and reason."""
    return db.import_jsonl(fp_or_path, validate=ImportValidator(), origin=origin)
