"""Benchmark: a 30-day backfill of the daily conversion tasks on the large world, checked.

One command::

    uv run python bench/bench_backfill.py            # 30 logical dates
    uv run python bench/bench_backfill.py --days 8   # what the test suite runs

It runs ``tests/operators/test_backfill_large.py``'s :func:`backfill` (the same checks, here
over ``--days`` logical dates): per run, the run's day pulled and the trailing day re-pulled
in EUR at the run's scheduled clock, every landed day reconciled, the changes published; every
partition a run landed or re-landed must reconcile and equal the sandbox's money truth per
currency to the minor unit; then a row removed from the last day's file must fail its cell.
The sandbox is the ``large`` world (six currencies, 300 affiliates x 60 offers) at 16,000
conversions a day (over 10,000 cells each), no added latency; the hook runs with the test
suite's fast retries.

Printed per run: wall seconds of the four tasks, rows pulled, the days re-landed; at the end
the totals: wall seconds (with the checks), this process's and the sandbox's CPU seconds, peak
RSS, the 1-minute load average at start and end. Results also go to
``bench/results/backfill-<time>.json``. A failed check exits 1 with its message.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _measure import cpu_self_s, cpu_tree_s, peak_rss_mb  # bench/ is sys.path[0]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=30, help="logical dates (default 30)")
    args = parser.parse_args(argv)
    if not 1 <= args.days <= 60:
        parser.error("--days must be between 1 and 60")

    # Airflow reads its configuration on first import: an isolated home first.
    os.environ["AIRFLOW_HOME"] = tempfile.mkdtemp(prefix="bench-airflow-")
    os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
    os.environ["AIRFLOW__CORE__UNIT_TEST_MODE"] = "False"
    sys.path.insert(0, str(ROOT))
    from affiliate_network_sandbox.testing import clock_after_data, start_sandbox
    from tests.operators.test_backfill_large import (
        CONVERSIONS_PER_DAY,
        backfill,
        plant_missing_row,
        reset_world,
    )

    load_start = os.getloadavg()[0]
    end = dt.datetime.now(dt.UTC).date()
    sandbox = start_sandbox(seed=42, end_date=end, clock=clock_after_data(end))
    os.environ["AIRFLOW_CONN_AFFILIATE_NETWORK_DEFAULT"] = json.dumps(
        {
            "conn_type": "affiliate_network",
            "host": sandbox.base_url,
            "password": sandbox.keys["network"],
            "extra": {"portal": "network"},
        }
    )
    base = Path(tempfile.mkdtemp(prefix="bench-backfill-"))
    print(
        f"large world, {CONVERSIONS_PER_DAY:,} conversions a day, {args.days} logical dates, "
        f"load {load_start:.1f}",
        flush=True,
    )

    def show(run: dict[str, Any]) -> None:
        print(
            f"  {run['day']}: {run['seconds']:5.1f}s, {run['rows']:,} rows pulled, "
            f"re-landed {', '.join(run['relanded']) or '-'}",
            flush=True,
        )

    cpu0, sandbox_cpu0 = cpu_self_s(), cpu_tree_s(sandbox.pid)
    started = time.perf_counter()
    try:
        logical = reset_world(sandbox, args.days)
        runs = backfill(sandbox, base, logical, on_run=show)
        plant_missing_row(sandbox, base, logical[-1].isoformat())
    except AssertionError as err:
        print(f"bench_backfill: a check failed: {err}", file=sys.stderr)
        return 1
    finally:
        sandbox_cpu = cpu_tree_s(sandbox.pid) - sandbox_cpu0
        sandbox.stop()
    result = {
        "days": args.days,
        "conversions_per_day": CONVERSIONS_PER_DAY,
        "landings": sum(len(r["landed"]) for r in runs),
        "relanded": sum(len(r["relanded"]) for r in runs),
        "rows_pulled": sum(r["rows"] for r in runs),
        "tasks_s": round(sum(r["seconds"] for r in runs), 1),
        "wall_s": round(time.perf_counter() - started, 1),
        "cpu_s": round(cpu_self_s() - cpu0, 1),
        "sandbox_cpu_s": round(sandbox_cpu, 1),
        "peak_rss_mb": round(peak_rss_mb()),
        "load_average": [round(load_start, 2), round(os.getloadavg()[0], 2)],
        "runs": runs,
    }
    print(
        f"{result['landings']} partitions landed ({result['relanded']} re-landed by a trailing "
        f"re-pull), every one reconciled and equal to the truth per currency; the planted row "
        f"failed its cell.\n"
        f"wall {result['wall_s']}s (tasks {result['tasks_s']}s), {result['rows_pulled']:,} rows "
        f"pulled, CPU {result['cpu_s']}s + sandbox {result['sandbox_cpu_s']}s, peak RSS "
        f"{result['peak_rss_mb']} MB, load {load_start:.1f} -> {os.getloadavg()[0]:.1f}"
    )
    RESULTS.mkdir(exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")
    (RESULTS / f"backfill-{stamp}.json").write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
