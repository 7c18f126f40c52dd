"""The discrete space that searchers walk: knobs, configs and the space itself.

A sketch of a schedule has holes (tile sizes, unroll depth, where a cache stage is computed...). Each hole
is a :class:`Knob` with a finite tuple of JSON-serializable choices; a :class:`Config` fills every hole
with a *choice index*. Searchers only ever see indices, never schedule objects, which is what lets one set
of searchers serve every sketch and lets a config travel as a short list of ints (JSON, database, Ray).

Validity (e.g. "the product of the inner tiles must not exceed the register budget") is a predicate
attached to the space, not encoded in the knobs: a real sketch has constraints across knobs that a
product space cannot express, and searchers must skip such configs rather than measure them.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np

from tuning_db.canonical import canonical_hash

Config = tuple[int, ...]
"""One choice index per knob, in the space's knob order. Hashable, so it can key dicts and sets."""

DEFAULT_MAX_ENUMERATION = 1_000_000
"""Iterating over more configs than this is almost surely a mistake (a grid over a huge space)."""

VECTOR_CHOICES = (1, 8, 16, 32, 64)
"""Widths a sketch offers for an inner split that it vectorizes (1: left scalar)."""

ONEHOT_MAX = 32
"""Knobs with more choices than this are encoded by their normalized index only (keeps encodings small)."""

_SCALARS = (bool, int, float, str, type(None))


class SpaceTooLargeError(ValueError):
    """Raised when asked to enumerate a space larger than the given limit."""


