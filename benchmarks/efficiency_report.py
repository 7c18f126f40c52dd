"""The efficiency protocol's summary and report: measurements to reach a level, spreads over seeds,
the tables and the plot (`bench_efficiency.py` measures; this module only reads curves)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from bench_efficiency import Run

TVM_ROW = {"matmul": "matmul1024", "conv2d": "conv2d", "dense_bias_relu": "dense_bias_relu", "softmax": "softmax"}
"""Row of bench_tune_cpu's results that holds TVM's figures for each workload of the protocol."""

def to_reach(curve: list[float], level: float) -> int | None:
    """Measurements until the best so far reaches `level`; None if it never does within the curve."""
    for k, v in enumerate(curve, 1):
        if v >= level:
            return k
    return None


def spread(values: list[int | None]) -> dict:
    """Median, min and max over seeds; a seed that never reached counts as infinite (a median that
    is infinite is None: fewer than half the seeds reached the level)."""
    xs = sorted(math.inf if v is None else v for v in values)
    med = float(np.median(xs)) if xs else math.inf
    fin = lambda x: None if not math.isfinite(x) else x  # noqa: E731
    return {"median": fin(med), "min": fin(xs[0]) if xs else None, "max": fin(xs[-1]) if xs else None,
            "reached": sum(v is not None for v in values), "seeds": len(values)}


def verdict(s: dict, limit: int, budget: int) -> str:
    """"met" / "not met" against `limit` measurements; "undecided" when the budget stopped short of it."""
    if s["median"] is not None:
        return "met" if s["median"] <= limit else "not met"
    return "not met" if budget >= limit else f"undecided (budget {budget} < {limit})"


def summarize(runs: list[Run], tvm_gflops: float | None, has_rule_seeds: bool = True) -> dict:
    """Per variant: final and audited GFLOP/s, measurements to TVM's 200-trial result and to random
    search's median final result (random, seeds off, its own budget), and the issue's targets. A space
    without rule-derived seeds (softmax) has nothing to turn on: its seeds-off runs answer the
    with-seeds target too."""
    by: dict[str, list[Run]] = {}
    for r in runs:
        by.setdefault(r.variant.label, []).append(r)
    base = next((rs for lb, rs in by.items() if rs[0].variant.searcher == "random" and rs[0].variant.model is None
                 and not rs[0].variant.seeds), None)
    random_level = float(np.median([r.meter.curve[-1] if r.meter.curve else 0.0 for r in base])) if base else None
    random_budget = base[0].variant.budget if base else None
    rows = []
    for lb, rs in by.items():
        v = rs[0].variant
        finals = [r.meter.curve[-1] if r.meter.curve else 0.0 for r in rs]
        row: dict[str, Any] = {
            "label": lb, "searcher": v.searcher, "model": v.model, "seeds": v.seeds, "budget": v.budget,
            "n_seeds": len(rs), "final_gflops": {"median": float(np.median(finals)), "min": min(finals),
                                                 "max": max(finals)},
            "audit_gflops_median": float(np.median([r.audit_gflops or 0.0 for r in rs])),
            "measured": [r.meter.n for r in rs], "transferred": [r.transferred for r in rs]}
        if tvm_gflops:
            row["to_tvm"] = spread([to_reach(r.meter.curve, tvm_gflops) for r in rs])
        if random_level:
            row["to_random"] = spread([to_reach(r.meter.curve, random_level) for r in rs])
        guided = v.model == "xgb"
        if tvm_gflops and (v.seeds or not has_rule_seeds):
            row["target_tvm_within_32"] = verdict(row["to_tvm"], 32, v.budget)
        if tvm_gflops and guided and not v.seeds:
            row["target_tvm_within_100"] = verdict(row["to_tvm"], 100, v.budget)
        if random_level and guided and not v.seeds:
            row["target_half_of_random"] = verdict(row["to_random"], random_budget // 2, v.budget)
        rows.append(row)
    return {"tvm_gflops": tvm_gflops, "random_level": random_level, "random_budget": random_budget, "rows": rows}


def read_tvm(path: Path | None) -> dict[str, dict]:
    """TVM MetaSchedule's 200-trial result (GFLOP/s) and curve per workload of bench_tune_cpu's file."""
    if path is None:
        return {}
    if not path.exists():  # the TVM run may not have finished: go on without it, and say so
        print(f"warning: --tvm-results {path}: no such file; no TVM comparison", file=sys.stderr)
        return {}
    rows = {r.get("workload"): r for r in json.loads(path.read_text()).get("rows", [])}
    out = {}
    for name, key in TVM_ROW.items():
        tv = rows.get(key, {}).get("tvm") or {}
        if "gflops" in tv:
            out[name] = {"gflops": float(tv["gflops"]), "trials": tv.get("trials"),
                         "curve": rows[key].get("tvm_curve") or tv.get("tvm_curve")}
    return out


def fmt(s: dict | None, budget: int) -> str:
    if not s:
        return "-"
    med = f"> {budget}" if s["median"] is None else f"{s['median']:g}"
    lo = "-" if s["min"] is None else f"{s['min']:g}"
    hi = f"> {budget}" if s["max"] is None else f"{s['max']:g}"
    return f"{med} [{lo}–{hi}] ({s['reached']}/{s['seeds']})"


def table_lines(name: str, state: str, summ: dict) -> list[str]:
    out = [f"### {name} ({state} state)", "",
           f"TVM 200-trial: {summ['tvm_gflops'] or 'n/a'} GFLOP/s; random search (seeds off) median after "
           f"{summ['random_budget']} measurements: {summ['random_level'] and round(summ['random_level'], 1)} GFLOP/s",
           "", "| run | budget | final GFLOP/s median [min–max] | re-measured best (median) | measurements to TVM's "
           "result: median [min–max] (seeds reaching) | to random's result | targets |",
           "|---|---|---|---|---|---|---|"]
    for r in summ["rows"]:
        f = r["final_gflops"]
        targets = "; ".join(f"{k.removeprefix('target_')}: {r[k]}" for k in r if k.startswith("target_")) or "-"
        out.append(f"| {r['label']} | {r['budget']} | {f['median']:.1f} [{f['min']:.1f}–{f['max']:.1f}] | "
                   f"{r['audit_gflops_median']:.1f} | {fmt(r.get('to_tvm'), r['budget'])} | "
                   f"{fmt(r.get('to_random'), r['budget'])} | {targets} |")
    return out + [""]


TARGETS = (
    ("tvm_within_32", "with seeds, TVM's 200-trial result within 32 measurements", "every"),
    ("tvm_within_100", "without seeds, the model-guided searcher reaches TVM's result within 100", 3),
    ("half_of_random", "without seeds, the model-guided searcher reaches random search's result in half "
                       "random's measurements", "every"),
)
"""The issue's targets: (row key, what it says, on how many workloads: "every" or at least N)."""
PROTOCOL_WORKLOADS = len(TVM_ROW)
"""The protocol's workloads (matmul, conv2d, dense+bias+relu, softmax): a target over them is decided
once each is measured or the outcome can no longer change."""


