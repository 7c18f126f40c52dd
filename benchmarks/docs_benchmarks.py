"""Generate docs/benchmarks.md from the raw results under benchmarks/results/.

Why: a figure typed by hand outlives the run it came from; generating the page from the result files
means every figure on it has a file (machine, date, versions, threads, command) behind it, and a
removed file takes its figures with it. Known reports get their own sections (the tuned CPU suite
per machine, the search-efficiency protocol, the cost model's held-out accuracy); every other
`benchmarks/results/**/*.md` is listed under "Other reports" with its title, so nothing is hidden.

    .venv/bin/python benchmarks/docs_benchmarks.py            # rewrite docs/benchmarks.md
    .venv/bin/python benchmarks/docs_benchmarks.py --check    # exit 1 when the page is stale
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from results_table import peers_ahead, table  # noqa: E402

RESULTS = HERE / "results"
DOC = HERE.parent / "docs" / "benchmarks.md"
SECTIONS = (("Search efficiency protocol", "efficiency_*.md"),
            ("Cost-model accuracy on held-out workloads", "cost_model_heldout_*.md"))

INTRO = HERE / "docs_benchmarks_intro.md"  # the page's prose: protocol, suites and their commands


def _rel(p: Path) -> str:
    """A link from docs/ to `p` (a path outside the repository stays absolute)."""
    root = HERE.parent
    return "../" + p.resolve().relative_to(root).as_posix() if p.resolve().is_relative_to(root) else p.as_posix()


def title(md: Path) -> str:
    """A report's first heading (or its file name), with where and when it was measured if it says."""
    text = md.read_text()
    head = next((ln.lstrip("#").strip() for ln in text.splitlines() if ln.startswith("#")), md.stem)
    where = re.search(r"Measured (\S+) on ([^(;,]+)", text)
    return f"{head} ({where.group(2).strip()}, {where.group(1)})" if where else head


def tuned_runs() -> list[Path]:
    """bench_tune_cpu_*.json files of the like-with-like protocol (rows with thread counts)."""
    out = []
    for p in sorted(RESULTS.glob("bench_tune_cpu_*.json")):
        try:
            rows = json.loads(p.read_text()).get("rows", [])
        except (json.JSONDecodeError, AttributeError) as exc:
            raise SystemExit(f"docs_benchmarks: {p} is not valid results JSON ({exc})") from None
        if rows and all("threads" in r for r in rows):
            out.append(p)
    return out


def ahead_sentence(path: Path) -> str:
    """Plain words on where a peer beats our kernel in this run (or that none does)."""
    rows = json.loads(path.read_text())["rows"]
    said = [f"{r['workload']}: " + ", ".join(f"{n} {s:.2f}x faster" for n, s in ahead)
            for r in rows if (ahead := peers_ahead(r))]
    if not said:
        return "No peer is ahead of our tuned kernel in this run."
    return "Where a peer is ahead of our tuned kernel: " + "; ".join(said) + "."


def _demoted(md: Path) -> str:
    """A report's Markdown with its headings one level down, to sit under a section."""
    lines = [("#" + ln if ln.startswith("#") else ln) for ln in md.read_text().splitlines()]
    return "\n".join(lines).strip() + f"\n\n([{md.name}]({_rel(md)}))\n"


def render() -> str:
    parts = [INTRO.read_text(), "## Tuned CPU suite, latest run per machine\n"]
    runs = tuned_runs()
    known: set[Path] = set()
    if not runs:
        parts.append("No run of the like-with-like protocol yet: run `benchmarks/bench_tune_cpu.py`.\n")
    for p in runs:
        known.add(p.with_suffix(".md"))
        data = json.loads(p.read_text())
        cmds = sorted({r["command"] for r in data["rows"] if r.get("command")})
        parts.append(f"### {data['machine']['cpu']} (`{data.get('machine_tag', p.stem)}`)\n\n" + table(p) + "\n"
                     + ahead_sentence(p) + "\n\nCommand: " + ", ".join(f"`{c}`" for c in cmds) + ". "
                     f"Raw results, TVM's tuning curve per workload (`tvm_curve`) and ours (`curve`): "
                     f"[{p.name}]({_rel(p)}).\n")
    for heading, pattern in SECTIONS:
        found = sorted(RESULTS.glob(pattern))
        known.update(found)
        parts.append(f"## {heading}\n")
        parts.extend(_demoted(md) for md in found)
        if not found:
            parts.append(f"No `benchmarks/results/{pattern}` yet.\n")
    others = sorted(md for md in RESULTS.rglob("*.md") if md not in known)
    parts.append("## Other reports\n\nEarlier suites' latest reports, each with its own machine, date and method:\n")
    parts.append("\n".join(f"- [{md.relative_to(RESULTS).as_posix()}]({_rel(md)}): {title(md)}" for md in others)
                 + "\n" if others else "None.\n")
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if docs/benchmarks.md differs from the results")
    ap.add_argument("--out", type=Path, default=DOC)
    a = ap.parse_args(argv)
    text = render()
    if a.check:
        if not a.out.exists() or a.out.read_text() != text:
            print(f"{a.out} is stale: run benchmarks/docs_benchmarks.py", file=sys.stderr)
            return 1
        return 0
    a.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
