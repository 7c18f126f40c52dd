"""How fast is `TuningDB.best()` on a big database? SQLite file vs a throwaway PostgreSQL.

Fills N records (default one million) spread over W workloads x T targets with Core `insert()`
executemany batches (no ORM objects), then `TuningDB.rebuild_standings()` (the raw-SQL fill
bypasses `commit_records`, which keeps the per-schedule `schedules` summary that `best()` reads),
then times `best()` and `top_k(10)` for random (workload, target) keys: p50/p90/p99 over many
lookups. The deployment use is exactly this: a service asks for the best schedule of one key at a
time. Answers are checked against `tuning_db.ranking.summarize` applied to each key's records
(disqualified schedules out, verified ones first; docs/decisions/disqualify-and-verify.md).

    .venv/bin/python benchmarks/bench_db_lookup.py                 # full size, writes benchmarks/results/bench_db.*
    .venv/bin/python benchmarks/bench_db_lookup.py --records 20000 --no-write

PostgreSQL runs with durable defaults (fsync on, shared_buffers 128 MB) on a loopback TCP port.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import sqlalchemy  # noqa: E402
from sqlalchemy import text  # noqa: E402

from tuning_db import (  # noqa: E402
    MIN_VERIFIED,
    ORIGIN_LOCAL,
    Record,
    RecordIn,
    TuningDB,
    ranking,  # noqa: E402
    sqlite_url,
)
from tuning_db.models import records_table, targets_table, workloads_table  # noqa: E402

FAIL_RATE = 0.05  # share of failed measurements, as a real tuning log has
FAIL_CODE = 4  # RUNTIME_ERROR: in tuning_db.types.DISQUALIFYING, so it rules its schedule out
VERIFY_TOP = 4  # schedules of each key re-measured by the "verified" scenario
CHECK_KEYS = 200  # keys whose answers are checked against the rules (also the warm-up)


def workload_key(i: int) -> str:
    return hashlib.sha256(f"workload-{i}".encode()).hexdigest()


def target_keys(n: int) -> list[str]:
    base = ["cpu-epyc-2c", "cuda-h200", "triton-h200", "cpu-xeon-64c"]
    return [base[i] if i < len(base) else f"target-{i}" for i in range(n)]


def schedule_steps(j: int) -> str:
    """Canonical steps JSON of the j-th distinct schedule."""
    return json.dumps(
        [
            {"kind": "split", "stage": "C", "loop": "i", "factors": [j, 8], "version": 1},
            {"kind": "parallel", "stage": "C", "loop": "i.outer", "version": 1},
        ],
        sort_keys=True,
        separators=(",", ":"),
    )


def record_batches(n: int, wkeys: list[str], tkeys: list[str], batch: int, seed: int) -> Iterator[list[dict[str, Any]]]:
    """Rows for `records`, shaped like the repository writes them (all local). A valid record is a
    new schedule measured once (unverified); a failed one (RUNTIME_ERROR) re-measures the same key's
    previous schedule, as a racy kernel fails on a later run, and so disqualifies that schedule."""
    rng = random.Random(seed)
    now = datetime.now(UTC)
    period = len(wkeys) * len(tkeys)  # record i and i - period share a (workload, target)
    rows: list[dict[str, Any]] = []
    for i in range(n):
        wk, tk = wkeys[i % len(wkeys)], tkeys[(i // len(wkeys)) % len(tkeys)]
        failed = rng.random() < FAIL_RATE
        steps = schedule_steps(i - period if failed and i >= period else i)
        if failed:
            costs, med, code = [], None, FAIL_CODE
        else:
            med = rng.lognormvariate(-7.0, 1.0)
            costs = [med * 1.02, med, med * 0.99]
            code = 0
        rows.append(
            {
                "workload_key": wk,
                "target_key": tk,
                "steps": steps,
                "steps_hash": hashlib.sha256(steps.encode()).hexdigest(),
                "costs": json.dumps(costs),
                "median": med,
                "error_code": code,
                "error_msg": "runtime error" if failed else "",
                "build_seconds": 0.3,
                "run_seconds": 0.05,
                "host": "bench",
                "device": "dev0",
                "worker_id": f"w{i % 8}",
                "job_id": None,
                "created": now,
                "format_version": 1,
                "origin": ORIGIN_LOCAL,
            }
        )
        if len(rows) == batch:
            yield rows
            rows = []
    if rows:
        yield rows


def fill(db: TuningDB, n: int, n_workloads: int, n_targets: int, batch: int, seed: int) -> dict[str, Any]:
    """Bulk-insert workloads, targets and n records, then rebuild the per-schedule standings the raw
    inserts bypassed; returns timings and the keys."""
    wkeys, tkeys = [workload_key(i) for i in range(n_workloads)], target_keys(n_targets)
    now = datetime.now(UTC)
    gen_s = insert_s = 0.0
    t_all = time.perf_counter()
    with db.engine.begin() as conn:
        conn.execute(
            workloads_table.insert(),
            [
                {
                    "key": k,
                    "name": f"matmul{i}",
                    "spec": json.dumps({"op": "matmul", "n": 64 + i}),
                    "flops": 2.0 * (64 + i) ** 3,
                    "created": now,
                }
                for i, k in enumerate(wkeys)
            ],
        )
        conn.execute(
            targets_table.insert(), [{"key": k, "kind": k.split("-")[0], "spec": "{}", "created": now} for k in tkeys]
        )
    batches = record_batches(n, wkeys, tkeys, batch, seed)
    while True:
        t0 = time.perf_counter()
        rows = next(batches, None)
        gen_s += time.perf_counter() - t0
        if rows is None:
            break
        t0 = time.perf_counter()
        with db.engine.begin() as conn:
            conn.execute(records_table.insert(), rows)  # executemany: one statement, many rows
        insert_s += time.perf_counter() - t0
    t0 = time.perf_counter()
    n_schedules = db.rebuild_standings()  # raw SQL bypassed commit_records: summarize every schedule
    standings_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    with db.engine.begin() as conn:
        conn.execute(text("ANALYZE"))  # after the rebuild, so the planner also knows `schedules`
    analyze_s = time.perf_counter() - t0
    return {
        "fill_seconds": time.perf_counter() - t_all,
        "generate_seconds": gen_s,
        "insert_seconds": insert_s,
        "standings_seconds": standings_s,
        "analyze_seconds": analyze_s,
        "rows_per_second": n / insert_s if insert_s else 0.0,
        "schedules": n_schedules,
        "keys": [(w, t) for t in tkeys for w in wkeys],
    }


def percentiles(samples_ns: list[int]) -> dict[str, float]:
    xs = sorted(samples_ns)
    q = lambda p: xs[min(len(xs) - 1, int(p * len(xs)))] / 1000.0  # microseconds
    return {
        "p50_us": q(0.50),
        "p90_us": q(0.90),
        "p99_us": q(0.99),
        "max_us": xs[-1] / 1000.0,
        "mean_us": statistics.fmean(xs) / 1000.0,
    }


def expected_served(records: list[Record]) -> list[ranking.Summary]:
    """The servable schedules of one key's records in `top_k` order, by tuning_db's own rules
    (`ranking.summarize` per schedule; by rank, cost, record id as `standings.served`)."""
    groups: dict[str, list[Record]] = {}
    for r in records:
        groups.setdefault(r.steps_hash, []).append(r)
    summaries = [ranking.summarize(rs) for rs in groups.values()]
    served = [s for s in summaries if s.rank <= ranking.SERVABLE_MAX_RANK and s.record_id is not None]
    return sorted(served, key=lambda s: (s.rank, s.cost, s.record_id))


def check_answers(db: TuningDB, keys: list[tuple[str, str]]) -> dict[str, int]:
    """`best()` and `top_k(10)` of each key against `expected_served` of all its records (read from
    `records`, not from the `schedules` summary). Counts the keys whose answer is not the schedule of
    the fastest valid record (it was disqualified, or is unverified behind a verified one), those
    whose answer is verified, and those where a faster unverified schedule was passed over."""
    changed = verified = passed_over = 0
    for wk, tk in keys:
        records = db.records(wk, tk)
        served = expected_served(records)
        want = [s.record_id for s in served[:10]]
        got = db.best(wk, tk)
        assert (got.id if got else None) == (want[0] if want else None), (wk, tk, got, want[:1])
        top = [r.id for r in db.top_k(wk, tk, 10)]
        assert top == want, (wk, tk, top, want)
        if got is None:
            continue
        fastest = min((r for r in records if r.ok), key=lambda r: (r.median, r.id))
        changed += fastest.steps_hash != got.steps_hash
        s = db.standing(wk, tk, got.steps_hash)
        assert s is not None and s.record is not None and s.record.id == got.id, (wk, tk, s)
        verified += s.verified
        passed_over += any(x.rank == ranking.RANK_UNVERIFIED and x.cost < served[0].cost for x in served)
    return {
        "checked_keys": len(keys),
        "answer_not_fastest_record": changed,
        "best_verified": verified,
        "faster_unverified_passed_over": passed_over,
    }


def time_lookups(db: TuningDB, keys: list[tuple[str, str]], n: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed + 1)
    checks = check_answers(db, rng.sample(keys, min(CHECK_KEYS, len(keys))))  # also the warm-up
    picks = [rng.choice(keys) for _ in range(n)]
    out: dict[str, Any] = {}
    for name, call in (("best", lambda k: db.best(*k)), ("top_k10", lambda k: db.top_k(k[0], k[1], 10))):
        samples = []
        for key in picks:
            t0 = time.perf_counter_ns()
            call(key)
            samples.append(time.perf_counter_ns() - t0)
        out[name] = percentiles(samples)
    out["checks"] = checks
    return out


def verify_keys(db: TuningDB, keys: list[tuple[str, str]]) -> tuple[list[tuple[str, str]], int]:
    """What a tuner's verification leaves behind: the 4 best schedules of each key measured again
    until each has MIN_VERIFIED valid local records, the new ones 1.5x slower than the first (lucky)
    measurement, so each costs 1.5x its first median and is verified; the 5th best stays unverified
    and is often faster, but verified schedules are served first. Written with `commit_records`
    (which keeps the standings). Returns the keys done and how many records were added."""
    done, new = [], []
    for wk, tk in keys:
        top = db.top_k(wk, tk, VERIFY_TOP + 1)
        if len(top) <= VERIFY_TOP:
            continue
        for r in top[:VERIFY_TOP]:
            slow = r.median * 1.5
            new += [RecordIn(wk, tk, r.steps, costs=(slow * 1.01, slow, slow * 0.99), host="bench")] * (
                MIN_VERIFIED - 1
            )
        done.append((wk, tk))
    for i in range(0, len(new), 5000):
        db.commit_records(new[i : i + 5000])
    return done, len(new)


def run_backend(name: str, url: str, args: argparse.Namespace) -> dict[str, Any]:
    print(f"[{name}] filling {args.records:,} records ...", flush=True)
    db = TuningDB(url)
    try:
        f = fill(db, args.records, args.workloads, args.targets, args.batch, args.seed)
        print(
            f"[{name}] fill {f['fill_seconds']:.1f} s (insert {f['insert_seconds']:.1f} s, "
            f"{f['rows_per_second']:,.0f} rows/s; rebuild_standings {f['standings_seconds']:.1f} s for "
            f"{f['schedules']:,} schedules; analyze {f['analyze_seconds']:.1f} s); timing {args.lookups} lookups ...",
            flush=True,
        )
        lookups = time_lookups(db, f["keys"], args.lookups, args.seed)
        verified_keys, added = verify_keys(db, f["keys"])
        lookups["verified"] = time_lookups(db, verified_keys, args.lookups, args.seed)
        vc = lookups["verified"]["checks"]
        assert vc["best_verified"] == vc["checked_keys"], vc  # every verified key serves a verified schedule
        args_records = args.records + added
        with db.engine.connect() as conn:
            if name == "sqlite":
                version = conn.exec_driver_sql("select sqlite_version()").scalar()
                size = Path(db.engine.url.database or "").stat().st_size
            else:
                version = conn.execute(text("show server_version")).scalar()
                size = conn.execute(text("select pg_database_size(current_database())")).scalar()
            count = conn.execute(text("select count(*) from records")).scalar()
        assert count == args_records, count
        v, c = lookups["verified"]["best"], lookups["checks"]
        print(
            f"[{name}] best p50 {lookups['best']['p50_us']:.0f} us, p99 {lookups['best']['p99_us']:.0f} us; "
            f"after verification p50 {v['p50_us']:.0f} us, p99 {v['p99_us']:.0f} us; answers checked on "
            f"{c['checked_keys']} + {vc['checked_keys']} keys (not the fastest record: {c['answer_not_fastest_record']}"
            f" + {vc['answer_not_fastest_record']}; faster unverified passed over: "
            f"{vc['faster_unverified_passed_over']})",
            flush=True,
        )
        return {
            "backend": name,
            "server_version": version,
            "db_bytes": int(size or 0),
            "records": count,
            "verified_keys": len(verified_keys),
            **{k: v for k, v in f.items() if k != "keys"},
            "lookups": lookups,
        }
    finally:
        db.close()


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    import alembic
    import psycopg

    return {
        "cpu": cpu,
        "loadavg_1m_at_start": os.getloadavg()[0],
        "cores": os.cpu_count(),
        "arch": platform.machine(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "sqlalchemy": sqlalchemy.__version__,
        "alembic": alembic.__version__,
        "psycopg": psycopg.__version__,
    }


def write_docs(result: dict[str, Any], md: Path, js: Path) -> None:
    js.parent.mkdir(parents=True, exist_ok=True)
    js.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    m, p = result["machine"], result["params"]
    lines = [
        "# Tuning database: `best()` lookup benchmark",
        "",
        f"Date: {result['date']}. Machine: {m['cores']}-core {m['arch']} ({m['cpu']}), {m['os']}; "
        f"Python {m['python']}, SQLAlchemy {m['sqlalchemy']}, psycopg {m['psycopg']}.",
        "",
        f"{p['records']:,} records over {p['workloads']:,} workloads x {p['targets']} targets "
        f"({p['records'] // (p['workloads'] * p['targets']):,} per key, {FAIL_RATE:.0%} failed), "
        f"filled with Core `insert()` executemany in batches of {p['batch']:,} and then "
        f"`TuningDB.rebuild_standings()` (the raw inserts bypass the summary); then {p['lookups']:,} "
        "`TuningDB.best()` and `top_k(k=10)` calls for random keys (end to end: connection from the "
        "pool, query, conversion to a frozen `Record`). Produced by `benchmarks/bench_db_lookup.py`; "
        "raw figures in `benchmarks/results/bench_db.json`.",
        "",
        "| backend | server | fill (s) | of which rebuild_standings (s) | insert rows/s | size (MiB) "
        "| best p50 (us) | best p99 (us) | top_k10 p50 (us) | top_k10 p99 (us) | verified: best p50 (us) "
        "| verified: best p99 (us) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["backends"]:
        b, t, v = r["lookups"]["best"], r["lookups"]["top_k10"], r["lookups"]["verified"]["best"]
        lines.append(
            f"| {r['backend']} | {r['server_version']} | {r['fill_seconds']:.1f} | {r['standings_seconds']:.1f} "
            f"| {r['rows_per_second']:,.0f} "
            f"| {r['db_bytes'] / 2**20:,.0f} | {b['p50_us']:.0f} | {b['p99_us']:.0f} | {t['p50_us']:.0f} "
            f"| {t['p99_us']:.0f} | {v['p50_us']:.0f} | {v['p99_us']:.0f} |"
        )
    lines += [
        "",
        "Notes: SQLite is a local file in WAL mode (synchronous=NORMAL); PostgreSQL is a throwaway local "
        "cluster with default settings (fsync on, shared_buffers 128 MB) reached over loopback TCP, so each "
        "lookup includes network round trips: reads run in autocommit (no BEGIN/ROLLBACK) and the default "
        "`pool_pre_ping=True` adds one ping per call (`DBSettings(pool_pre_ping=False)` saves it). "
        "`best()` and `top_k()` read the per-schedule summary table `schedules` (one row per workload, "
        "target and schedule: rank, cost, representative record; `tuning_db/standings.py`) by one range of "
        "the index `ix_schedules_best (workload_key, target_key, rank, cost, record_id)`, joined to the "
        "representative records: one index seek, however many records or re-measurements a schedule has. "
        "The rules (`tuning_db/ranking.py`, docs/decisions/disqualify-and-verify.md): a schedule with a "
        "RUNTIME_ERROR, WRONG_ANSWER or WORKER_CRASHED record is never served; one with "
        f"{MIN_VERIFIED} valid local records is verified and ranks first, by the upper median of those "
        "records; the others follow by the upper median of all their valid records. The summary is "
        "written by every `commit_records` transaction; this fill inserts with raw SQL, so it ends with "
        "`TuningDB.rebuild_standings()`, timed separately (own column) and included in the fill time. "
        f"Each failed record ({FAIL_RATE:.0%}, RUNTIME_ERROR) re-measures its key's previous schedule, "
        "as a racy kernel fails on a later run, and so disqualifies it. "
        f"*Verified*: then every key's {VERIFY_TOP} best schedules are measured again until each has "
        f"{MIN_VERIFIED} valid local records, the new ones 1.5x slower, as a tuner's verification leaves "
        "them (through `commit_records`, which updates the summary); the verified ones are served before "
        "a faster unverified 5th. Answers of both runs are checked on sampled keys against "
        "`ranking.summarize` applied to all of each key's records, and timed the same way. "
        "Fill time includes generating the rows in Python, index maintenance, `rebuild_standings()` "
        "and `ANALYZE`.",
        "",
        f"The machine was shared with other work while this ran (1-minute load average "
        f"{m['loadavg_1m_at_start']:.1f} at the start, {m['loadavg_1m_at_end']:.1f} at the end, on "
        f"{m['cores']} cores), so tails (p99) and fill times are pessimistic; the client and the "
        "PostgreSQL server also share those cores.",
        "",
    ]
    md.write_text("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--workloads", type=int, default=1000)
    ap.add_argument("--targets", type=int, default=2)
    ap.add_argument("--lookups", type=int, default=5000)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--backends", default="sqlite,postgres", help="comma list of sqlite, postgres")
    ap.add_argument("--out-md", type=Path, default=ROOT / "benchmarks" / "results" / "bench_db.md")
    ap.add_argument("--out-json", type=Path, default=ROOT / "benchmarks" / "results" / "bench_db.json")
    ap.add_argument("--no-write", action="store_true", help="print results only")
    args = ap.parse_args(argv)
    results = []
    start_machine = machine()
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    with tempfile.TemporaryDirectory(prefix="bench-db-") as tmp:
        if "sqlite" in backends:
            results.append(run_backend("sqlite", sqlite_url(Path(tmp) / "bench.db"), args))
        if "postgres" in backends:
            from tests.support.postgres import throwaway_postgres

            with throwaway_postgres("bench", fast_unsafe=False) as url:
                results.append(run_backend("postgres", url, args))
    result = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": {**start_machine, "loadavg_1m_at_end": os.getloadavg()[0]},
        "params": {k: getattr(args, k) for k in ("records", "workloads", "targets", "lookups", "batch", "seed")},
        "backends": results,
    }
    print(json.dumps({r["backend"]: r["lookups"] for r in results}, indent=1))
    if not args.no_write:
        write_docs(result, args.out_md, args.out_json)
        print(f"wrote {args.out_md} and {args.out_json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
