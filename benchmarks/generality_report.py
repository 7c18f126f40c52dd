"""Tables and the verdict of the generality suite (`bench_generality.py`): one row per workload, then
each target of issue 29 evaluated as met / not met from the rows of one results file."""

from __future__ import annotations

import math

from generality_dags import KINDS

# issue 29's targets: first run (capped geomean, floor), full run (floor), against TVM (geomean, time share)
FIRST_GEOMEAN, RATIO_CAP, FIRST_FLOOR, FULL_FLOOR = 0.9, 2.0, 0.5, 0.6
TVM_GEOMEAN, TVM_TIME_SHARE, TVM_MIN_WORKLOADS, MIN_WORKLOADS = 1.2, 0.5, 8, 24

METHOD = ("Medians of interleaved rounds in one process (our kernel after the first run, after the continuation, "
          "torch eager); ratio = torch time / our time (above 1: we are faster); our kernels write into a "
          "preallocated output, torch eager too except where marked *alloc*; TVM MetaSchedule tunes the same DAG "
          "with the same total trials from a cold start, and its best kernel is timed beside our final one in "
          "TVM's process; tuning starts from an empty database and a cold kernel cache.")


def geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def tvm_speedup(r: dict) -> float | None:
    """Our speed over TVM's: side by side in TVM's process when measured, else None."""
    sb = (r.get("tvm") or {}).get("side_by_side") or {}
    return sb.get("speedup_vs_tvm")


def _ms(v: float | None) -> str:
    return "—" if v is None else f"{v:.3f} ms"


def _row(r: dict) -> str:
    shape = "x".join(map(str, r.get("shape", [])))
    if "error" in r:
        return f"| {r['workload']} | {r.get('kind', '')} | {shape} | error: {r['error'][:160]} |" + " |" * 9 + " no |"
    tv = r.get("tvm") or {}
    sb = tv.get("side_by_side") or {}
    if sb:
        tvm_cell = f"{sb['tvm_seconds'] * 1e3:.3f} ms"
    elif "best_seconds" in tv:
        tvm_cell = f"{tv['best_seconds'] * 1e3:.3f} ms (own timer)"
    else:
        tvm_cell = tv.get("missing", "not run")[:80] if tv else "not run"
    sp = tvm_speedup(r)
    tune = f"{r['tune_seconds']:.0f}" + (f" / {tv['tune_seconds']:.0f}" if "tune_seconds" in tv else "")
    th = r.get("threads", {})
    threads = f"{th.get('autosched', '?')} / {th.get('torch eager', '?')}" + (
        f" / {tv['threads']}" if "threads" in tv else "")
    alloc = " *alloc*" if r.get("torch_allocates") else ""
    meas = "+".join(str(m) for m in r.get("measured", []))
    return (f"| {r['workload']} | {r['kind']} | {shape} | {_ms(r['ours_first_ms'])} | {_ms(r['ours_ms'])} | "
            f"{_ms(r['torch_ms'])}{alloc} | {r['ratio_first']:.2f}x | {r['ratio']:.2f}x | {tvm_cell} | "
            f"{'—' if sp is None else f'{sp:.2f}x'} | {tune} | {meas} | {threads} | "
            f"{'yes' if r.get('correct') else 'no'}{'' if r.get('torch_correct', True) else ' (torch twin wrong)'} |")


def table(payload: dict) -> str:
    tf, tt = payload["trials_first"], payload["trials"]
    lines = [f"| workload | kind | shape | ours@{tf} | ours@{tt} | torch eager | ratio@{tf} | ratio@{tt} | "
             f"TVM@{tt} | ours vs TVM | tune s (ours / TVM) | measured (first + rest) | threads (ours / torch / TVM) "
             "| correct |", "|" + "---|" * 14]
    lines += [_row(r) for r in payload["rows"]]
    bad = [f"- {r['workload']}: " + "; ".join(m for m in r.get("checks", {}).values() if ": ok" not in m)
           for r in payload["rows"] if "error" not in r and not (r.get("correct") and r.get("torch_correct", True))]
    if bad:
        lines += ["", "Failed checks:", "", *bad]
    return "\n".join(lines)


