"""Benchmark: the rules backtest's memory stays flat as the backtested range grows.

    uv run python bench/bench_backtest.py            # 10,000 conversions/day, 7 vs 30 days
    uv run python bench/bench_backtest.py --quick    # 2,000/day

A sandbox holds 30 days plus the look-back before them and the look-ahead after them. The
network decides some held conversions first (the planted blocklisted ones rejected, half the
planted duplicate-IP ones approved), then every day is landed as the report DAG lands it
(``reports/landing.py``, Parquet with manifests). Then ``affiliate-network-rules backtest
include/onhold_rules.yaml`` runs in a fresh process twice: over the last 7 days (the baseline)
and over the last 30 days, each reporting its peak RSS and wall time. Streaming day by day
holds only one review window of traffic, so the 30-day peak should be close to the 7-day one
(ratio near 1) while the time grows with the days. Prints both beside each other, the load
average, and the 30-day backtest's totals per rule; results in
``bench/results/backtest-<time>.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
CONN = "bench_backtest"
RULES = ROOT / "include" / "onhold_rules.yaml"


def peak_rss_mb() -> float:
    """This process's own peak RSS in MB: ``VmHWM`` of its address space.

    Not ``getrusage``: Linux carries a parent's high-water mark across fork and exec into
    ``ru_maxrss``, so a worker started by this (much larger) driver would report the driver's.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    from _measure import peak_rss_mb as from_rusage  # bench/ is sys.path[0]

    return from_rusage()


def worker(argv: list[str]) -> None:
    """Run the backtest in this process; print its output, then one JSON line of figures."""
    # Loaded before the baseline, so that "peak minus imports" is what the run adds: data.
    import pyarrow.parquet  # noqa: F401

    from affiliate_network.backtest import job  # noqa: F401
    from affiliate_network.backtest.cli import main as rules_main
    from affiliate_network.rules import engine  # noqa: F401

    imported = peak_rss_mb()
    started = time.perf_counter()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = rules_main(argv)
    elapsed = time.perf_counter() - started
    print(out.getvalue(), end="")
    figures = {"code": code, "seconds": round(elapsed, 2), "peak_rss_mb": peak_rss_mb()}
    print(json.dumps({**figures, "rss_after_imports_mb": imported}))


def _run(
    records: Path, first: dt.date, last: dt.date, decisions: Path, lookback: int
) -> dict[str, Any]:
    argv = [
        "backtest", str(RULES), "--records", str(records), "--from", str(first), "--to", str(last),
        "--decisions", str(decisions), "--lookback-days", str(lookback),
    ]  # fmt: skip
    done = subprocess.run(
        [sys.executable, __file__, "--worker", *argv],
        capture_output=True,
        text=True,
        check=False,
        env=os.environ.copy(),
    )
    if done.returncode != 0:
        raise SystemExit(f"backtest worker failed:\n{done.stderr[-4000:]}")
    lines = done.stdout.strip().splitlines()
    figures = json.loads(lines[-1])
    if figures["code"] != 0:
        raise SystemExit(f"backtest failed:\n{done.stderr[-4000:]}")
    figures["output"] = lines[:-1]
    figures["days"] = (last - first).days + 1
    figures["decided"] = sum(1 for _ in decisions.open()) - 1  # CSV header
    return figures


def _network_decides(sandbox: Any, first: dt.date, last: dt.date) -> dict[str, int]:
    """PATCH some held conversions, as the network's own people would have."""
    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook

    planted = sandbox.planted(first.isoformat(), last.isoformat())["on_hold_conversion_ids"]
    rejected = sorted(planted["blocklisted_sub"])
    approved = sorted(planted["duplicate_ip"])[::2]
    hook = AffiliateNetworkHook(CONN)
    try:
        for status, ids in (("rejected", rejected), ("approved", approved)):
            for start in range(0, len(ids), 500):
                hook.set_on_hold_status(ids[start : start + 500], status)
    finally:
        hook.close()
    return {"rejected": len(rejected), "approved": len(approved)}


