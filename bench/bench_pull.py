"""Benchmark: pulling the conversion report with AffiliateNetworkHook vs the stock Airflow way.

One command, figures side by side in one run::

    uv run python bench/bench_pull.py            # 100k and 1M rows, 200 ms latency
    uv run python bench/bench_pull.py --quick    # 20k and 100k rows (a smoke run)

Contenders, each in its own subprocess (so its peak RSS is its own):

* ``hook``: ``AffiliateNetworkHook.iter_conversions`` (page 1, then the rest concurrently,
  ``--concurrency`` workers, 8 here against the hook's default of 4: with 200 ms per request
  and a CPU shared with the sandbox, 4 in flight do not hide the latency), records consumed
  and dropped one by one, as a streaming writer would.
* ``stock``: ``HttpOperator(pagination_function=...)`` with an ``http`` connection, the way the
  HTTP provider documents paging: every page's ``Response`` is kept and handed to
  ``response_filter`` as a list, which parses them all. It is stopped at a stated memory ceiling
  (``--ceiling-mb``, checked in the pagination function after every page).
* ``plain``: a sequential ``requests.Session`` loop (``response.json()``), pages dropped as read.

The sandbox runs in its own process with ``latency_ms`` injected on every request (a reporting
API's page takes that long or longer). Its own CPU time per page is measured with psutil on its
pid (children included), so it is visible whether the sandbox or the client is the bottleneck on
this 2-core machine. Results go to stdout as a table and to ``bench/results/pull-<time>.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _measure import cpu_self_s, cpu_tree_s, peak_rss_mb, run_worker  # bench/ is sys.path[0]

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
CONTENDERS = ("hook", "stock", "plain")
PAGE_SIZE = 2000
ENDPOINT = "/networks/reporting/conversions"


# --------------------------------------------------------------------------- workers
def _body(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "show_conversions": True,
        "show_events": False,
        "from": args.from_date,
        "to": args.to_date,
        "timezone_id": 67,
        "query": {"filters": [], "search_terms": []},
    }


def worker_hook(args: argparse.Namespace) -> dict[str, Any]:
    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook

    hook = AffiliateNetworkHook("bench_network", concurrency=args.concurrency)
    baseline = peak_rss_mb()
    started, cpu_started = time.perf_counter(), cpu_self_s()
    pull = hook.iter_conversions(from_date=args.from_date, to_date=args.to_date, timezone_id=67)
    rows = 0
    for _record in pull:
        rows += 1
    elapsed = time.perf_counter() - started
    return {
        "rows": rows,
        "pages": pull.stats.pages,
        # answers received (a sliced pull's dropped answers included; offset pages: the pages)
        "requests": getattr(pull.stats, "requests", pull.stats.pages),
        "retries": pull.stats.retries,
        "elapsed_s": elapsed,
        "client_cpu_s": cpu_self_s() - cpu_started,
        "baseline_rss_mb": baseline,
        "stopped_at_ceiling": False,
    }


def worker_stock(args: argparse.Namespace) -> dict[str, Any]:
    import psutil
    from airflow.providers.http.operators.http import HttpOperator

    me = psutil.Process()
    state = {"page": 1, "stopped": False}

    def next_page(response: Any) -> dict[str, Any] | None:
        # The documented pattern: read the paging envelope, ask for the next page.
        paging = response.json()["paging"]
        if paging["page"] * paging["page_size"] >= paging["total_count"]:
            return None
        if me.memory_info().rss / 2**20 > args.ceiling_mb:
            state["stopped"] = True
            return None
        state["page"] = paging["page"] + 1
        return {"endpoint": f"{ENDPOINT.lstrip('/')}?page={state['page']}&page_size={PAGE_SIZE}"}

    def all_rows(responses: list[Any]) -> int:
        rows = [row for response in responses for row in response.json()["conversions"]]
        return len(rows)

    operator = HttpOperator(
        task_id="stock_pull",
        http_conn_id="bench_http",
        method="POST",
        endpoint=f"{ENDPOINT.lstrip('/')}?page=1&page_size={PAGE_SIZE}",
        data=json.dumps(_body(args)),
        headers={"Content-Type": "application/json"},
        pagination_function=next_page,
        response_filter=all_rows,
    )
    baseline = peak_rss_mb()
    started, cpu_started = time.perf_counter(), cpu_self_s()
    rows = operator.execute(context={})
    elapsed = time.perf_counter() - started
    return {
        "rows": rows,
        "pages": state["page"],
        "retries": 0,
        "elapsed_s": elapsed,
        "client_cpu_s": cpu_self_s() - cpu_started,
        "baseline_rss_mb": baseline,
        "stopped_at_ceiling": state["stopped"],
    }


def worker_plain(args: argparse.Namespace) -> dict[str, Any]:
    import requests

    session = requests.Session()
    session.headers["X-Svc-Api-Key"] = os.environ["BENCH_KEY"]
    baseline = peak_rss_mb()
    started, cpu_started = time.perf_counter(), cpu_self_s()
    rows, page, total = 0, 1, None
    while total is None or (page - 1) * PAGE_SIZE < total:
        response = session.post(
            args.base_url + ENDPOINT,
            params={"page": page, "page_size": PAGE_SIZE},
            json=_body(args),
            timeout=120,
        )
        response.raise_for_status()
        doc = response.json()
        rows += len(doc["conversions"])
        total = doc["paging"]["total_count"]
        page += 1
    elapsed = time.perf_counter() - started
    return {
        "rows": rows,
        "pages": page - 1,
        "retries": 0,
        "elapsed_s": elapsed,
        "client_cpu_s": cpu_self_s() - cpu_started,
        "baseline_rss_mb": baseline,
        "stopped_at_ceiling": False,
    }


WORKERS = {"hook": worker_hook, "stock": worker_stock, "plain": worker_plain}


# --------------------------------------------------------------------------- driver
def _run_contender(
    name: str, sandbox: Any, window: tuple[str, str], args: argparse.Namespace, env: dict[str, str]
) -> dict[str, Any]:
    cpu_before = cpu_tree_s(sandbox.pid)
    command = [
        sys.executable,
        __file__,
        "--worker",
        name,
        "--base-url",
        sandbox.base_url,
        "--from-date",
        window[0],
        "--to-date",
        window[1],
        "--concurrency",
        str(args.concurrency),
        "--ceiling-mb",
        str(args.ceiling_mb),
    ]
    result = run_worker(name, command, env)
    sandbox_cpu = cpu_tree_s(sandbox.pid) - cpu_before
    result.update(
        load_avg_1m=os.getloadavg()[0],
        contender=name,
        rows_per_s=result["rows"] / result["elapsed_s"] if result["elapsed_s"] else 0.0,
        sandbox_cpu_s=sandbox_cpu,
        sandbox_cpu_ms_per_page=1000 * sandbox_cpu / max(1, result["pages"]),
    )
    return result


def _window_for(sandbox: Any, first: str, last: str, rows: int) -> tuple[str, str, int]:
    """The shortest window from ``first`` holding at least ``rows`` conversions."""
    day = dt.date.fromisoformat(first)
    end = dt.date.fromisoformat(last)
    while True:
        count = sandbox.truth(first, day.isoformat(), timezone_id=67)["conversions"]
        if count >= rows or day >= end:
            return first, day.isoformat(), count
        day += dt.timedelta(days=1)


def drive(args: argparse.Namespace) -> None:
    from affiliate_network_sandbox.testing import clock_after_data, start_sandbox

    sizes = [int(s) for s in args.rows]
    per_day = args.per_day
    days = max(1, math.ceil(max(sizes) / per_day))
    print(f"starting sandbox: {days} days x ~{per_day:,} conversions/day ...", flush=True)
    # Clock after the data: every day complete, the same rows whatever the time of day.
    end = dt.datetime.now(dt.UTC).date()
    sandbox = start_sandbox(
        seed=42,
        days=days,
        conversions_per_day=per_day,
        end_date=end,
        clock=clock_after_data(end),
    )
    try:
        sandbox.set_faults(latency_ms=args.latency_ms)
        catalog = sandbox.catalog()
        home = tempfile.mkdtemp(prefix="bench-airflow-")
        env = {
            **os.environ,
            "AIRFLOW_HOME": home,
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            "BENCH_KEY": sandbox.keys["network"],
            "AIRFLOW_CONN_BENCH_NETWORK": json.dumps(
                {
                    "conn_type": "affiliate_network",
                    "host": sandbox.base_url,
                    "password": sandbox.keys["network"],
                    "extra": {"portal": "network"},
                }
            ),
            # The stock HTTP connection: the key as an extra, which HttpHook sends as a header.
            "AIRFLOW_CONN_BENCH_HTTP": json.dumps(
                {
                    "conn_type": "http",
                    "host": sandbox.base_url,
                    "extra": {"X-Svc-Api-Key": sandbox.keys["network"]},
                }
            ),
        }
        results = []
        for size in sizes:
            first, last, count = _window_for(
                sandbox, catalog["first_date"], catalog["last_date"], size
            )
            print(
                f"\n== {count:,} rows ({first}..{last}), latency {args.latency_ms} ms ==",
                flush=True,
            )
            runs = [(name, name, env) for name in args.contenders]
            if args.baseline_plugins and "hook" in args.contenders:
                # The hook of another checkout (its plugins/ first on the path), same sandbox,
                # right before this one's: before/after in one run.
                before = {**env, "PYTHONPATH": args.baseline_plugins}
                runs.insert(0, ("hook", "hook@base", before))
            for name, label, run_env in runs:
                result = _run_contender(name, sandbox, (first, last), args, run_env)
                result.update(
                    contender=label, target_rows=size, window_rows=count, window=[first, last]
                )
                results.append(result)
                stopped = "  (stopped at ceiling)" if result["stopped_at_ceiling"] else ""
                asked = f", {result['requests']:,} requests" if "requests" in result else ""
                print(
                    f"  {label:9s} {result['rows']:>9,} rows in {result['elapsed_s']:7.1f}s = "
                    f"{result['rows_per_s']:>8,.0f} rows/s{asked}, "
                    f"peak RSS {result['peak_rss_mb']:6.0f} MB{stopped}, "
                    f"load {result['load_avg_1m']:.1f}",
                    flush=True,
                )
    finally:
        sandbox.stop()
    _report(results, args)


def _report(results: list[dict[str, Any]], args: argparse.Namespace) -> None:
    header = (
        "| rows asked | contender | rows pulled | seconds | rows/s | vs stock | peak RSS MB "
        "| client CPU ms/page | sandbox CPU ms/page | load avg | note |"
    )
    lines = [header, "|" + "---|" * 11]
    for result in results:
        stock = next(
            (
                r
                for r in results
                if r["contender"] == "stock" and r["target_rows"] == result["target_rows"]
            ),
            None,
        )
        ratio = result["rows_per_s"] / stock["rows_per_s"] if stock and stock["rows_per_s"] else 0
        note = (
            f"stopped at {args.ceiling_mb} MB ceiling"
            if result["stopped_at_ceiling"]
            else (f"concurrency {args.concurrency}" if result["contender"] == "hook" else "")
        )
        lines.append(
            f"| {result['window_rows']:,} | {result['contender']} | {result['rows']:,} "
            f"| {result['elapsed_s']:.1f} | {result['rows_per_s']:,.0f} | {ratio:.1f}x "
            f"| {result['peak_rss_mb']:.0f} "
            f"| {1000 * result['client_cpu_s'] / max(1, result['pages']):.0f} "
            f"| {result['sandbox_cpu_ms_per_page']:.0f} | {result['load_avg_1m']:.1f} | {note} |"
        )
    table = "\n".join(lines)
    print("\n" + table)
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    out = RESULTS / f"pull-{stamp}.json"
    out.write_text(
        json.dumps(
            {
                "command": " ".join([Path(sys.executable).name, *sys.argv]),
                "latency_ms": args.latency_ms,
                "page_size": PAGE_SIZE,
                "concurrency": args.concurrency,
                "ceiling_mb": args.ceiling_mb,
                "cpus": os.cpu_count(),
                "results": results,
                "table_markdown": table,
            },
            indent=2,
        )
    )
    print(f"\nwritten {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", nargs="+", default=["100000", "1000000"])
    parser.add_argument("--quick", action="store_true", help="20k and 100k rows")
    parser.add_argument("--per-day", type=int, default=100_000, help="sandbox conversions per day")
    parser.add_argument("--latency-ms", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=8, help="hook workers (hook default: 4)")
    parser.add_argument("--ceiling-mb", type=int, default=1024, help="stock way's memory ceiling")
    parser.add_argument("--contenders", nargs="+", default=list(CONTENDERS), choices=CONTENDERS)
    parser.add_argument(
        "--baseline-plugins",
        help="a plugins/ directory of another checkout: its hook runs too, as hook@base",
    )
    parser.add_argument("--worker", choices=CONTENDERS, help=argparse.SUPPRESS)
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    parser.add_argument("--from-date", help=argparse.SUPPRESS)
    parser.add_argument("--to-date", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        result = WORKERS[args.worker](args)
        result["peak_rss_mb"] = peak_rss_mb()
        print(json.dumps(result))
        return
    if args.quick:
        args.rows = ["20000", "100000"]
        args.per_day = 20_000
    drive(args)


if __name__ == "__main__":
    main()
