"""Start a search from the best schedules of the same operator at other shapes (the database's).

Tuning matmul 256^3 in a database that holds a tuned matmul 512^3 should not begin from nothing:
its register tile, vector width, unroll depth and packing are a strong guess for the new shape.
The cost model carries that knowledge only as well as it transfers, which varies widely between
shapes; the schedules themselves carry it directly. So a guided run also measures, first, the best
few schedules of each other workload whose sketch has the same knobs, moved onto this workload's knobs:

1. `config_of_steps` recovers a stored record's config in its own workload's sketch space (records
   keep steps, not configs): coordinate descent on the difference between the steps a config
   yields and the stored ones, exact when it reaches zero, None when it cannot.
2. `transplant` gives each knob of the new space the choice nearest to the old value (tile
   factors by log-distance, so 8 stays 8 where it divides and becomes 4 or 16 where it does not).

Which of those schedules: the best of each register tile (the innermost tile factors) among the
other workload's schedules within FAMILY_MIN_RATIO of its best, then variations that differ in
several knobs (`families_first`, `diverse_first`): a tile that was second at the other shape is
often first at this one.

Searchers receive the results as seeds (`Searcher.add_seeds`): measured before anything else,
skipped if invalid or already measured, and then learned from like any measurement.

A seed costs one trial; one measured low by bad luck is lost like any measurement. The evidence
for seeding and for choosing seeds by diversity is in docs/decisions/transfer-seeds.md.
"""

from __future__ import annotations

import json
import math
import warnings
from collections import Counter
from collections.abc import Sequence
from typing import Any

from autosched.schedule.state import ScheduleError
from autosched.space import registry as spaces  # looked up per call: tests plant failing spaces
from autosched.space.knobs import Config, ConfigSpace
from autosched.target.key import Target
from autosched.tuning.protocols import Database, SearchSpace
from autosched.workload import Workload

TRANSFER_SEEDS_PER_WORKLOAD = 3
"""Best schedules taken from each other workload with the same knobs."""
TRANSFER_SEEDS_MAX = 6
"""At most this many seeds in all: they are measured before the model chooses anything."""
SEED_POOL_PER_WORKLOAD = 64
"""Best stored schedules of each other workload looked at when choosing its seeds (only those within
FAMILY_MIN_RATIO of its best are decoded)."""
FAMILY_MIN_RATIO = 0.8
"""A register tile other than the best one's is a seed when its best schedule reached at least this
share of the other workload's best throughput. Why: the register tile is what moves least well
between shapes (see docs/decisions/transfer-seeds.md)."""
SEED_MIN_DIFFERENT_KNOBS = 3
"""A seed differs from the ones already chosen in at least this many knobs while such schedules
remain in the pool: the top few of a 64-trial run are often one family (one register tile, one
packing) in small variations, and when that family does not suit the new shape every seed fails
together."""
_MAX_SWEEPS = 6


def _step_bag(space, config: Config) -> Counter | None:
    try:
        steps = space.apply(config).steps_json()
    except (ScheduleError, ValueError, KeyError):
        return None
    return Counter(json.dumps(x, sort_keys=True) for x in steps)


def _distance(a: Counter | None, b: Counter) -> float:
    if a is None:
        return math.inf
    return sum(((a - b) + (b - a)).values())


def config_of_steps(space, steps: Sequence[dict]) -> Config | None:
    """The config of `space` (a SketchSpace) whose schedule has exactly these steps, or None.

    Each knob is set in turn to the choice that brings the config's steps closest to `steps` (as a
    multiset), until they match or a sweep changes nothing. Knobs act on disjoint steps in the
    sketch rules, so this reaches the exact config in one or two sweeps; None if it does not match.
    """
    target = Counter(json.dumps(x, sort_keys=True) for x in steps)
    cs: ConfigSpace = space.space
    cur = [0] * len(cs.knobs)
    best = _distance(_step_bag(space, tuple(cur)), target)
    for _ in range(_MAX_SWEEPS):
        if best == 0:
            break
        changed = False
        for i, knob in enumerate(cs.knobs):
            for j in range(len(knob.choices)):
                if j == cur[i]:
                    continue
                trial = cur.copy()
                trial[i] = j
                d = _distance(_step_bag(space, tuple(trial)), target)
                if d < best:
                    best, cur, changed = d, trial, True
        if not changed:
            break
    return tuple(cur) if best == 0 else None


