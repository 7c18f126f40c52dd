"""The JSON-lines codec alone (no database): round trip, and garbage only ever raises ValueError."""

from __future__ import annotations

import io
import json
import math
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tuning_db import Record, TargetInfo, WorkloadInfo, canonical_json, steps_hash
from tuning_db.canonical import median
from tuning_db.jsonl import encode_record, header_line, parse_line, read_lines

NOW = datetime(2026, 12, 2, tzinfo=UTC)
json_leaf = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
json_value = st.recursive(
    json_leaf,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=5), kids, max_size=4),
    max_leaves=12,
)


def _record(steps: list, costs: tuple[float, ...]) -> Record:
    text = canonical_json(steps)
    return Record(
        1,
        "w" * 64,
        "cpu",
        text,
        steps_hash(steps),
        costs,
        median(costs),
        0,
        "",
        0.5,
        0.25,
        "host",
        "dev0",
        "w3",
        None,
        NOW,
        1,
    )


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(json_value, max_size=5),
    costs=st.lists(st.floats(1e-9, 10.0), min_size=1, max_size=5).map(tuple),
)
def test_round_trip(steps: list, costs: tuple[float, ...]) -> None:
    r = _record(steps, costs)
    w = WorkloadInfo("w" * 64, "mm", {"op": "matmul"}, 1e9, NOW)
    t = TargetInfo("cpu", "cpu", {"cores": 2}, NOW)
    line = parse_line(encode_record(r, w, t), 7)
    assert line.line_no == 7 and line.workload_spec == {"op": "matmul"} and line.target_kind == "cpu"
    assert line.record.costs == costs and line.record.created == NOW
    assert steps_hash(line.record.steps) == r.steps_hash and line.record.host == "host"


@settings(max_examples=150, deadline=None)
@given(obj=json_value)
def test_any_json_value_is_accepted_or_rejected_with_a_line_number(obj: object) -> None:
    try:
        parse_line(json.dumps(obj), 12)
    except ValueError as e:
        assert str(e).startswith("line 12: ")


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=60))
def test_garbage_text_is_rejected_with_a_line_number(text: str) -> None:
    with pytest.raises(ValueError, match=r"^line (1|2): "):
        list(read_lines(io.StringIO(header_line() + text.replace("\n", " ") + "x\n")))


def test_median_matches_measure_layer_definition() -> None:
    assert median((3.0, 1.0, 2.0)) == 2.0 and median((4.0, 1.0, 2.0, 3.0)) == 2.5
    assert math.isclose(median((1e-3,)), 1e-3)


def test_canonical_json_is_key_order_free_and_strict() -> None:
    assert canonical_json({"b": 1, "a": [1, {"d": 2, "c": 3}]}) == '{"a":[1,{"c":3,"d":2}],"b":1}'
    assert steps_hash([{"x": 1, "y": 2}]) == steps_hash('[{"y": 2, "x": 1}]')
    with pytest.raises(ValueError):
        canonical_json([math.nan])
