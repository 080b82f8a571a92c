"""Benchmark: a day's daily run (landing, then reconciliation) at two sizes, side by side.

One command, figures side by side::

    uv run python bench/bench_reconcile.py                        # days of 20,000 and 1,000,000
    uv run python bench/bench_reconcile.py --rows 20000 200000    # the quicker pair
    uv run python bench/bench_reconcile.py --ref main             # and main's reconciliation

Per size, one sandbox of the ``large`` world (``--world``): offers paying in USD, EUR, GBP,
JPY, KWD and IDR, 300 affiliates x 60 offers, the day pulled in EUR with its events. The two
steps of the daily run each run in a process of their own, as Airflow runs the DAG's two
tasks:

* ``land``: ``ConversionReportOperator.execute`` for the day (Parquet).
* ``reconcile``: ``reconcile_day`` for the landed day (what ``reconcile_conversions`` runs).
* ``reconcile@REF`` (with ``--ref``): the same call with the ``plugins/`` of another git
  revision, on the same landed day; a failure is reported (its peak RSS still counts).

Reported per step: wall seconds, peak RSS (MB), its CPU seconds, the sandbox's CPU seconds
during the step, the 1-minute load average as it ends, and the run's peak (the larger of the
two steps) against the smallest day's. Target (issue 34): the 1,000,000-row day's run peaks
within 300 MB of the 20,000-row day's. Results also go to
``bench/results/reconcile-<time>.json``.
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

from _measure import cpu_self_s, cpu_tree_s, peak_rss_mb  # bench/ is sys.path[0]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
#: Peak RSS the largest day's run may add to the smallest day's (issue 34).
TARGET_MB = 300


# --------------------------------------------------------------------------- workers
def worker(args: argparse.Namespace) -> dict[str, Any]:
    # What both steps do first, before anything loads pyarrow.
    from affiliate_network.hooks._memory import prefer_system_arrow_pool

    prefer_system_arrow_pool()
    # Import everything first so start-up costs are not timed (they are the same for all).
    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
    from affiliate_network.operators.conversion_report import ConversionReportOperator
    from affiliate_network.reports.reconcile import reconcile_day
    from affiliate_network.reports.storage import as_storage_path

    as_storage_path(args.out).fs  # noqa: B018 - registers Airflow's filesystems up front
    baseline = peak_rss_mb()
    cpu0 = cpu_self_s()
    started = time.perf_counter()
    extra: dict[str, Any] = {}
    if args.worker == "land":
        op = ConversionReportOperator(
            task_id="bench_land",
            affiliate_network_conn_id="bench_network",
            from_date=args.day,
            to_date=args.day,
            timezone_id=67,
            network_timezone="UTC",
            currency_id="EUR",
            show_events=True,
            format="parquet",
            base_path=args.out,
            hook_kwargs={"concurrency": args.concurrency},
            outlets=[],
        )
        summary = op.execute({})
        extra = {"rows": summary["rows"], "pages": summary["pages"]}
    else:
        hook = AffiliateNetworkHook("bench_network", timeout=600)
        try:
            summary = reconcile_day(hook, args.out, args.day, on_mismatch="warn")
            extra = {
                "rows": None,
                "cells": summary["cells"],
                "reconciled": summary["reconciled"],
                "requests": summary.get("report_requests", 1),
            }
        except Exception as exc:  # a baseline that cannot do the day still has a peak
            extra = {"error": f"{type(exc).__name__}: {str(exc)[:60]}"}
        finally:
            hook.close()
    return {
        "elapsed_s": time.perf_counter() - started,
        "cpu_s": cpu_self_s() - cpu0,
        "baseline_rss_mb": baseline,
        "peak_rss_mb": peak_rss_mb(),
        **extra,
    }


# --------------------------------------------------------------------------- driver
def _ref_plugins(ref: str) -> Path:
    """``plugins/`` of git revision ``ref``, extracted to a temporary folder."""
    folder = Path(tempfile.mkdtemp(prefix="bench-reconcile-ref-"))
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", ref, "plugins/affiliate_network"],
        capture_output=True,
        check=True,
    )
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
    return folder / "plugins"


def _run(
    name: str, sandbox: Any, day: str, out: str, args: argparse.Namespace, env: dict[str, str]
) -> dict[str, Any]:
    cpu_before = cpu_tree_s(sandbox.pid)
    step = "land" if name == "land" else "reconcile"
    command = [sys.executable, __file__, "--worker", step, "--day", day, "--out", out]
    command += ["--concurrency", str(args.concurrency)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{name} worker failed:\n{done.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result.update(
        step=name,
        load_average=round(os.getloadavg()[0], 2),  # the 1-minute figure as the step ends
        sandbox_cpu_s=cpu_tree_s(sandbox.pid) - cpu_before,
    )
    return result


def _drive_size(
    rows: int, args: argparse.Namespace, ref_plugins: Path | None
) -> list[dict[str, Any]]:
    from affiliate_network_sandbox.testing import clock_after_data, start_sandbox

    print(f"starting sandbox: world {args.world}, 1 day x {rows:,} conversions ...", flush=True)
    end = dt.datetime.now(dt.UTC).date()
    sandbox = start_sandbox(
        seed=42,
        world=args.world,
        days=1,
        conversions_per_day=rows,
        end_date=end,
        clock=clock_after_data(end),
    )
    out = tempfile.mkdtemp(prefix="bench-reconcile-")
    try:
        day = sandbox.catalog()["last_date"]
        env = {
            **os.environ,
            "AIRFLOW_HOME": tempfile.mkdtemp(prefix="bench-airflow-"),
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
        steps = [("land", env), ("reconcile", env)]
        if ref_plugins is not None:
            path = os.pathsep.join(p for p in (str(ref_plugins), env.get("PYTHONPATH")) if p)
            steps.append((f"reconcile@{args.ref}", {**env, "PYTHONPATH": path}))
        results = []
        for name, step_env in steps:
            result = _run(name, sandbox, day, out, args, step_env)
            result.update(day=day, n=rows)
            results.append(result)
            what = result.get("error") or (
                f"{result['rows']:,} rows" if result.get("rows") else f"{result['cells']:,} cells"
            )
            print(
                f"  {name:16s} {result['elapsed_s']:7.1f}s, peak RSS {result['peak_rss_mb']:6.0f}"
                f" MB, CPU {result['cpu_s']:6.1f}s (sandbox {result['sandbox_cpu_s']:6.1f}s), "
                f"load {result['load_average']:.1f}: {what}",
                flush=True,
            )
    finally:
        sandbox.stop()
        subprocess.run(["rm", "-rf", out], check=False)
    return results


def _report(results: list[dict[str, Any]], args: argparse.Namespace) -> None:
    lines = [
        "| N | step | wall s | peak RSS MB | CPU s | sandbox CPU s | outcome | load avg |",
        "|" + "---|" * 8,
    ]
    for r in results:
        outcome = r.get("error") or (
            f"{r['rows']:,} rows"
            if r.get("rows")
            else f"{r['cells']:,} cells, {r['requests']} requests, reconciled {r['reconciled']}"
        )
        lines.append(
            f"| {r['n']:,} | {r['step']} | {r['elapsed_s']:.1f} | {r['peak_rss_mb']:.0f} | "
            f"{r['cpu_s']:.1f} | {r['sandbox_cpu_s']:.1f} | {outcome} | {r['load_average']:.1f} |"
        )
    runs = {}
    for n in args.rows:
        mine = [r for r in results if r["n"] == n and r["step"] in ("land", "reconcile")]
        runs[n] = max(r["peak_rss_mb"] for r in mine)
    smallest = min(args.rows)
    lines += [
        "",
        "| N | the run's peak RSS MB (land, reconcile) | vs the smallest day |",
        "|---|---|---|",
    ]
    for n, peak in runs.items():
        lines.append(f"| {n:,} | {peak:.0f} | {peak - runs[smallest]:+.0f} MB |")
    table = "\n".join(lines)
    sizes = ", ".join(f"{n:,}" for n in args.rows)
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"\n{sizes} conversions, world {args.world}, {when}")
    print(table)
    print(
        f"target (issue 34): the largest day's run peaks within {TARGET_MB} MB of the "
        f"{smallest:,}-row day's"
    )
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"reconcile-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps({"args": vars(args), "results": results}, indent=2))
    print(f"\nresults: {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[20_000, 1_000_000])
    parser.add_argument("--world", default="large", choices=["large", "small"])
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--ref", help="also run the reconciliation of this git revision")
    parser.add_argument("--worker", choices=["land", "reconcile"], help=argparse.SUPPRESS)
    parser.add_argument("--day", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args)))
        return
    ref_plugins = _ref_plugins(args.ref) if args.ref else None
    results: list[dict[str, Any]] = []
    for rows in args.rows:
        results.extend(_drive_size(rows, args, ref_plugins))
    _report(results, args)


if __name__ == "__main__":
    main()
