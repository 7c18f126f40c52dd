"""Print the Markdown results table of one tuned-CPU-suite run from its JSON in benchmarks/results/.

The README's results table is this script's output, pasted; no figure in it is typed by hand.

    .venv/bin/python benchmarks/results_table.py                          # the default run below
    .venv/bin/python benchmarks/results_table.py bench_tune_cpu_zen4_tvm  # any bench_tune_cpu* stem or path

The input is what `benchmarks/bench_tune_cpu.py --out STEM` writes: {"machine": {...}, "trials": N,
"rows": [{"workload", "autosched_ms", "gflop", "torch eager_ms", "torch.compile_ms", "numpy_ms",
"speed_vs_torch", "tune_seconds", "tvm": {"side_by_side": {...}, "tune_seconds", "mcpu"}?}, ...]}.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
DEFAULT = "bench_tune_cpu_zen3_v2"  # the latest full run of the matmul/softmax/layernorm suite with TVM beside it


def _ms(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.3f} ms" if value < 1 else f"{value:.2f} ms"


def _row(r: dict) -> str:
    ours = r.get("autosched_ms")
    gflops = f" ({r['gflop'] / ours * 1e3:.0f} GFLOP/s)" if ours and r.get("gflop") else ""
    speed = r.get("speed_vs_torch")
    tvm = r.get("tvm") or {}
    sbs = tvm.get("side_by_side") or {}
    vs_tvm = (f"{sbs['speedup_vs_tvm']:.2f}x ({sbs['autosched_seconds'] * 1e3:.2f} against "
              f"{sbs['tvm_seconds'] * 1e3:.2f} ms)") if sbs.get("speedup_vs_tvm") else "—"
    tune = f"{r['tune_seconds']:.0f} s"
    if tvm.get("tune_seconds"):
        tune += f" / {tvm['tune_seconds']:.0f} s"
    cells = [r["workload"], _ms(ours) + gflops, _ms(r.get("torch eager_ms")), _ms(r.get("torch.compile_ms")),
             _ms(r.get("numpy_ms")), "—" if speed is None else f"{speed:.2f}x", vs_tvm, tune]
    return "| " + " | ".join(cells) + " |"


def table(path: Path) -> str:
    data = json.loads(path.read_text())
    m = data["machine"]
    mcpu = {(r.get("tvm") or {}).get("mcpu") for r in data["rows"]} - {None}
    arch = f", `-mcpu={sorted(mcpu)[0]}`" if mcpu else ""
    rel = path.resolve().relative_to(RESULTS.parent.parent) if path.resolve().is_relative_to(RESULTS.parent.parent) \
        else path
    head = (f"Measured {m['date']} on {m['cpu']}{arch} ({m['cores']} cores), torch {m.get('torch')}, "
            f"numpy {m.get('numpy')}; {data['trials']} trials per workload; medians of interleaved rounds "
            f"(`{rel}`).\n\n")
    cols = ["workload", "autosched (tuned)", "torch eager", "torch.compile", "numpy", "vs torch eager",
            "vs TVM MetaSchedule (side by side, same trials)", "tuning time (ours / TVM)"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += [_row(r) for r in data["rows"]]
    return head + "\n".join(lines) + "\n"


def resolve(name: str) -> Path:
    p = Path(name)
    if p.exists():
        return p
    return RESULTS / (name if name.endswith(".json") else f"{name}.json")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", nargs="?", default=DEFAULT, help="a stem under benchmarks/results/ or a JSON path")
    args = ap.parse_args(argv)
    print(table(resolve(args.run)), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
