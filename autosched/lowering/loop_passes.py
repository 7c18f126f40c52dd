"""Passes over a lowered loop nest: auto-unroll pragmas and the parallel-nesting check."""

from __future__ import annotations

from autosched.lowering import arith
from autosched.lowering.ir import For, Stmt
from autosched.schedule.state import ScheduleError, Stage


def walk_stmts(s: Stmt):
    """Pre-order walk over statements."""
    yield s
    for attr in ("body",):
        if hasattr(s, attr):
            yield from walk_stmts(getattr(s, attr))
    if hasattr(s, "stmts"):
        for x in s.stmts:
            yield from walk_stmts(x)


def apply_pragmas(st: Stage, stmt: Stmt) -> Stmt:
    """Apply the stage's `auto_unroll_max_step` and `nontemporal` pragmas to its emitted nest `stmt`."""
    for key, value in st.pragmas.items():
        pname, loop = key.split("@", 1)
        if pname == "nontemporal" and value:
            _mark_streaming(st, stmt, loop)
            continue
        if pname != "auto_unroll_max_step" or value <= 1:
            continue
        for node in walk_stmts(stmt):
            if isinstance(node, For) and node.loop_name == loop and node.stage == st.name:
                _auto_unroll(node.body, value, st.name)
    return stmt


def _mark_streaming(st: Stage, stmt: Stmt, loop: str) -> None:
    """Streaming (non-temporal) stores need whole vectors: the pragma must name a vectorized loop."""
    found = [n for n in walk_stmts(stmt) if isinstance(n, For) and n.loop_name == loop and n.stage == st.name]
    if not found:
        return  # the loop was emitted nowhere (e.g. an empty nest): nothing to mark
    for node in found:
        if node.kind != "vectorized":
            raise ScheduleError(f"stage {st.name!r}, loop {loop!r}: pragma nontemporal needs a vectorized loop "
                                f"(this one is {node.kind}); vectorize it first")
        node.streaming = True


def _auto_unroll(s: Stmt, max_step: int, stage: str) -> int:
    """Mark inner loops of constant extent unrolled while the unrolled body stays under `max_step`.
    Returns the number of statement instances `s` expands to (-1 if unbounded)."""
    if isinstance(s, For):
        n = arith.const_value(s.extent)
        inner = _auto_unroll(s.body, max_step, stage)
        if n is None or inner < 0:
            return -1
        total = n * inner
        if total <= max_step and s.kind == "serial" and s.stage == stage:
            s.kind, s.unroll = "unrolled", n
        return total
    if hasattr(s, "stmts"):
        parts = [_auto_unroll(x, max_step, stage) for x in s.stmts]
        return -1 if any(p < 0 for p in parts) else sum(parts)
    if hasattr(s, "body"):
        return _auto_unroll(s.body, max_step, stage)
    return 1


def check_parallel_nesting(s: Stmt, outer: For | None) -> None:
    """A parallel loop may not sit inside another parallel loop nor inside a vectorized one (the lanes
    of a vector cannot each start a thread team); `outer` is the innermost such loop around `s`."""
    if isinstance(s, For) and s.kind == "parallel" and outer is not None:
        how = "another parallel" if outer.kind == "parallel" else "a vectorized"
        raise ScheduleError(f"stage {s.stage!r}, loop {s.loop_name!r}: parallel loop nested inside {how} loop "
                            f"({outer.loop_name!r} of stage {outer.stage!r}); parallelize only the outer one")
    if isinstance(s, For) and s.kind in ("parallel", "vectorized"):
        outer = s
    if hasattr(s, "stmts"):
        for x in s.stmts:
            check_parallel_nesting(x, outer)
    elif hasattr(s, "body"):
        check_parallel_nesting(s.body, outer)
