"""Benchmark: rows the on-hold review asks of the API per hourly run (issue 14, target 3).

    uv run python bench/bench_review.py            # 100,000 conversions/day, 10 % on hold
    uv run python bench/bench_review.py --quick    # 10,000/day, 2 hourly runs

A sandbox holds ``lookback + 2`` days of traffic. The review (``OnHoldReviewOperator``, the
shipped rules, writes on, guardrails off) runs once as a first run (no snapshot: the full
window), then every hour for ``--runs`` hours, each time from the snapshot kept beside the
audit. Before each hourly run the same window is pulled in full, as the review did before
(the baseline; it changes nothing), which also counts the bound's terms:
conversions created since the previous run and conversions currently on hold in the window.

Rows are read from the sandbox's request log (``rows`` of every conversion-report page
answered): the review's own traffic pull (range pull + on-hold refresh), and everything the run
asked for (that plus the writer's re-checks and read-backs). Target: all rows of an hourly run
<= 2 x (new + on hold). Results: a table on stdout and ``bench/results/review-<time>.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
REPORT = "/networks/reporting/conversions"
CONN = "bench_review"


def _rows(entries: list[dict[str, Any]]) -> dict[str, int]:
    """Conversion-report rows answered, split into range pulls and searches by id."""
    out = {"range": 0, "search": 0, "patches": 0}
    for e in entries:
        if e["method"] == "PATCH":
            out["patches"] += 1
        if e["method"] != "POST" or not e["path"].endswith(REPORT) or e["status"] != 200:
            continue
        terms = ((e.get("body") or {}).get("query") or {}).get("search_terms")
        out["search" if terms else "range"] += e.get("rows") or 0
    return out


def _review(base: Path, as_of: dt.datetime, run_id: str, args: argparse.Namespace, **kw: Any):
    from affiliate_network.operators.onhold_review import OnHoldReviewOperator

    op = OnHoldReviewOperator(
        task_id="review",
        affiliate_network_conn_id=CONN,
        rules_file="onhold_rules.yaml",  # of _bench_include's folder
        as_of=as_of.isoformat(),
        timezone_id=67,
        lease_wait_minutes=1,
        base_path=str(base),
        **kw,
    )
    return op.execute({"run_id": run_id})


def _bench_include(work: Path, args: argparse.Namespace) -> Path:
    """A copy of the include folder whose rules file's ``review:`` section is the bench's."""
    import yaml

    from affiliate_network.settings.paths import include_dir

    folder = work / "include"
    shutil.copytree(include_dir(), folder)
    rules = folder / "onhold_rules.yaml"
    data = yaml.safe_load(rules.read_text())
    data["review"] = {
        "lookback_days": args.lookback_days,
        "min_age_hours": 0,
        "chunk_size": 500,
        "max_reject_share": None,  # a bench of rows, not of guardrails
        "max_reject_count": None,
    }
    rules.write_text(yaml.safe_dump(data, sort_keys=False))
    return folder


def _baseline(sandbox: Any, as_of: dt.datetime, prev: dt.datetime, args: Any) -> dict[str, int]:
    """Today's full-window pull at ``as_of`` (the review's window, nothing kept, nothing
    written), and the bound's terms counted from it: conversions since ``prev``, on hold."""
    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
    from affiliate_network.review.traffic import pull_review_traffic
    from affiliate_network.review.window import review_window
    from affiliate_network.rules.fields import on_hold_status

    window = review_window(
        timezone_id=67,
        lookback_days=args.lookback_days,
        to_date=None,
        as_of=as_of.isoformat(),
        horizon_hours=24,  # the shipped rules' longest within_hours
    )
    sandbox.clear_requests()
    hook = AffiliateNetworkHook(CONN)
    try:
        records = pull_review_traffic(
            hook,
            window=window,
            fields={"conversion_id", "conversion_unix_timestamp"},
            members={"on_hold_snapshots"},
            store=None,
        ).records
    finally:
        hook.close()
    return {
        "full_rows": _rows(sandbox.requests_log())["range"],
        "window": len(records),
        "new": sum(r["conversion_unix_timestamp"] > prev.timestamp() for r in records),
        "on_hold": sum(on_hold_status(r) == "on_hold" for r in records),
    }


