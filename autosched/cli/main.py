"""`autosched` command line: tune, best, show, export, import, verify, plot (and the service commands).

Every command takes `--db URL` (default: `AUTOSCHED_DB_URL`, else the SQLite file under
~/.cache/autosched). Service subcommands (serve, worker, submit, status) register themselves
from `autosched.cli.service_commands` when that module is present.
"""

from __future__ import annotations

import argparse
import json
import sys


def _parse_value(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _workload(args):
    from autosched.workload import Workload

    values = [_parse_value(a) for a in args.args]
    kwargs = {}
    for kv in args.param or []:
        k, _, v = kv.partition("=")
        kwargs[k] = _parse_value(v)
    return Workload.create(args.op, *values, **kwargs)


def cmd_tune(args) -> int:
    from autosched.tuning.api import TuneOptions, tune
    from tuning_db.types import MIN_VERIFIED

    w = _workload(args)
    print(f"tuning {w.name}{tuple(w.args)} key={w.key} target={args.target} trials={args.trials} "
          f"searcher={args.searcher} cost_model={args.cost_model}", flush=True)
    options = TuneOptions(
        trials=args.trials, batch_size=args.batch_size, searcher=args.searcher,
        cost_model=None if args.cost_model == "none" else args.cost_model, seed=args.seed,
        early_stopping=args.early_stopping, verify=args.verify, transfer=not args.no_transfer, db=args.db,
        runner=args.runner, plot=args.plot, progress=True)  # live on a terminal, plain lines in a pipe
    r = tune(w, args.target, options=options)
    if r.best_steps_json is None:
        print(f"no valid schedule found in {r.trials} trials; errors: {r.errors}")
        return 1
    print(f"best: {r.best_cost * 1e3:.4f} ms  {r.best_gflops:.1f} GFLOP/s  after {r.trials} trials "
          f"({r.measured} measured, {r.reused} reused from the database) in {r.seconds:.1f} s")
    if r.transferred:
        print(f"started from {r.transferred} schedules moved from the same operator's best at other shapes")
    if r.best_verified:
        print(f"verified: {len(r.verified)} schedules have {MIN_VERIFIED}+ valid measurements each; the best by "
              f"its median wins (the run's fastest single measurement: {r.curve[-1][1]:.1f} GFLOP/s)")
    else:
        print(f"unverified: the best has fewer than {MIN_VERIFIED} valid measurements (verification off or "
              f"stopped); `autosched verify {w.key}` measures it again")
    if r.disqualified:
        print(f"ruled out: {r.disqualified} schedules failed their check or crashed and are never served")
    print(f"errors: {r.errors or 'none'}")
    print(f"workload key: {w.key}")
    if args.plot:
        print(f"tuning curve: {args.plot}")
    return 0


def _db(args):
    from autosched.tuning.api import open_db

    return open_db(args.db)


def _target_key(db, key: str, target: str) -> str | None:
    from autosched.target.key import Target

    if "|" in target:
        return target
    host = Target.parse(target).key
    keys = {r.target_key for r in db.records(key)}
    if host in keys or not keys:
        return host
    same_kind = sorted(k for k in keys if k.startswith(target + "|"))
    return same_kind[0] if same_kind else host


def cmd_best(args) -> int:
    db = _db(args)
    tk = _target_key(db, args.key, args.target)
    rec = db.best(args.key, tk)
    if rec is None:
        print(f"no tuned schedule for workload {args.key} on target {tk}", file=sys.stderr)
        return 2
    w = db.workload(args.key)
    st = db.standing(args.key, tk, rec.steps_hash)
    cost = st.cost if st is not None and st.cost is not None else rec.median
    gf = (w.flops / cost / 1e9) if w and cost else 0.0
    print(json.dumps({"workload_key": rec.workload_key, "target": rec.target_key, "median_ms": cost * 1e3,
                      "gflops": round(gf, 2), "verified": bool(st and st.verified),
                      "valid_measurements": st.n_valid if st else 0,
                      "imported_measurements": st.n_imported if st else 0, "origin": rec.origin or "local",
                      "host": rec.host, "created": rec.created.isoformat(),
                      "steps": json.loads(rec.steps_json)}, indent=2))
    if st is not None and not st.verified:
        print(f"warning: unverified ({st.n_valid} valid measurements here); `autosched verify {args.key}` "
              "measures it again", file=sys.stderr)
    return 0


def cmd_show(args) -> int:
    from autosched.codegen.render import render
    from autosched.schedule.replay import schedule_from_steps
    from autosched.workload import Workload

    db = _db(args)
    tk = _target_key(db, args.key, args.target)
    rec = db.best(args.key, tk)
    info = db.workload(args.key)
    if rec is None or info is None:
        print(f"no tuned schedule for workload {args.key} on target {tk}", file=sys.stderr)
        return 2
    w = Workload.from_json(info.spec)
    s, a = schedule_from_steps(w, rec.steps_json)
    src, func = render(s, a, tk)
    st = db.standing(args.key, tk, rec.steps_hash)
    status = "verified" if st is not None and st.verified else "UNVERIFIED"
    cost = st.cost if st is not None and st.cost is not None else rec.median
    print(f"# {w.name}{tuple(w.args)}  best {cost * 1e3:.4f} ms on {tk} ({status}, "
          f"{st.n_valid if st else 0} valid measurements here)")
    out = [x for x in db.standings(args.key, tk, include_disqualified=True) if x.disqualified]
    for x in out:
        print(f"# ruled out {x.steps_hash[:12]}: {x.n_disqualifying} failed checks; {x.reason[:200]}")
    print("# schedule as primitive calls:")
    print(s.as_python())
    print("\n# loop nest:")
    print(func.show())
    if not args.no_source:
        print(f"\n# generated {src.language} source:")
        print(src.code)
    return 0


def cmd_export(args) -> int:
    db = _db(args)
    n = db.export_jsonl(args.file, workload_key=args.key)
    print(f"exported {n} records to {args.file}")
    return 0


def cmd_import(args) -> int:
    from autosched.tuning.imports import import_records

    db = _db(args)
    rep = import_records(db, args.file)
    print(f"imported {rep.imported} records from {args.file} ({rep.duplicates} duplicates skipped, "
          f"{rep.n_refused} lines refused); imported records are unverified until `autosched verify`")
    for ref in rep.refused[:50]:
        print(f"  line {ref.line_no}: {ref.reason}", file=sys.stderr)
    if rep.n_refused > 50:
        print(f"  ... and {rep.n_refused - 50} more refused lines", file=sys.stderr)
    return 1 if rep.n_refused else 0


def cmd_verify(args) -> int:
    from autosched.tuning.verify import verify_schedules
    from autosched.workload import Workload

    db = _db(args)
    info = db.workload(args.key)
    if info is None:
        print(f"unknown workload key {args.key}", file=sys.stderr)
        return 2
    tk = _target_key(db, args.key, args.target)
    rep = verify_schedules(db, Workload.from_json(info.spec), tk, top=args.top, runner=args.runner)
    for c in rep.checked:
        cost = f"{c.median * 1e3:.4f} ms" if c.median is not None else "-"
        state = "verified" if c.verified else ("RULED OUT" if c.error.startswith("ruled out") else "unverified")
        print(f"{c.steps_hash[:12]}  {cost:>12}  {state:10}  {c.n_valid} valid  {c.error}")
    if rep.best is None:
        print("no schedule left to serve: every candidate was ruled out", file=sys.stderr)
        return 1
    print(f"best: {rep.best.steps_hash[:12]}")
    return 0


def cmd_plot(args) -> int:
    import math

    from autosched.tuning.api import plot_curves

    db = _db(args)
    tk = _target_key(db, args.key, args.target)
    info = db.workload(args.key)
    recs = sorted(db.records(args.key, tk), key=lambda r: (r.created, r.id))
    if info is None or not recs:
        print(f"no records for workload {args.key} on target {tk}", file=sys.stderr)
        return 2
    best, curve = math.inf, []
    for n, r in enumerate(recs, 1):
        if r.median is not None and r.error_code == 0:
            best = min(best, r.median)
        curve.append((n, info.flops / best / 1e9 if math.isfinite(best) else 0.0))
    out = plot_curves({info.name: curve}, args.out, title=f"{info.name} on {tk}")
    print(f"wrote {out}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="autosched", description="auto-scheduling search for tensor operators")
    p.add_argument("--db", default=None, help="database URL or SQLite path (default: AUTOSCHED_DB_URL or "
                                              "~/.cache/autosched/tuning.db)")
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("tune", help="tune an operator of the library")
    t.add_argument("op", help="registered op name, e.g. matmul")
    t.add_argument("args", nargs="*", help="op arguments, e.g. 1024 1024 1024")
    t.add_argument("--param", action="append", help="keyword argument NAME=VALUE (repeatable)")
    # also after the subcommand (`autosched tune ... --db URL`); when absent the global --db stands
    t.add_argument("--db", default=argparse.SUPPRESS, help="database URL or SQLite path (as the global --db)")
    t.add_argument("--target", default="cpu")
    t.add_argument("--trials", type=int, default=200)
    t.add_argument("--searcher", default="genetic", help="random, grid, annealing, genetic, rl")
    t.add_argument("--cost-model", default="xgb", choices=["xgb", "random", "none"])
    t.add_argument("--batch-size", type=int, default=16)
    t.add_argument("--early-stopping", type=int, default=None)
    t.add_argument("--verify", type=int, default=4,
                   help="bring this many of the best schedules to three valid measurements at the end; "
                        "the best median wins (0: off, the best is then unverified)")
    t.add_argument("--no-transfer", action="store_true",
                   help="do not start from the best stored schedules of the same operator at other shapes")
    t.add_argument("--runner", default=None, help="'ray' for an embedded Ray cluster, or HOST:PORT of one")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--plot", default=None, help="write the tuning curve to this PNG")
    t.set_defaults(fn=cmd_tune)
    for name, fn, hlp in (("best", cmd_best, "best record of a workload key"),
                          ("show", cmd_show, "best schedule as primitive calls, loop nest and source")):
        c = sub.add_parser(name, help=hlp)
        c.add_argument("key")
        c.add_argument("--target", default="cpu")
        if name == "show":
            c.add_argument("--no-source", action="store_true")
        c.set_defaults(fn=fn)
    e = sub.add_parser("export", help="export records as JSON lines")
    e.add_argument("file")
    e.add_argument("--key", default=None)
    e.set_defaults(fn=cmd_export)
    i = sub.add_parser("import", help="import records from JSON lines")
    i.add_argument("file")
    i.set_defaults(fn=cmd_import)
    v = sub.add_parser("verify", help="re-measure the best stored schedules of a workload key here")
    v.add_argument("key")
    v.add_argument("--target", default="cpu")
    v.add_argument("--top", type=int, default=5, help="how many of the best candidates to re-measure")
    v.add_argument("--runner", default=None, help="'ray' or HOST:PORT to measure on a Ray cluster")
    v.set_defaults(fn=cmd_verify)
    pl = sub.add_parser("plot", help="tuning curve of a workload from its records (PNG)")
    pl.add_argument("key")
    pl.add_argument("--target", default="cpu")
    pl.add_argument("--out", default="tuning_curve.png")
    pl.set_defaults(fn=cmd_plot)
    try:
        from autosched.cli import service_commands as cli_service
    except ImportError:
        cli_service = None
    if cli_service is not None:
        cli_service.register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.fn(args) or 0)
    except (ValueError, LookupError, TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
