"""Merge the outputs of one device session (bench_gpu.py invocations, seeds_gpu.py) into one JSON
file and print the Markdown tables of benchmarks/results/bench_gpu.md from it (no figure is typed by hand).

    python benchmarks/gpu/merge_gpu.py --bench A/bench_gpu.json B/bench_gpu.json --seeds S/seeds_gpu.json \
        --command "..." --variants V1/variants_layernorm.json ... --earlier benchmarks/results/bench_gpu.json \
        --out benchmarks/results/bench_gpu.json > tables.md
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path


def fmt(x, spec: str) -> str:
    return "" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, spec)


def bench_table(rows: list[dict], curves: dict) -> list[str]:
    lines = ["| workload | implementation | ms | TFLOP/s | GB/s | check (rel. err) | seeds (first batch) |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        chk = ("ok" if r["ok"] else "FAIL") + (f" ({r['rel_err']:.1e})" if r.get("rel_err") is not None else "")
        seed = ""
        if r.get("seeds"):
            target = r["impl"].split()[1]
            curve = curves.get(f"{r['workload']} [{target}]") or [[0, 0.0]]
            final, after = curve[-1][1], r.get("gflops_after_seeds") or 0.0
            win = f"seed {r['best_is_seed']} won" if r.get("best_is_seed") is not None else "the search beat them"
            seed = f"{r['seeds']}; best of them {100 * after / final:.1f}% of the run's best; {win}" if final else ""
        tag = " " + r["tag"] if r.get("tag") else ""
        lines.append(f"| {r['workload']}{tag} | {r['impl']} | {fmt(r['ms'], '.4f')} | "
                     f"{fmt(r.get('tflops'), '.1f')} | {fmt(r.get('gbps'), '.0f')} | {chk} | {seed} |")
    return lines


def seeds_table(rows: list[dict]) -> list[str]:
    lines = ["| case | implementation | ms | TFLOP/s | check | configuration |", "|---|---|---|---|---|---|"]
    for r in rows:
        cfg = "" if not r.get("config") else ", ".join(f"{k}={v}" for k, v in r["config"].items())
        cfg = cfg.replace("[", "(").replace("]", ")")
        lines.append(f"| {r['case']} | {r['impl']} | {fmt(r['ms'], '.4f')} | {fmt(r.get('tflops'), '.1f')} | "
                     f"{'ok' if r['ok'] else 'FAIL'} | {cfg} |")
    return lines


def variants_table(calls: list[dict]) -> list[str]:
    """variants_layernorm.py outputs, one column pair per call: ms and ratio to that call's torch.compile."""
    lines = ["| call | implementation | ms | GB/s | torch.compile / this | spread of 3 rounds | rel. err |",
             "|---|---|---|---|---|---|---|"]
    for k, d in enumerate(calls, 1):
        by = {r["impl"]: r for r in d["rows"]}
        for r in sorted(d["rows"], key=lambda r: ("softmax" in r["impl"], -(r.get("gbps") or 0.0))):
            comp = by["torch_compile softmax" if "softmax" in r["impl"] else "torch_compile layernorm"]["ms"]
            lines.append(f"| {k} | {r['impl']} | {fmt(r['ms'], '.4f')} | {fmt(r.get('gbps'), '.0f')} | "
                         f"{fmt(comp / r['ms'] if r['ms'] == r['ms'] else None, '.3f')} | "
                         f"{fmt(100 * r.get('spread', 0.0), '.1f')}% | {fmt(r['rel_err'], '.1e')} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", nargs="+", default=[])
    ap.add_argument("--seeds", default=None)
    ap.add_argument("--command", action="append", default=[])
    ap.add_argument("--out", default=None)
    ap.add_argument("--earlier", default=None, help="a previous merged JSON, kept under 'earlier'")
    ap.add_argument("--variants", nargs="*", default=[], help="variants_layernorm.py outputs, one per call")
    ap.add_argument("--drop-failed", action="store_true", help="leave out rows whose kernel failed to run")
    opts = ap.parse_args()
    merged: dict = {"invocations": [], "rows": [], "curves": {}, "commands": opts.command}
    for k, path in enumerate(opts.bench):
        d = json.loads(Path(path).read_text())
        merged["invocations"].append(d["info"])
        for r in d["rows"]:
            if opts.drop_failed and not r["ok"] and r["ms"] != r["ms"]:
                continue
            merged["rows"].append({**r, "invocation": k, "tag": "" if k == 0 else "²" if k == 1 else f"({k + 1})"})
        merged["curves"].update(d.get("curves", {}))
    if opts.seeds:
        merged["seeds"] = json.loads(Path(opts.seeds).read_text())
    if opts.variants:
        merged["layernorm_variants"] = [json.loads(Path(p).read_text()) for p in opts.variants]
    if opts.earlier:
        merged["earlier"] = json.loads(Path(opts.earlier).read_text())
    if opts.out:
        Path(opts.out).write_text(json.dumps(merged, indent=1, default=str) + "\n")
    print("\n".join(bench_table(merged["rows"], merged["curves"])))
    if opts.seeds:
        print()
        print("\n".join(seeds_table(merged["seeds"]["rows"])))
    if opts.variants:
        print()
        print("\n".join(variants_table(merged["layernorm_variants"])))


if __name__ == "__main__":
    main()