def drive(args: argparse.Namespace) -> dict[str, Any]:
    from affiliate_network_sandbox.testing import clock_after_data, start_sandbox

    sys.path.insert(0, str(ROOT))
    from tests.support.landed_history import land_days

    end = dt.date.today() - dt.timedelta(days=1)
    after = 2  # the last backtested day's run reads a day and a second after it
    last = end - dt.timedelta(days=after)
    first30 = last - dt.timedelta(days=29)
    first7 = last - dt.timedelta(days=6)
    start = first30 - dt.timedelta(days=args.lookback_days + 1)
    days = (end - start).days + 1
    print(f"starting sandbox: {days} days x {args.per_day:,} conversions/day ...", flush=True)
    sandbox = start_sandbox(
        seed=28,
        end_date=end.isoformat(),
        days=days,
        conversions_per_day=args.per_day,
        clock=clock_after_data(end),
    )
    os.environ[f"AIRFLOW_CONN_{CONN.upper()}"] = json.dumps(
        {
            "conn_type": "affiliate_network",
            "host": sandbox.base_url,
            "password": sandbox.keys["network"],
            "extra": {"portal": "network"},
        }
    )
    work = Path(tempfile.mkdtemp(prefix="bench-backtest-"))
    try:
        patched = _network_decides(sandbox, start, end)
        started = time.perf_counter()
        landed = land_days(CONN, work, start, end)
        land_s = time.perf_counter() - started
    finally:
        sandbox.stop()
    rows = sum(d["rows"] for d in landed)
    print(f"landed {len(landed)} days, {rows:,} rows in {land_s:.0f} s", flush=True)
    records = work / "conversions"
    load_before = os.getloadavg()[0]
    runs = [
        _run(records, first7, last, work / "decisions-7.csv", args.lookback_days),
        _run(records, first30, last, work / "decisions-30.csv", args.lookback_days),
    ]
    return {
        "per_day": args.per_day,
        "landed_days": len(landed),
        "landed_rows": rows,
        "network_patched": patched,
        "land_seconds": round(land_s, 1),
        "load_avg_1m_before": load_before,
        "load_avg_1m_after": os.getloadavg()[0],
        "runs": runs,
        "records": str(records),
        "range_30": [first30.isoformat(), last.isoformat()],
    }


def report(result: dict[str, Any], args: argparse.Namespace) -> None:
    base, big = result["runs"]
    lines = [
        "| backtested days | conversions decided | seconds | peak RSS MB | after imports MB "
        "| peak minus imports MB |",
        "|---|---|---|---|---|---|",
        *(
            f"| {r['days']} | {r['decided']:,} | {r['seconds']} | {r['peak_rss_mb']:.0f} "
            f"| {r['rss_after_imports_mb']:.0f} "
            f"| {r['peak_rss_mb'] - r['rss_after_imports_mb']:.0f} |"
            for r in result["runs"]
        ),
    ]
    ratio = big["peak_rss_mb"] / base["peak_rss_mb"]
    table = "\n".join(lines)
    print("\n" + table)
    print(
        f"\npeak RSS 30 days / 7 days (the baseline): {ratio:.2f}  (flat memory: near 1); "
        f"time ratio {big['seconds'] / base['seconds']:.1f}; {result['per_day']:,} "
        f"conversions/day; load average (1 min) {result['load_avg_1m_before']:.1f} before, "
        f"{result['load_avg_1m_after']:.1f} after, {os.cpu_count()} CPUs"
    )
    print(f"\n30-day backtest {result['range_30'][0]}..{result['range_30'][1]}, totals per rule:")
    for line in big["output"]:
        if line.startswith(("total ", "day ", "Backtest")) or "decided over" in line:
            print("  " + line)
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    out = RESULTS / f"backtest-{stamp}.json"
    out.write_text(
        json.dumps(
            {
                "command": " ".join([Path(sys.executable).name, *sys.argv]),
                "rss_ratio_30_over_7": round(ratio, 3),
                "cpus": os.cpu_count(),
                **result,
                "table_markdown": table,
            },
            indent=2,
        )
    )
    print(f"\nresults: {out}")


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-day", type=int, default=10_000)
    parser.add_argument("--lookback-days", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="2,000 conversions/day")
    args = parser.parse_args()
    if args.quick:
        args.per_day = 2_000
    report(drive(args), args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