def drive(args: argparse.Namespace) -> list[dict[str, Any]]:
    from affiliate_network_sandbox.testing import start_sandbox

    days = args.lookback_days + 2
    end = dt.date.today() - dt.timedelta(days=1)
    print(
        f"starting sandbox: {days} days x {args.per_day:,} conversions/day, "
        f"{args.on_hold_share:.0%} on hold ...",
        flush=True,
    )
    sandbox = start_sandbox(
        seed=14,
        end_date=end.isoformat(),
        days=days,
        conversions_per_day=args.per_day,
        on_hold_share=args.on_hold_share,
    )
    os.environ[f"AIRFLOW_CONN_{CONN.upper()}"] = json.dumps(
        {
            "conn_type": "affiliate_network",
            "host": sandbox.base_url,
            "password": sandbox.keys["network"],
            "extra": {"portal": "network"},
        }
    )
    work = Path(tempfile.mkdtemp(prefix="bench-review-"))
    os.environ["AFFILIATE_NETWORK_INCLUDE_DIR"] = str(_bench_include(work, args))
    results = []
    try:
        sandbox.set_faults(latency_ms=args.latency_ms)
        at = dt.datetime(end.year, end.month, end.day, 6, tzinfo=dt.UTC)
        prev = at
        for step in range(args.runs + 1):
            as_of = at + dt.timedelta(hours=step)
            base_line = _baseline(sandbox, as_of, prev, args)
            sandbox.clear_requests()
            started = time.perf_counter()
            summary = _review(work / "scheduled", as_of, f"scheduled__{step}", args, dry_run=False)
            elapsed = time.perf_counter() - started
            rows = _rows(sandbox.requests_log())
            traffic = summary["traffic"]
            result = {
                "run": step,
                "as_of": as_of.isoformat(),
                "mode": traffic["mode"],
                "traffic_rows": traffic["rows_new"] + traffic["rows_refreshed"],
                "all_rows": rows["range"] + rows["search"],
                "patches": rows["patches"],
                "bound": 2 * (base_line["new"] + base_line["on_hold"]),
                "elapsed_s": round(elapsed, 1),
                "load_avg_1m": os.getloadavg()[0],
                "decisions": summary["decisions"],
                **base_line,
            }
            results.append(result)
            print(
                f"  run {step} ({traffic['mode']}): {result['all_rows']:,} rows "
                f"(traffic {result['traffic_rows']:,}), full window {base_line['full_rows']:,}, "
                f"bound {result['bound']:,}, {elapsed:.1f}s, load {result['load_avg_1m']:.1f}",
                flush=True,
            )
            prev = as_of
    finally:
        sandbox.stop()
    return results


def _report(results: list[dict[str, Any]], args: argparse.Namespace) -> bool:
    header = (
        "| run | as of (UTC) | path | rows asked (all) | of which traffic | full-window pull "
        "| new since previous | on hold | bound 2x(new+on hold) | all / bound | target | "
        "seconds | load avg |"
    )
    lines = [header, "|" + "---|" * 13]
    ok = True
    for r in results:
        hourly = r["run"] > 0
        meets = r["all_rows"] <= r["bound"]
        ok &= meets or not hourly
        verdict = ("ok" if meets else "MISSED") if hourly else "first run (full window)"
        lines.append(
            f"| {r['run']} | {r['as_of'][:16]} | {r['mode']} | {r['all_rows']:,} "
            f"| {r['traffic_rows']:,} | {r['full_rows']:,} | {r['new']:,} | {r['on_hold']:,} "
            f"| {r['bound']:,} | {r['all_rows'] / max(1, r['bound']):.2f} | {verdict} "
            f"| {r['elapsed_s']} | {r['load_avg_1m']:.1f} |"
        )
    table = "\n".join(lines)
    print("\n" + table)
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    out = RESULTS / f"review-{stamp}.json"
    out.write_text(
        json.dumps(
            {
                "command": " ".join([Path(sys.executable).name, *sys.argv]),
                "per_day": args.per_day,
                "on_hold_share": args.on_hold_share,
                "lookback_days": args.lookback_days,
                "latency_ms": args.latency_ms,
                "cpus": os.cpu_count(),
                "results": results,
                "table_markdown": table,
            },
            indent=2,
        )
    )
    print(f"\nresults: {out}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-day", type=int, default=100_000)
    parser.add_argument("--on-hold-share", type=float, default=0.1)
    parser.add_argument("--lookback-days", type=int, default=7)
    parser.add_argument("--runs", type=int, default=4, help="hourly runs after the first")
    parser.add_argument("--latency-ms", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="10,000/day, 2 hourly runs")
    args = parser.parse_args()
    if args.quick:
        args.per_day, args.runs = 10_000, 2
    os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="bench-airflow-"))
    os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    os.environ["AFFILIATE_ONHOLD_ARMED"] = "true"  # its own sandbox: the runs write, as hourly
    results = drive(args)
    return 0 if _report(results, args) else 1


if __name__ == "__main__":
    sys.exit(main())
