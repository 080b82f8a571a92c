"""Benchmark: one day of conversions landed as Parquet, beside the hook's raw pull.

One command, figures side by side::

    uv run python bench/bench_report.py              # days of 100,000, 1,000,000, 5,000,000
    uv run python bench/bench_report.py --rows 100000 --contenders pull parquet
    uv run python bench/bench_report.py --rows 100000 1000000   # the quicker pair

Contenders, each in its own subprocess (so its peak RSS is its own), against one sandbox
process with ``latency_ms`` (default 200) injected on every request, as in ``bench_pull.py``:

* ``pull``: ``AffiliateNetworkHook.iter_conversions`` for the day, records dropped as read
  (the raw pull: the floor any landing can reach).
* ``parquet``: ``ConversionReportOperator.execute`` for the same day: the same pull streamed
  through the schema, dedupe, checksum and Parquet writer, then the atomic publish.
* ``jsonl``: the same with ``format="jsonl"`` (gzip JSON Lines).

Reported per contender: wall seconds, rows/s, peak RSS (MB), its CPU seconds, and the
sandbox's CPU seconds during the run (the two share this machine's cores). Results also go to
``bench/results/report-<time>.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _measure import cpu_self_s, cpu_tree_s, peak_rss_mb, run_worker  # bench/ is sys.path[0]

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
CONTENDERS = ("pull", "parquet", "jsonl")


# --------------------------------------------------------------------------- workers
def worker(args: argparse.Namespace) -> dict[str, Any]:
    if args.worker != "pull":
        # What ConversionReportOperator.execute does first in a task process, where nothing
        # has loaded pyarrow yet; here the imports below load it (Arrow's allocator is chosen
        # then).
        from affiliate_network.hooks._memory import prefer_system_arrow_pool

        prefer_system_arrow_pool()
    # Import everything first so start-up costs are not timed (they are the same for all).
    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
    from affiliate_network.operators.conversion_report import ConversionReportOperator
    from affiliate_network.reports.storage import as_storage_path

    as_storage_path(args.out).fs  # noqa: B018 - registers Airflow's filesystems up front
    baseline = peak_rss_mb()
    cpu0 = cpu_self_s()
    started = time.perf_counter()
    if args.worker == "pull":
        hook = AffiliateNetworkHook("bench_network", concurrency=args.concurrency)
        pull = hook.iter_conversions(from_date=args.day, to_date=args.day, timezone_id=67)
        rows = sum(1 for _ in pull)
        pages, extra = pull.stats.pages, {}
        hook.close()
    else:
        op = ConversionReportOperator(
            task_id=f"bench_{args.worker}",
            affiliate_network_conn_id="bench_network",
            from_date=args.day,
            to_date=args.day,
            timezone_id=67,
            network_timezone="UTC",
            currency_id="USD",
            format=args.worker,
            base_path=args.out,
            hook_kwargs={"concurrency": args.concurrency},
            outlets=[],
        )
        summary = op.execute({})
        rows, pages = summary["rows"], summary["pages"]
        part = summary["partitions"][0]
        manifest = json.loads(Path(part["path"], "_manifest.json").read_text())
        extra = {
            "file_mb": manifest["files"][0]["bytes"] / 1e6,
            "duplicates_dropped": summary["duplicates_dropped"],
        }
    elapsed = time.perf_counter() - started
    return {
        "rows": rows,
        "pages": pages,
        "elapsed_s": elapsed,
        "cpu_s": cpu_self_s() - cpu0,
        "baseline_rss_mb": baseline,
        "peak_rss_mb": peak_rss_mb(),
        **extra,
    }


# --------------------------------------------------------------------------- driver
def _run(name: str, sandbox: Any, day: str, args: argparse.Namespace, env: dict[str, str]) -> dict:
    out = tempfile.mkdtemp(prefix=f"bench-report-{name}-")
    cpu_before = cpu_tree_s(sandbox.pid)
    command = [
        sys.executable,
        __file__,
        "--worker",
        name,
        "--day",
        day,
        "--out",
        out,
        "--concurrency",
        str(args.concurrency),
    ]
    result = run_worker(name, command, env)
    result.update(
        contender=name,
        load_average=round(os.getloadavg()[0], 2),  # the 1-minute figure as the run ends
        rows_per_s=result["rows"] / result["elapsed_s"] if result["elapsed_s"] else 0.0,
        sandbox_cpu_s=cpu_tree_s(sandbox.pid) - cpu_before,
    )
    subprocess.run(["rm", "-rf", out], check=False)
    return result


def drive(args: argparse.Namespace) -> None:
    """Each size in ``--rows`` in turn (a sandbox each), then one table of them all."""
    results: list[dict[str, Any]] = []
    for rows in args.rows:
        results.extend(_drive_size(rows, args))
    _report(results, args)


def _drive_size(rows: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    from affiliate_network_sandbox.testing import clock_after_data, start_sandbox

    print(f"starting sandbox: 1 day x {rows:,} conversions ...", flush=True)
    # Clock after the data: the day is complete, the same rows whatever the time of day.
    end = dt.datetime.now(dt.UTC).date()
    sandbox = start_sandbox(
        seed=42,
        days=1,
        conversions_per_day=rows,
        event_share=0.0,
        end_date=end,
        clock=clock_after_data(end),
    )
    try:
        sandbox.set_faults(latency_ms=args.latency_ms)
        day = sandbox.catalog()["last_date"]
        truth = sandbox.truth(day, day, timezone_id=67)
        home = tempfile.mkdtemp(prefix="bench-airflow-")
        env = {
            **os.environ,
            "AIRFLOW_HOME": home,
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            "AIRFLOW_CONN_BENCH_NETWORK": json.dumps(
                {
                    "conn_type": "affiliate_network",
                    "host": sandbox.base_url,
                    "password": sandbox.keys["network"],
                    "extra": {"portal": "network"},
                }
            ),
        }
        print(
            f"== {day}: {truth['conversions']:,} conversions, latency {args.latency_ms} ms, "
            f"concurrency {args.concurrency} ==",
            flush=True,
        )
        results = []
        for name in args.contenders:
            result = _run(name, sandbox, day, args, env)
            result.update(day=day, truth_conversions=truth["conversions"], n=rows)
            results.append(result)
            print(
                f"  {name:8s} {result['rows']:>9,} rows in {result['elapsed_s']:7.1f}s = "
                f"{result['rows_per_s']:>8,.0f} rows/s, peak RSS {result['peak_rss_mb']:6.0f} MB, "
                f"CPU {result['cpu_s']:6.1f}s (sandbox {result['sandbox_cpu_s']:6.1f}s)",
                flush=True,
            )
    finally:
        sandbox.stop()
    return results


def _report(results: list[dict[str, Any]], args: argparse.Namespace) -> None:
    pulls = {r["n"]: r for r in results if r["contender"] == "pull"}
    lines = [
        "| contender | rows | pages | wall s | rows/s | vs raw pull | peak RSS MB | CPU s "
        "| sandbox CPU s | file MB | dups dropped | load avg |",
        "|" + "---|" * 12,
    ]
    for r in results:
        pull = pulls.get(r["n"])  # the raw pull of the same day, in the same run
        ratio = f"{r['elapsed_s'] / pull['elapsed_s']:.2f}x" if pull else "-"
        file_mb = f"{r['file_mb']:.0f}" if "file_mb" in r else "-"
        lines.append(
            f"| {r['contender']} | {r['rows']:,} | {r['pages']} | {r['elapsed_s']:.1f} | "
            f"{r['rows_per_s']:,.0f} | {ratio} | {r['peak_rss_mb']:.0f} | {r['cpu_s']:.1f} | "
            f"{r['sandbox_cpu_s']:.1f} | {file_mb} | {r.get('duplicates_dropped', '-')} | "
            f"{r['load_average']:.1f} |"
        )
    table = "\n".join(lines)
    sizes = ", ".join(f"{n:,}" for n in args.rows)
    print(f"\n{sizes} conversions, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(table)
    print(
        "targets (issue 14): parquet <= 1.2x and jsonl <= 1.4x the raw pull's wall time, "
        "peak RSS <= 300 MB, flat from 100,000 to 5,000,000 rows"
    )
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"report-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps({"args": vars(args), "results": results}, indent=2))
    print(f"\nresults: {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--rows", type=int, nargs="+", default=[100_000, 1_000_000, 5_000_000], help="day sizes"
    )
    parser.add_argument("--latency-ms", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--contenders", nargs="+", default=list(CONTENDERS), choices=CONTENDERS)
    parser.add_argument("--worker", choices=CONTENDERS, help=argparse.SUPPRESS)
    parser.add_argument("--day", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args)))
    else:
        drive(args)


if __name__ == "__main__":
    main()