def _verdict(ok: bool | None) -> str:
    return "not measured" if ok is None else ("**met**" if ok else "**not met**")


def summary(payload: dict) -> str:
    """Each target of issue 29, evaluated on the rows of this file."""
    rows = payload["rows"]
    tf, tt = payload["trials_first"], payload["trials"]
    good = [r for r in rows if "error" not in r]
    kinds = {r.get("kind") for r in rows}
    lines = ["## Targets (issue 29)", "", "| target | value | verdict |", "|---|---|---|"]
    complete = len(rows) >= min(MIN_WORKLOADS, payload.get("suite_size", MIN_WORKLOADS)) and set(KINDS) <= kinds
    lines.append(f"| suite run: >= {MIN_WORKLOADS} workloads covering every kind | {len(rows)} of "
                 f"{payload.get('suite_size', '?')} workloads, {len(kinds & set(KINDS))} of {len(KINDS)} kinds | "
                 f"{_verdict(complete)} |")
    n_ok = sum(bool(r.get("correct")) for r in rows)
    lines.append(f"| every workload correct against the reference | {n_ok} of {len(rows)} | "
                 f"{_verdict(n_ok == len(rows) if rows else None)} |")
    if good:
        capped = geomean([min(r["ratio_first"], RATIO_CAP) for r in good])
        worst1 = min(good, key=lambda r: r["ratio_first"])
        worst2 = min(good, key=lambda r: r["ratio"])
        lines += [
            f"| first run ({tf} trials): geomean vs torch eager (each capped at {RATIO_CAP:g}x) >= {FIRST_GEOMEAN}x "
            f"| {capped:.2f}x | {_verdict(capped >= FIRST_GEOMEAN)} |",
            f"| first run ({tf} trials): none below {FIRST_FLOOR}x torch eager | min {worst1['ratio_first']:.2f}x "
            f"({worst1['workload']}) | {_verdict(worst1['ratio_first'] >= FIRST_FLOOR)} |",
            f"| {tt} trials: none below {FULL_FLOOR}x torch eager | min {worst2['ratio']:.2f}x ({worst2['workload']}) "
            f"| {_verdict(worst2['ratio'] >= FULL_FLOOR)} |",
        ]
    vs = [(r, tvm_speedup(r)) for r in good if tvm_speedup(r) is not None]
    if vs:
        sp = [s for _, s in vs]
        worst = min(vs, key=lambda p: p[1])
        ours_s = sum(r["tune_seconds"] for r, _ in vs)
        tvm_s = sum(r["tvm"]["tune_seconds"] for r, _ in vs)
        lines += [
            f"| TVM MetaSchedule run on >= {TVM_MIN_WORKLOADS} workloads | {len(vs)} | "
            f"{_verdict(len(vs) >= TVM_MIN_WORKLOADS)} |",
            f"| ahead of TVM on every workload it runs | {sum(s > 1 for s in sp)} of {len(sp)} ahead; min "
            f"{worst[1]:.2f}x ({worst[0]['workload']}) | {_verdict(all(s > 1 for s in sp))} |",
            f"| geomean vs TVM >= {TVM_GEOMEAN}x | {geomean(sp):.2f}x | {_verdict(geomean(sp) >= TVM_GEOMEAN)} |",
            f"| tuning time <= {TVM_TIME_SHARE:g} of TVM's (sum over those workloads) | {ours_s:.0f} s vs "
            f"{tvm_s:.0f} s ({ours_s / tvm_s:.2f}) | {_verdict(ours_s <= TVM_TIME_SHARE * tvm_s)} |",
        ]
    else:
        lines.append("| against TVM MetaSchedule | no side-by-side TVM figures in this run | not measured |")
    return "\n".join(lines)