def _numbers(v: Any) -> tuple[float, ...] | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int | float):
        return (float(v),)
    if isinstance(v, tuple) and v and all(isinstance(x, int | float) and not isinstance(x, bool) for x in v):
        return tuple(float(x) for x in v)
    return None


INNER_FACTOR_WEIGHT = 4.0
"""Weight of the innermost factor of a tile tuple in `_nearest_choice`'s distance (outer factors: 1).
Why: the innermost level is the register tile, which suits the host more than the shape, while the
middle level (rows per parallel task) scales with the extent (see docs/decisions/transfer-seeds.md)."""


def _nearest_choice(choices: tuple, value: Any) -> int | None:
    """Index of `value` among `choices`, else of the numerically nearest one (log-distance, element-wise
    for tile tuples, the innermost factor weighted by `INNER_FACTOR_WEIGHT`); None when the value is
    not numeric and not a choice."""
    for j, c in enumerate(choices):
        if c == value and type(c) is type(value):
            return j
    want = _numbers(value)
    if want is None:
        return None
    best_j, best_d = None, math.inf
    for j, c in enumerate(choices):
        got = _numbers(c)
        if got is None or len(got) != len(want):
            continue
        d = sum(abs(math.log2(max(g, 0.5)) - math.log2(max(w, 0.5))) * (INNER_FACTOR_WEIGHT if k == len(got) - 1
                                                                          and len(got) > 1 else 1.0)
                for k, (g, w) in enumerate(zip(got, want)))
        if d < best_d:
            best_j, best_d = j, d
    return best_j


def transplant(values: dict[str, Any], space: ConfigSpace) -> Config | None:
    """The config of `space` nearest to another workload's knob `values` (same knob names), or None
    when a knob of `space` has no counterpart there."""
    out = []
    for knob in space.knobs:
        if knob.name not in values:
            return None
        j = _nearest_choice(knob.choices, values[knob.name])
        if j is None:
            return None
        out.append(j)
    return tuple(out)


def structural_names(workload: Workload, kind: str, space: ConfigSpace) -> dict[str, str]:
    """Each knob of `space` (`workload`'s space on target `kind`) -> its name in the space of the
    workload's canonical DAG (`ComputeDAG.canonical`: every tensor and loop named by its place).

    Why: knob names carry the author's tensor and loop names (`C.tile.i`), so the same operator written
    with other names, or declared in another order, would share no knob with it; matched by these names
    it shares them all (issue 29). A space that is not the registry's one for `workload` (a template)
    keeps its own names."""
    dag = workload.dag.canonical()
    canon = spaces.make_space(Workload.from_tensors(dag.placeholders + dag.outputs, "canonical"), kind).space
    if [(k.choices, k.kind) for k in canon.knobs] != [(k.choices, k.kind) for k in space.knobs]:
        return {n: n for n in space.names}
    return dict(zip(space.names, canon.names))


def transfer_seeds(db: Database, workload: Workload, target: Target, space: SearchSpace, *,
                   per_workload: int = TRANSFER_SEEDS_PER_WORKLOAD, limit: int = TRANSFER_SEEDS_MAX) -> list[Config]:
    """Configs of `space` (this workload's SketchSpace) moved from the best stored schedules of other
    workloads whose sketch has the same knobs on the same target (by `structural_names`: whatever the
    workloads' authors named their tensors and loops); best first, valid, distinct.

    Other workloads are visited nearest in size first (by log-ratio of FLOPs), so a 512^3 matmul's
    schedules come before a 4096^3 one's when tuning 256^3.
    """
    if not hasattr(space, "apply") or not hasattr(space, "space"):
        return []  # not a space that turns configs into steps: nothing to move across
    try:
        names = {s: n for n, s in structural_names(workload, target.kind, space.space).items()}
    except (ValueError, ScheduleError):  # no sketch of this workload in the registry: its own names
        names = {n: n for n in space.space.names}
    found: list[tuple[float, Workload]] = []
    for info in db.workloads():
        if info.key == workload.key:
            continue
        try:
            other = Workload.from_json(info.spec)
        except Exception:  # noqa: BLE001  a record of an older format: skip it, never fail the tuner
            continue
        if other.flops > 0 and workload.flops > 0:
            found.append((abs(math.log(other.flops / workload.flops)), other))
    out: list[Config] = []
    for _, other in sorted(found, key=lambda x: x[0]):
        try:
            out.extend(_seeds_from(db, other, target, space, names, per_workload, out)[: limit - len(out)])
        except Exception as exc:  # noqa: BLE001  seeds are a head start: a workload that fails is skipped
            warnings.warn(f"transfer seeds: skipped stored workload {other.name} ({other.key[:12]}): "
                          f"{type(exc).__name__}: {exc}", stacklevel=2)
        if len(out) >= limit:
            break
    return out


