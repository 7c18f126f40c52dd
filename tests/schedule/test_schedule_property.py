"""Property test: random legal-or-not step sequences on every op of the library.

For each op, hypothesis draws small shapes (odd ones too) and up to ten random primitive calls:
splits by factors that do not divide or exceed the extent, fuses, reorders, annotations, pragmas,
cache_read/cache_write, compute_at at random loops, compute_inline, rfactor, bind. Then either

* the kernel builds and its output equals the numpy reference (tolerance by dtype and reduction
  length), and the schedule's JSON replays to the identical loop nest and C source; or
* a step, or the lowering, is refused with a `ScheduleError` whose message names the step kind,
  the stage and (for loop steps) the loop, and the replayed schedule is refused the same way.

Anything else (another exception, a wrong answer, a crash) fails. `derandomize=True` makes the CI
run repeatable; compiled kernels are cached by source hash, so reruns cost little.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import autosched as asc
from tests.support.sched_fuzz import OPS, STATS, HypChooser, random_schedule, summary_lines
from tests.support.sched_helpers import assert_matches, replay_python, run_kernel

EXAMPLES_PER_OP = 48  # 11 ops: 528 examples in the default run
pytestmark = pytest.mark.slow  # a property/fuzz suite: left out of the quick tier


def _check_step_message(call: str, msg: str, stage_names: set[str]) -> None:
    m = re.match(r"step (\d+) \((\w+), stage '([^']*)'", msg)
    if m is None:  # refused while building the step itself (field types): names the step and stage
        assert re.match(r"step '\w+'( of stage '[^']*')?: field", msg), f"{call}: unclear refusal {msg!r}"
        return
    kind = m.group(2)
    assert kind in call or (kind == "annotate" and re.search(r"\.(parallel|vectorize|unroll)\(", call)), (call, msg)
    loop = re.search(r"\.(?:split|parallel|vectorize|unroll|pragma|bind|compute_at\(s\[[^]]*\],|rfactor\('[^']*',)"
                     r"\s*\(?'([^']*)'", call)
    if loop is not None:
        assert f"loop '{loop.group(1)}'" in msg, f"{call}: refusal does not name the loop: {msg!r}"


def _check_lower_message(msg: str, stage_names: set[str]) -> None:
    named = {n for n in stage_names if f"'{n}'" in msg}
    assert named, f"lowering refusal names no stage: {msg!r}"


@pytest.mark.parametrize("op_name", sorted(OPS))
@settings(max_examples=EXAMPLES_PER_OP, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_random_schedules(op_name: str, data) -> None:
    stats = STATS.setdefault(op_name, Counter())
    s, tensors, trace = random_schedule(HypChooser(data), op_name)
    note("\n".join(trace.calls))
    stats["examples"] += 1
    stats["steps"] += len(s.steps)
    stats["refused_steps"] += len(trace.refused)
    names = {x.name for x in s.state.stages}
    for call, msg in trace.refused:
        _check_step_message(call, msg, names)
    s2 = asc.Schedule.from_json(s.to_json())
    args2 = [s2.dag[t.name] for t in tensors]
    assert replay_python(s).steps == s.steps
    try:
        text = asc.lower(s, tensors).show()
    except asc.ScheduleError as exc:
        _check_lower_message(str(exc), names)
        with pytest.raises(asc.ScheduleError) as again:
            asc.lower(s2, args2)
        assert str(again.value) == str(exc)
        stats["refused"] += 1
        return
    assert asc.lower(s2, args2).show() == text
    f = asc.build(s, tensors)
    assert asc.render(s2, args2)[0].code == f.source
    got, want = run_kernel(f, tensors, s.dag, seed=len(s.steps))
    assert_matches(got, want, s.dag, context=f"\n{text}")
    stats["built"] += 1


def test_random_schedules_summary() -> None:
    """Runs after the property test (file order): a short summary, and a healthy share built."""
    if not STATS:
        pytest.skip("property test not run in this session")
    for line in summary_lines():
        print(line)
    for name, c in STATS.items():
        if c["examples"] >= 20:
            assert c["built"] >= 0.3 * c["examples"], f"{name}: too few schedules built: {dict(c)}"
    total = sum(STATS.values(), Counter())
    assert total["built"] + total["refused"] == total["examples"]
    if total["examples"] >= 200:
        assert total["built"] >= 0.6 * total["examples"]
