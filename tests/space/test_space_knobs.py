"""Knob and ConfigSpace: construction, moves, encodings, enumeration and JSON, with property tests."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autosched.space.knobs import ONEHOT_MAX, ConfigSpace, Knob, SpaceTooLargeError


def _space() -> ConfigSpace:
    return ConfigSpace(
        (
            Knob("tile", (1, 2, 4, 8), "tile"),
            Knob("split", ((1, 4), (2, 2), (4, 1)), "tile"),
            Knob("loc", ("root", "inner", "outer"), "location"),
            Knob("vec", (False, True), "flag"),
        )
    )


# ---- Knob ------------------------------------------------------------------------------------------
def test_knob_normalizes_and_validates() -> None:
    k = Knob("split", [[1, 4], [2, 2]])
    assert k.choices == ((1, 4), (2, 2)) and k.index([2, 2]) == 1
    assert Knob("b", (True, 1, 1.5)).index(1) == 1  # True, 1 and 1.5 are distinct choices
    assert Knob("n", (np.int64(3), 5)).choices == (3, 5)
    with pytest.raises(ValueError, match="no choices"):
        Knob("e", ())
    with pytest.raises(ValueError, match="duplicate"):
        Knob("d", (1, 2, 1))
    with pytest.raises(TypeError):
        Knob("o", (object(),))
    with pytest.raises(ValueError, match="not a choice"):
        k.index((3, 3))


def test_knob_order_is_inferred() -> None:
    assert Knob("t", (1, 2, 4)).ordered
    assert not Knob("t", (4, 1, 2)).ordered  # not monotonic
    assert not Knob("l", ("a", "b")).ordered
    assert not Knob("f", (False, True)).ordered
    assert Knob("l", ("a", "b", "c"), ordered=True).ordered


# ---- ConfigSpace -----------------------------------------------------------------------------------
def test_shape_and_flat_indices_follow_product_order() -> None:
    s = _space()
    assert s.dims == (4, 3, 3, 2) and s.size == 72
    assert list(s) == list(itertools.product(*(range(d) for d in s.dims)))
    assert [s.flat_index(c) for c in s] == list(range(72))
    assert all(s.config_at(i) == c for i, c in enumerate(s))
    with pytest.raises(IndexError):
        s.config_at(72)


def test_enumeration_is_guarded() -> None:
    big = ConfigSpace(tuple(Knob(f"k{i}", tuple(range(10))) for i in range(7)))
    assert big.size == 10**7
    with pytest.raises(SpaceTooLargeError, match="enumeration limit"):
        list(big)
    assert len(list(_space().iter_configs(max_size=72))) == 72


def test_values_and_index_of_round_trip() -> None:
    s = _space()
    c = (2, 1, 0, 1)
    assert s.values(c) == {"tile": 4, "split": (2, 2), "loc": "root", "vec": True}
    assert s.index_of(s.values(c)) == c
    assert s.index_of(json.loads(json.dumps(s.values(c)))) == c  # tuples came back as lists
    with pytest.raises(ValueError, match="missing"):
        s.index_of({"tile": 4})
    with pytest.raises(ValueError, match="unknown knobs"):
        s.index_of({**s.values(c), "zzz": 1})
    with pytest.raises(ValueError, match="not a choice"):
        s.index_of({**s.values(c), "tile": 3})


def test_membership_and_validity() -> None:
    s = _space().with_validity(lambda c: c[0] < 2)
    assert s.contains((3, 0, 0, 0)) and not s.valid((3, 0, 0, 0)) and s.valid((1, 0, 0, 0))
    assert not s.contains((4, 0, 0, 0)) and not s.contains((0, 0, 0)) and not s.contains((0, 0, 0, -1))
    with pytest.raises(ValueError, match="does not fit"):
        s.check((0, 0, 0, 2))
    rng = np.random.default_rng(0)
    assert all(s.valid(s.sample_valid(rng)) for _ in range(50))
    assert _space().with_validity(lambda c: False).sample_valid(rng, max_tries=5) is None
    assert s == _space()  # the predicate is not part of equality


def test_neighbors_are_local_on_ordered_knobs() -> None:
    s = _space()
    nb = s.neighbors((1, 0, 0, 0))
    tile_moves = {c[0] for c in nb if c[1:] == (0, 0, 0)} - {1}
    assert tile_moves == {0, 2}  # ordered: only adjacent indices
    loc_moves = {c[2] for c in nb if c[:2] == (1, 0) and c[3] == 0} - {0}
    assert loc_moves == {1, 2}  # unordered: every other choice
    assert all(sum(a != b for a, b in zip(c, (1, 0, 0, 0))) == 1 for c in nb)
    assert len(nb) == len(set(nb))


def test_encoding_layout() -> None:
    s = _space()
    x = s.encode_batch([(0, 0, 0, 0), (3, 2, 2, 1)])
    # tile: index + 4 one-hot, split: 1 + 3, loc: 1 + 3, vec (binary): index only
    assert x.shape == (2, s.encoding_width) == (2, 5 + 4 + 4 + 1)
    assert x[0, 0] == 0.0 and x[1, 0] == 1.0 and x[1, 4] == 1.0 and x[1, -1] == 1.0
    assert np.array_equal(s.encode((3, 2, 2, 1)), x[1])
    wide = ConfigSpace((Knob("w", tuple(range(ONEHOT_MAX + 1))),))
    assert wide.encoding_width == 1


def test_json_round_trip_and_fingerprint() -> None:
    s = _space()
    text = json.dumps(s.to_json())
    back = ConfigSpace.from_json(json.loads(text))
    assert back == s and back.key() == s.key()
    assert ConfigSpace((Knob("tile", (1, 2)),)).key() != s.key()
    c = (3, 1, 2, 0)
    assert s.config_from_json(json.loads(json.dumps(s.config_to_json(c)))) == c
    for bad in ([3, 1, 2], [3, 1, 2, 5], "3120", [3.0, 1, 2, 0], [True, 1, 2, 0]):
        with pytest.raises(ValueError):
            s.config_from_json(bad)
    with pytest.raises(ValueError, match="version"):
        ConfigSpace.from_json({"version": 99, "knobs": []})


def test_duplicate_knob_names_rejected() -> None:
    with pytest.raises(ValueError, match="duplicate knob names"):
        ConfigSpace((Knob("a", (1,)), Knob("a", (2,))))


# ---- properties ------------------------------------------------------------------------------------
_scalar = st.one_of(st.integers(-1000, 1000), st.text(max_size=4), st.booleans())
_choice = st.one_of(_scalar, st.tuples(st.integers(1, 64), st.integers(1, 64)))


@st.composite
def spaces(draw) -> ConfigSpace:
    n = draw(st.integers(1, 6))
    knobs = []
    for i in range(n):
        choices = draw(st.lists(_choice, min_size=1, max_size=7, unique_by=repr))
        knobs.append(Knob(f"k{i}", tuple(choices), draw(st.sampled_from(["tile", "flag", "location"]))))
    return ConfigSpace(tuple(knobs))


@st.composite
def space_and_configs(draw):
    s = draw(spaces())
    cfg = st.tuples(*(st.integers(0, d - 1) for d in s.dims))
    return s, draw(cfg), draw(cfg), draw(st.integers(0, 2**32 - 1))


@settings(max_examples=60, deadline=None)
@given(space_and_configs())
def test_moves_stay_in_bounds(args) -> None:
    s, a, b, seed = args
    rng = np.random.default_rng(seed)
    m = s.mutate(a, rng)
    assert s.contains(m)
    movable = sum(d > 1 for d in s.dims)
    assert (m != a) == (movable > 0)
    assert sum(x != y for x, y in zip(m, a)) <= 1
    m2 = s.mutate(a, rng, n_knobs=3)
    assert s.contains(m2) and sum(x != y for x, y in zip(m2, a)) <= min(3, movable)
    child = s.crossover(a, b, rng)
    assert s.contains(child) and all(c in (x, y) for c, x, y in zip(child, a, b))
    assert all(s.contains(n) for n in s.neighbors(a))
    assert s.contains(s.sample(rng))
    batch = s.mutate_batch([a, b, a], rng)
    assert all(s.contains(c) for c in batch)
    assert all(sum(x != y for x, y in zip(c, p)) == (1 if movable else 0) for c, p in zip(batch, [a, b, a]))


@settings(max_examples=60, deadline=None)
@given(space_and_configs())
def test_json_and_index_round_trips(args) -> None:
    s, a, _, _ = args
    back = ConfigSpace.from_json(json.loads(json.dumps(s.to_json())))
    assert back == s and back.key() == s.key()
    assert back.config_from_json(json.loads(json.dumps(s.config_to_json(a)))) == a
    assert s.index_of(json.loads(json.dumps(s.values(a)))) == a
    assert s.config_at(s.flat_index(a)) == a
    x = s.encode(a)
    assert x.shape == (s.encoding_width,) and np.all((x >= 0) & (x <= 1))