def _seeds_from(db: Database, other: Workload, target: Target, space: SearchSpace, names: dict[str, str], k: int,
                taken: list[Config]) -> list[Config]:
    """Up to `k` seeds for `space` from workload `other`'s best stored schedules (none if its
    sketch has other knobs). `names`: structural name -> knob of `space`."""
    try:
        other_space = spaces.make_space(other, target.kind)
    except (ValueError, ScheduleError):  # no sketch for it on this target
        return []
    if sorted(kn.kind for kn in other_space.space.knobs) != sorted(kn.kind for kn in space.space.knobs):
        return []  # cheap refusal before the canonical space is built
    mine = structural_names(other, target.kind, other_space.space)
    if set(mine.values()) != set(names):
        return []
    pool: list[Config] = []
    families: list[tuple] = []
    records = db.top_k(other.key, target.key, max(k, SEED_POOL_PER_WORKLOAD))
    best = records[0].median if records and records[0].median else None
    for rec in records:
        if best is not None and rec.median and best / rec.median < FAMILY_MIN_RATIO and len(pool) >= k:
            break  # the rest are too slow to lead a family, and the pool already fills k seeds
        try:
            src = config_of_steps(other_space, json.loads(rec.steps_json))
        except (ValueError, TypeError):  # a record of an older steps format: not a seed
            continue
        if src is None:
            continue
        src_values = other_space.space.values(src)
        cfg = transplant({names[mine[n]]: v for n, v in src_values.items()}, space.space)
        if cfg is not None and cfg not in taken and cfg not in pool and space.space.valid(cfg) \
                and _step_bag(space, cfg) is not None:
            pool.append(cfg)
            near_best = best is None or not rec.median or best / rec.median >= FAMILY_MIN_RATIO
            families.append(register_tile(other_space.space, src_values) if near_best else None)
    return families_first(pool, families, k)


def register_tile(space: ConfigSpace, values: dict[str, Any]) -> tuple:
    """The innermost factor of each multi-level tile knob: the register tile of a CPU sketch."""
    return tuple(values[knob.name][-1] for knob in space.knobs
                 if knob.kind == "tile" and isinstance(values.get(knob.name), tuple) and values[knob.name])


def families_first(pool: Sequence[Config], families: Sequence[tuple | None], k: int) -> list[Config]:
    """`k` configs of `pool` (best first): the best of each family (register tile), in pool order,
    then the rest as `diverse_first` picks them. A family of None (too slow to lead) is never a leader."""
    leaders: list[Config] = []
    seen: set[tuple] = set()
    for c, fam in zip(pool, families):
        if len(leaders) == k:
            break
        if fam is not None and fam not in seen:
            seen.add(fam)
            leaders.append(c)
    return diverse_first(pool, k, taken=leaders)


def diverse_first(pool: Sequence[Config], k: int, min_different: int | None = None,
                  taken: Sequence[Config] = ()) -> list[Config]:
    """`k` configs: those of `taken`, then of `pool` (best first) in pool order each one that differs
    from every one already taken in at least `min_different` knobs (default SEED_MIN_DIFFERENT_KNOBS);
    then the best of the rest, if too few do."""
    if min_different is None:
        min_different = SEED_MIN_DIFFERENT_KNOBS
    out: list[Config] = list(taken)[:k]
    for c in pool:
        if len(out) == k:
            return out
        if c not in out and all(sum(a != b for a, b in zip(c, t)) >= min_different for t in out):
            out.append(c)
    out.extend([c for c in pool if c not in out][: k - len(out)])
    return out