def target_lines(workloads: dict) -> list[str]:
    """One line per target: where it is met, where not, and whether the whole target is met."""
    out = ["| target | met on | not met on | verdict |", "|---|---|---|---|"]
    for key, text, need in TARGETS:
        met, missed = [], []
        for name, d in workloads.items():
            for state, summ in d["states"].items():
                for r in summ["rows"]:
                    v = r.get(f"target_{key}")
                    if v is not None:
                        (met if v == "met" else missed).append(f"{name} {r['label']} ({state}): {v}"
                                                               if v != "met" else f"{name} {r['label']} ({state})")
        measured = {m.split()[0] for m in met + missed}
        met_w = len({m.split()[0] for m in met} - {m.split()[0] for m in missed})
        left = PROTOCOL_WORKLOADS - len(measured)  # workloads of the protocol not in this report yet
        want = PROTOCOL_WORKLOADS if need == "every" else need
        verdict_text = "met" if met_w >= want else "not met" if met_w + left < want else \
            f"undecided ({len(measured)} of {PROTOCOL_WORKLOADS} workloads measured)"
        scope = f" (needs {'every workload' if need == 'every' else f'{need} of {PROTOCOL_WORKLOADS}'})"
        out.append(f"| {text}{scope} | {'; '.join(met) or '-'} | {'; '.join(missed) or '-'} | {verdict_text} |")
    return out


def report_lines(tag: str, out: dict) -> list[str]:
    """The markdown report: how each workload was measured, the targets, then a table per workload."""
    md = [f"# Search efficiency ({tag})", "", "How many measurements until a searcher holds a kernel this good "
          "(protocol: `benchmarks/bench_efficiency.py`'s docstring). Settings: "
          f"{out.get('seeds')} seeds per searcher, budgets {out.get('budget')} without rule-derived seeds "
          f"(searchers {', '.join(out.get('searchers') or [])}; `@N` is that searcher's own budget) and "
          f"{out.get('seeded_budget')} with them. TVM's level: its own 200-trial result from "
          f"`{out.get('tvm_results')}`.", "",
          "| workload | state | measured on | threads (ours) | load at start | command |", "|---|---|---|---|---|---|"]
    for name, d in out["workloads"].items():
        for state, summ in d["states"].items():
            m = summ.get("machine") or d.get("machine") or out.get("machine") or {}
            command = summ.get("command") or d.get("command") or out.get("command")
            md.append(f"| {name} | {state} | {m.get('cpu')}, {m.get('cores')} cores, {m.get('date')}, commit "
                      f"{m.get('commit')} | {m.get('cores')} | {m.get('loadavg_at_start')} | `{command}` |")
    md += ["", "## Targets", ""] + target_lines(out["workloads"]) + ["", "## Per workload", "",
           "Cells: measurements to reach the level, median [min–max] over seeds (seeds that reached it / seeds); "
           "'> N' = not reached within the run's budget N.", ""]
    for name, d in out["workloads"].items():
        for state, summ in d["states"].items():
            md += table_lines(name, state, summ)
    return md


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(n, st) for n, d in results.items() for st in d["states"]]
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), squeeze=False)
    for ax, (name, state) in zip(axes[0], panels):
        d = results[name]["states"][state]
        for lb, curves in d["curves"].items():
            arr = np.array([c + [c[-1]] * (max(map(len, curves)) - len(c)) for c in curves if c])
            x = np.arange(1, arr.shape[1] + 1)
            ax.plot(x, np.median(arr, 0), label=lb)
            ax.fill_between(x, arr.min(0), arr.max(0), alpha=0.15)
        tvm = results[name].get("tvm")
        if tvm:
            ax.axhline(tvm["gflops"], color="k", ls="--", lw=1, label="TVM 200-trial")
            if tvm.get("curve"):
                pts = [(p[0], p[1]) if isinstance(p, list | tuple) else (i + 1, p) for i, p in enumerate(tvm["curve"])]
                ax.plot(*zip(*pts), color="k", lw=1, label="TVM curve (trials)")
        ax.set_title(f"{name} ({state})")
        ax.set_xlabel("measurements")
        ax.set_ylabel("best GFLOP/s so far")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
