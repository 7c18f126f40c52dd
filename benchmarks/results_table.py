"""Print the Markdown results table of one tuned-CPU-suite run from its JSON in benchmarks/results/.

The README's results table and docs/benchmarks.md's (`benchmarks/docs_benchmarks.py`) are this
script's output; no figure in them is typed by hand. Every time carries the thread count its side
computed with, peers that allocate their output on every call are marked, and a last column names
the fastest contender, so a peer that is ahead says so in the table itself.

    .venv/bin/python benchmarks/results_table.py                          # this machine's latest run
    .venv/bin/python benchmarks/results_table.py bench_tune_cpu_znver4    # any bench_tune_cpu* stem or path

The input is what `benchmarks/bench_tune_cpu.py` writes: {"machine": {...}, "trials": N, "rows":
[{"workload", "autosched_ms", "gflop", "<peer>_ms", "threads": {contender: n}, "allocates": {peer:
bool}, "measured", "tune_seconds", "tvm": {"side_by_side": {...}, "threads", "measured", ...}?}, ...]}.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
PEERS = ("torch eager", "torch.compile", "numpy")


def _ms(value: float) -> str:
    return f"{value:.3f} ms" if value < 1 else f"{value:.2f} ms"


def _timed(ms: float | None, threads: object, allocates: bool = False) -> str:
    if ms is None:
        return "—"
    return f"{_ms(ms)} ({threads} thr{', allocates' if allocates else ''})"


def contenders(r: dict) -> dict[str, float]:
    """Milliseconds per call of every contender of one row (TVM: its side-by-side time)."""
    out = {"autosched": r["autosched_ms"], **{p: r[f"{p}_ms"] for p in PEERS if r.get(f"{p}_ms") is not None}}
    sbs = (r.get("tvm") or {}).get("side_by_side") or {}
    if sbs.get("tvm_seconds"):
        out["TVM"] = sbs["tvm_seconds"] * 1e3
    return out


def peers_ahead(r: dict) -> list[tuple[str, float]]:
    """(peer, its speed over ours) for each peer faster than our kernel on this row, fastest first."""
    times = contenders(r)
    ours = times.pop("autosched")
    sbs = (r.get("tvm") or {}).get("side_by_side") or {}
    if "TVM" in times:
        # against ours as timed beside it in TVM's process; TVM counts as ahead when either its side-by-side
        # time or its own timer's (time_evaluator) beats that, the reading more favourable to TVM
        own = (r.get("tvm") or {}).get("best_seconds") or math.inf
        times["TVM"] = ours * min(sbs["speedup_vs_tvm"], own / sbs["autosched_seconds"])
    return sorted(((n, ours / t) for n, t in times.items() if t < ours), key=lambda x: -x[1])


def _row(r: dict) -> str:
    ours = r["autosched_ms"]
    th, alloc = r.get("threads", {}), r.get("allocates", {})
    tvm = r.get("tvm") or {}
    sbs = tvm.get("side_by_side") or {}
    if sbs.get("speedup_vs_tvm"):
        vs_tvm = (f"{sbs['speedup_vs_tvm']:.2f}x ({_ms(sbs['autosched_seconds'] * 1e3)} "
                  f"({sbs.get('autosched_threads', '?')} thr) against {_ms(sbs['tvm_seconds'] * 1e3)} "
                  f"({sbs.get('tvm_threads', tvm.get('threads', '?'))} thr); TVM's own timer "
                  f"{_ms(tvm['best_seconds'] * 1e3)})")
    else:
        vs_tvm = tvm.get("missing", "—") if tvm else "—"
    speed = r.get("speed_vs_torch")
    tune = f"{r['tune_seconds']:.0f} s" + (f" / {tvm['tune_seconds']:.0f} s" if tvm.get("tune_seconds") else "")
    meas = f"{r.get('measured', '?')}" + (f" / {tvm['measured']}" if tvm.get("measured") else "")
    ahead = peers_ahead(r)
    fastest = f"**{ahead[0][0]}** ({ahead[0][1]:.2f}x ours)" if ahead else "autosched"
    cells = [r["workload"], f"{_ms(ours)} ({r['gflop'] / ours * 1e3:.0f} GFLOP/s, {th.get('autosched', '?')} thr)",
             *(_timed(r.get(f"{p}_ms"), th.get(p, "?"), bool(alloc.get(p))) for p in PEERS),
             "—" if speed is None else f"{speed:.2f}x", vs_tvm, tune, meas, fastest]
    return "| " + " | ".join(cells) + " |"


def table(path: Path) -> str:
    data = json.loads(path.read_text())
    m = data["machine"]
    mcpu = {(r.get("tvm") or {}).get("mcpu") for r in data["rows"]} - {None}
    tvm_versions = sorted({(r.get("tvm") or {}).get("tvm") for r in data["rows"]} - {None})
    arch = (f", TVM {'/'.join(tvm_versions)}" if tvm_versions else "") + (f" `-mcpu={sorted(mcpu)[0]}`" if mcpu else "")
    rel = path.resolve().relative_to(RESULTS.parent.parent) if path.resolve().is_relative_to(RESULTS.parent.parent) \
        else path
    dates = sorted({r.get("date", m["date"]) for r in data["rows"]})
    head = (f"Measured {' to '.join(dict.fromkeys([dates[0], dates[-1]]))} on {m['cpu']} "
            f"(`{data.get('machine_tag', '?')}`, {m['cores']} cores), Python {m.get('python')}, "
            f"torch {m.get('torch')}, "
            f"numpy {m.get('numpy')}{arch}; {data['trials']} trials per workload from a cold kernel cache; medians "
            f"of interleaved rounds; thr = threads that side computed with (`{rel}`).\n\n")
    cols = ["workload", "autosched (tuned)", *PEERS, "vs torch eager", "vs TVM MetaSchedule (side by side)",
            "tuning time (ours / TVM)", "measurements (ours / TVM)", "fastest"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += [_row(r) for r in data["rows"]]
    return head + "\n".join(lines) + "\n"


def latest() -> Path:
    """This suite's result file with the newest run (the protocol's files: rows with thread counts)."""
    best: tuple[str, Path] | None = None
    for p in RESULTS.glob("bench_tune_cpu_*.json"):
        try:
            rows = json.loads(p.read_text()).get("rows", [])
        except (json.JSONDecodeError, AttributeError):
            continue
        dates = [r["date"] for r in rows if "threads" in r and "date" in r]
        if dates and (best is None or max(dates) > best[0]):
            best = (max(dates), p)
    if best is None:
        raise SystemExit(f"no bench_tune_cpu_*.json with thread counts under {RESULTS}; run bench_tune_cpu.py")
    return best[1]


def resolve(name: str | None) -> Path:
    if name is None:
        return latest()
    p = Path(name)
    if p.exists():
        return p
    p = RESULTS / (name if name.endswith(".json") else f"{name}.json")
    if not p.exists():
        raise SystemExit(f"results_table: no such run {name!r} ({p} does not exist)")
    return p


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", nargs="?", default=None, help="a stem under benchmarks/results/ or a JSON path")
    args = ap.parse_args(argv)
    print(table(resolve(args.run)), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