def _normalize_choice(value: Any) -> Any:
    """Lists become tuples (JSON round trip) and numpy scalars become Python ones; anything else fails."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, list | tuple):
        return tuple(_normalize_choice(v) for v in value)
    if isinstance(value, _SCALARS):
        if isinstance(value, float) and not np.isfinite(value):
            raise ValueError(f"knob choices must be finite JSON values, got {value!r}")
        return value
    raise TypeError(f"knob choices must be JSON-serializable scalars or tuples, got {type(value).__name__}")


def _choice_key(value: Any) -> Any:
    """Type-tagged key so that True, 1 and 1.0 stay distinct choices (Python says they are equal)."""
    if isinstance(value, tuple):
        return ("tuple", tuple(_choice_key(v) for v in value))
    return (type(value).__name__, value)


def _to_jsonable(value: Any) -> Any:
    return [_to_jsonable(v) for v in value] if isinstance(value, tuple) else value


@dataclass(frozen=True)
class Knob:
    """One hole of a sketch: a name, its finite choices and a free-form kind tag.

    ``ordered`` says whether neighbouring indices are "close" (tile sizes 1, 2, 4, 8 are; cache locations
    are not). It steers local moves: ordered knobs step to an adjacent index, unordered ones jump to any
    other choice. Left as None it is inferred: numeric, strictly monotonic choices are ordered.
    """

    name: str
    choices: tuple
    kind: str = "generic"
    ordered: bool | None = None

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.name, str):
            raise ValueError("a knob needs a non-empty string name")
        choices = _normalize_choice(tuple(self.choices))
        if not choices:
            raise ValueError(f"knob {self.name!r} has no choices")
        keys = [_choice_key(c) for c in choices]
        if len(set(keys)) != len(keys):
            raise ValueError(f"knob {self.name!r} has duplicate choices: {choices!r}")
        object.__setattr__(self, "choices", choices)
        if self.ordered is None:
            numeric = all(isinstance(c, int | float) and not isinstance(c, bool) for c in choices)
            diffs = np.diff(np.asarray(choices, dtype=float)) if numeric else np.zeros(0)
            monotonic = numeric and (bool(np.all(diffs > 0)) or bool(np.all(diffs < 0)))
            object.__setattr__(self, "ordered", monotonic and len(choices) > 1)

    def __len__(self) -> int:
        return len(self.choices)

    @cached_property
    def _index(self) -> dict[Any, int]:
        return {_choice_key(c): i for i, c in enumerate(self.choices)}

    def index(self, value: Any) -> int:
        """Index of a choice value (lists accepted for tuple choices, as JSON gives them back)."""
        try:
            return self._index[_choice_key(_normalize_choice(value))]
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"{value!r} is not a choice of knob {self.name!r}: {self.choices!r}") from None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "choices": [_to_jsonable(c) for c in self.choices],
            "kind": self.kind,
            "ordered": self.ordered,
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Knob:
        return cls(obj["name"], tuple(obj["choices"]), obj.get("kind", "generic"), obj.get("ordered"))


@dataclass(frozen=True)
class ConfigSpace:
    """An ordered product of knobs plus an optional validity predicate (not serialized).

    Flat indices are mixed-radix with the *last* knob varying fastest, i.e. the order of
    ``itertools.product``; grid search and exhaustion bookkeeping rely on that bijection.
    """

    knobs: tuple[Knob, ...]
    is_valid: Callable[[Config], bool] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        knobs = tuple(self.knobs)
        names = [k.name for k in knobs]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate knob names in space: {names}")
        object.__setattr__(self, "knobs", knobs)

    # ---- shape -------------------------------------------------------------------------------
    @property
    def names(self) -> tuple[str, ...]:
        return tuple(k.name for k in self.knobs)

    @cached_property
    def dims(self) -> tuple[int, ...]:
        return tuple(len(k) for k in self.knobs)

    @cached_property
    def size(self) -> int:
        """Number of configs in the product (valid or not); an exact Python int, may be huge."""
        out = 1
        for d in self.dims:
            out *= d
        return out

    def knob(self, name: str) -> Knob:
        for k in self.knobs:
            if k.name == name:
                return k
        raise KeyError(f"no knob named {name!r}; knobs: {list(self.names)}")

    def with_validity(self, is_valid: Callable[[Config], bool] | None) -> ConfigSpace:
        return replace(self, is_valid=is_valid)

    # ---- membership --------------------------------------------------------------------------
    def contains(self, config: Sequence[int]) -> bool:
        """Shape and bounds only (a cheap check, no predicate)."""
        dims = self.dims
        if len(config) != len(dims):
            return False
        return all(isinstance(i, int | np.integer) and 0 <= i < d for i, d in zip(config, dims))

    def check(self, config: Sequence[int]) -> Config:
        """Return ``config`` as a canonical tuple of Python ints, or raise ValueError if out of bounds."""
        if not self.contains(config):
            raise ValueError(f"config {tuple(config)!r} does not fit a space with dims {self.dims}")
        if type(config) is tuple and all(type(i) is int for i in config):
            return config
        return tuple(int(i) for i in config)

    def valid(self, config: Sequence[int]) -> bool:
        """In bounds and accepted by the predicate (if any)."""
        if not self.contains(config):
            return False
        return True if self.is_valid is None else bool(self.is_valid(tuple(int(i) for i in config)))

    # ---- random moves ------------------------------------------------------------------------
    def sample(self, rng: np.random.Generator) -> Config:
        """Uniform over the product; ignores the predicate (see :meth:`sample_valid`)."""
        if not self.dims:
            return ()
        return tuple(rng.integers(0, self._dims_array).tolist())

    def sample_valid(self, rng: np.random.Generator, max_tries: int = 100) -> Config | None:
        """Rejection sampling against the predicate; None when nothing valid turned up."""
        for _ in range(max_tries):
            c = self.sample(rng)
            if self.valid(c):
                return c
        return None

    def neighbors(self, config: Sequence[int]) -> list[Config]:
        """Configs one local move away: an adjacent index on ordered knobs, any other choice otherwise."""
        config = self.check(config)
        out: list[Config] = []
        for k, (knob, i) in enumerate(zip(self.knobs, config)):
            steps = [i - 1, i + 1] if knob.ordered else [j for j in range(len(knob)) if j != i]
            for j in steps:
                if 0 <= j < len(knob):
                    out.append(config[:k] + (j,) + config[k + 1 :])
        return out

    def mutate(self, config: Sequence[int], rng: np.random.Generator, n_knobs: int = 1) -> Config:
        """Change ``n_knobs`` distinct knobs (those with >1 choice); the result always differs.

        Ordered knobs take a +-1 step half of the time and jump anywhere otherwise: local steps exploit
        smoothness of tile sizes, jumps keep the walk from getting stuck.
        """
        out = list(self.check(config))
        movable = self._movable
        if not movable:
            return tuple(out)
        picks = (
            [movable[int(rng.integers(len(movable)))]]
            if n_knobs == 1
            else [int(k) for k in rng.choice(movable, size=min(n_knobs, len(movable)), replace=False)]
        )
        for k in picks:
            d, i = self.dims[k], out[k]
            if self.knobs[k].ordered and rng.random() < 0.5:
                j = i + (1 if rng.random() < 0.5 else -1)
                out[k] = j if 0 <= j < d else i - (j - i)
            else:
                j = int(rng.integers(d - 1))
                out[k] = j + 1 if j >= i else j
        return tuple(out)

    def mutate_batch(self, configs: Sequence[Sequence[int]], rng: np.random.Generator) -> list[Config]:
        """Vectorized :meth:`mutate` with one knob per config (same move distribution), for the model-
        guided searchers that mutate thousands of candidates per batch."""
        x = np.array(configs, dtype=np.int64).reshape(len(configs), len(self.dims))
        if np.any((x < 0) | (x >= np.asarray(self.dims, dtype=np.int64))):
            raise ValueError(f"configs out of bounds for a space with dims {self.dims}")
        if not self._movable or not len(x):
            return [tuple(int(i) for i in row) for row in x]
        m, rows = len(x), np.arange(len(x))
        k = np.asarray(self._movable)[rng.integers(len(self._movable), size=m)]
        d = np.asarray(self.dims)[k]
        i = x[rows, k]
        local = (rng.random(m) < 0.5) & np.asarray([kn.ordered for kn in self.knobs])[k]
        delta = np.where(rng.random(m) < 0.5, 1, -1)
        stepped = i + delta
        stepped = np.where((stepped < 0) | (stepped >= d), i - delta, stepped)
        r = np.minimum((rng.random(m) * (d - 1)).astype(np.int64), d - 2)
        jumped = np.where(r >= i, r + 1, r)
        x[rows, k] = np.where(local, stepped, jumped)
        return [tuple(row) for row in x.tolist()]

    @cached_property
    def _dims_array(self) -> np.ndarray:
        return np.asarray(self.dims, dtype=np.int64)

    @cached_property
    def _movable(self) -> tuple[int, ...]:
        return tuple(k for k, d in enumerate(self.dims) if d > 1)

    def crossover(self, a: Sequence[int], b: Sequence[int], rng: np.random.Generator) -> Config:
        """Uniform crossover: each knob comes from either parent with probability 1/2."""
        a, b = self.check(a), self.check(b)
        take_a = rng.random(len(a)) < 0.5
        return tuple(x if t else y for x, y, t in zip(a, b, take_a))

    # ---- encodings ---------------------------------------------------------------------------
    @cached_property
    def _encoding_layout(self) -> tuple[tuple[int, int, bool], ...]:
        layout, offset = [], 0
        for d in self.dims:
            onehot = 2 < d <= ONEHOT_MAX
            layout.append((offset, d, onehot))
            offset += 1 + (d if onehot else 0)
        return tuple(layout)

    @property
    def encoding_width(self) -> int:
        return sum(1 + (d if onehot else 0) for _, d, onehot in self._encoding_layout)

    def encode_batch(self, configs: Sequence[Sequence[int]]) -> np.ndarray:
        """Rows of [normalized index, one-hot (if 2 < choices <= ONEHOT_MAX)] per knob, float32.

        The normalized index carries order (tile 8 is between 4 and 16); the one-hot lets a linear
        model give each choice its own weight.
        """
        idx = np.asarray([self.check(c) for c in configs], dtype=np.int64).reshape(len(configs), -1)
        out = np.zeros((len(configs), self.encoding_width), dtype=np.float32)
        for k, (offset, d, onehot) in enumerate(self._encoding_layout):
            out[:, offset] = idx[:, k] / max(d - 1, 1)
            if onehot:
                out[np.arange(len(configs)), offset + 1 + idx[:, k]] = 1.0
        return out

    def encode(self, config: Sequence[int]) -> np.ndarray:
        return self.encode_batch([config])[0]

    # ---- values <-> indices ------------------------------------------------------------------
    def values(self, config: Sequence[int]) -> dict[str, Any]:
        config = self.check(config)
        return {k.name: k.choices[i] for k, i in zip(self.knobs, config)}

    def index_of(self, values: Mapping[str, Any]) -> Config:
        """Inverse of :meth:`values`; every knob must be given and nothing else."""
        extra = set(values) - set(self.names)
        if extra:
            raise ValueError(f"unknown knobs {sorted(extra)}; knobs: {list(self.names)}")
        missing = [n for n in self.names if n not in values]
        if missing:
            raise ValueError(f"missing values for knobs {missing}")
        return tuple(k.index(values[k.name]) for k in self.knobs)

    # ---- flat indices and enumeration --------------------------------------------------------
    @cached_property
    def _strides(self) -> tuple[int, ...]:
        strides, acc = [], 1
        for d in reversed(self.dims):
            strides.append(acc)
            acc *= d
        return tuple(reversed(strides))

    def flat_index(self, config: Sequence[int]) -> int:
        return sum(i * s for i, s in zip(self.check(config), self._strides))

    def config_at(self, index: int) -> Config:
        index = int(index)
        if not 0 <= index < self.size:
            raise IndexError(f"flat index {index} out of range for a space of {self.size} configs")
        return tuple((index // s) % d for s, d in zip(self._strides, self.dims))

    def iter_configs(self, max_size: int = DEFAULT_MAX_ENUMERATION) -> Iterator[Config]:
        """All configs (valid or not) in flat-index order; refuses spaces above ``max_size``."""
        if self.size > max_size:
            raise SpaceTooLargeError(
                f"space has {self.size} configs, more than the enumeration limit {max_size}; "
                "sample it or raise max_size explicitly"
            )
        return itertools.product(*(range(d) for d in self.dims))

    def __iter__(self) -> Iterator[Config]:
        return self.iter_configs()

    # ---- JSON ----------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """Knobs only: the validity predicate is code and must be re-attached by whoever loads."""
        return {"version": 1, "knobs": [k.to_json() for k in self.knobs]}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], is_valid: Callable[[Config], bool] | None = None) -> ConfigSpace:
        if obj.get("version", 1) != 1:
            raise ValueError(f"unsupported config space format version {obj.get('version')!r}")
        return cls(tuple(Knob.from_json(k) for k in obj["knobs"]), is_valid=is_valid)

    def key(self) -> str:
        """Stable fingerprint of the knobs, so stored configs can be checked against their space."""
        return canonical_hash(self.to_json(), allow_nan=True)

    def config_to_json(self, config: Sequence[int]) -> list[int]:
        return list(self.check(config))

    def config_from_json(self, obj: Sequence[Any]) -> Config:
        if not isinstance(obj, list | tuple) or not all(
            isinstance(i, int | np.integer) and not isinstance(i, bool) for i in obj
        ):
            raise ValueError(f"a config in JSON is a list of ints, got {obj!r}")
        return self.check(obj)
