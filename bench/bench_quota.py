"""Benchmark: 1, 3 and 6 processes pulling through one network quota (issue 26).

    uv run python bench/bench_quota.py            # 1, 3, 6 processes; per-process vs shared
    uv run python bench/bench_quota.py --redis    # and the Redis store beside the file store

The sandbox runs in documented mode (one window per network shared by every key, 10 requests in
flight on /networks/reporting/*) with the documented rate, 20 requests/s, over a 3-s window
instead of 30 s (``--window-s``: the rate is what is measured; a 30-s window only makes the
run ten times longer), and ``--latency-ms`` on every request. A fixed number of conversion
report pages (``--pages``) is split among N processes, each an ``AffiliateNetworkHook`` with 4
workers, all started at once. Contenders:

* ``per-process``: ``quota: local``, each hook's own throttle on ``X-RateLimit-Remaining``
  (what the hook did before: it cannot see the other processes).
* ``shared (file)``: the default shared budget, flock'd files on this machine.
* ``shared (redis)``: the same budget in Redis (``--redis``; 127.0.0.1:6379).

Per run: the 429s the sandbox answered (by the rate window / by the concurrency cap), processes
that failed, the makespan and makespan / bound, where bound = requests answered 200 / 20 per s.
Target (issue 26): with 3 and 6 processes, no 429 and makespan within 1.3x of the bound.
Figures go to stdout and to ``bench/results/quota-<time>.json``.

The same runner drives tests/hooks/test_shared_quota.py with smaller numbers.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CONN_ID = "affiliate_network_quota_bench"


def worker(args: argparse.Namespace) -> int:
    """One process: build the hook, say ready, wait for the go file, pull, print the outcome."""
    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook

    hook = AffiliateNetworkHook(
        CONN_ID, concurrency=args.concurrency, base_delay=args.base_delay, max_delay=2.0
    )
    hook.portal  # noqa: B018 - load the connection before the start line
    print("ready", flush=True)
    go = Path(args.go)
    while not go.exists():
        time.sleep(0.005)
    started = time.time()
    out: dict[str, Any] = {"ok": True, "rows": 0}
    try:
        for _ in hook.iter_conversions(
            from_date=args.day, to_date=args.day, timezone_id=67, page_size=args.page_size
        ):
            out["rows"] += 1
    except Exception as exc:  # reported, not raised: the parent counts failed processes
        out.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:300])
    out.update(started=started, ended=time.time(), waited_s=round(hook.budget.waited_s, 3))
    hook.close()
    print(json.dumps(out), flush=True)
    return 0


def run_scenario(
    sandbox: Any,
    *,
    processes: int,
    pages: int,
    extras: dict[str, Any],
    concurrency: int = 4,
    base_delay: float = 1.0,
    day: str | None = None,
    spellings: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Run ``processes`` workers at once, ``pages`` pages in all, with connection ``extras``.

    The sandbox's quota counters are read before and after; the caller sets the quota.
    ``spellings`` gives each worker its own connection (``host`` and extras on top), as when
    several people wrote connections to one network.
    """
    catalog = sandbox.catalog()
    day = day or catalog["last_date"]
    total = sandbox.truth(day, day)["conversions"]
    page_size = max(1, math.ceil(total * processes / pages))
    conn = {
        "conn_type": "affiliate_network",
        "host": sandbox.base_url,
        "password": sandbox.keys["network"],
        "extra": {"portal": "network", **extras},
    }
    envs = []
    for n in range(processes):
        own = dict((spellings or [{}])[n % len(spellings or [{}])])
        host = own.pop("host", conn["host"])
        value = {**conn, "host": host, "extra": {**conn["extra"], **own}}
        envs.append({**os.environ, f"AIRFLOW_CONN_{CONN_ID.upper()}": json.dumps(value)})
    go = Path(tempfile.mkdtemp(prefix="quota-go-")) / "go"
    cmd = [
        sys.executable,
        str(HERE / "bench_quota.py"),
        "worker",
        "--go",
        str(go),
        "--day",
        day,
        "--page-size",
        str(page_size),
        "--concurrency",
        str(concurrency),
        "--base-delay",
        str(base_delay),
    ]
    before = sandbox.admin("GET", "/_sandbox/rate_limit").get("refused", {})
    sandbox.admin("DELETE", "/_sandbox/requests")
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True) for env in envs]
    for p in procs:
        assert p.stdout is not None
        line = p.stdout.readline().strip()
        if line != "ready":
            raise RuntimeError(f"worker did not start: {line!r}")
    go.touch()
    t0 = time.time()
    results = []
    for p in procs:
        out, _ = p.communicate(timeout=300)
        # Its JSON line; a pull that gave up on 429s may log after it (the hook's page threads).
        results.append(json.loads(next(x for x in reversed(out.splitlines()) if x[:1] == "{")))
    after = sandbox.admin("GET", "/_sandbox/rate_limit").get("refused", {})
    counts = sandbox.admin("GET", "/_sandbox/requests/counts")["by_status"]
    refused = {k: after.get(k, 0) - before.get(k, 0) for k in ("rate", "concurrency", "granular")}
    return {
        "processes": processes,
        "ok": sum(1 for r in results if r["ok"]),
        "errors": [r["error"] for r in results if not r["ok"]],
        "rows": sum(r["rows"] for r in results),
        "expected_rows": total * processes,
        "answered_200": counts.get("200", 0),
        "status_429": counts.get("429", 0),
        "refused": refused,
        "makespan_s": max(r["ended"] for r in results) - t0,
        "waited_s": sum(r["waited_s"] for r in results),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=180, help="pages in all per scenario")
    parser.add_argument("--window-s", type=float, default=3.0)
    parser.add_argument("--rate", type=float, default=20.0, help="documented requests/s")
    parser.add_argument("--latency-ms", type=int, default=50)
    parser.add_argument("--processes", default="1,3,6")
    parser.add_argument("--redis", action="store_true", help="also the Redis store")
    args = parser.parse_args()

    from affiliate_network_sandbox.testing import clock_after_data, start_sandbox

    limit = int(args.rate * args.window_s)
    modes: list[tuple[str, dict[str, Any]]] = [("per-process", {"quota": "local"})]
    modes.append(("shared (file)", {}))
    if args.redis:
        modes.append(("shared (redis)", {"quota_redis_url": "redis://127.0.0.1:6379/0"}))
    rows = []
    # The clock just after the data: the day pulled is complete (with the wall clock it is
    # today's, still filling, and a pull that meets an arriving conversion fails as shifted).
    today = dt.datetime.now(dt.UTC).date()
    with start_sandbox(
        seed=42, rate_limit="documented", end_date=today, clock=clock_after_data(today)
    ) as sb:
        for n in [int(x) for x in args.processes.split(",")]:
            for name, extras in modes:
                sb.set_quota(window_s=args.window_s, limits={"network": limit})
                sb.set_faults(latency_ms=args.latency_ms)
                time.sleep(args.window_s)  # the previous run's window is gone
                run_extras = {
                    "rate_window_s": args.window_s,
                    "quota_dir": tempfile.mkdtemp(prefix="quota-bench-"),
                    "quota_network": uuid.uuid4().hex,  # fresh Redis keys per run
                    **extras,
                }
                res = run_scenario(sb, processes=n, pages=args.pages, extras=run_extras)
                bound = res["answered_200"] / args.rate
                res.update(mode=name, bound_s=bound, ratio=res["makespan_s"] / bound)
                rows.append(res)
                print(
                    f"{n} proc  {name:15s} 429s {res['status_429']:4d} "
                    f"(rate {res['refused']['rate']}, concurrency {res['refused']['concurrency']})"
                    f"  failed {n - res['ok']}  makespan {res['makespan_s']:6.2f}s  "
                    f"bound {bound:6.2f}s  ratio {res['ratio']:.2f}",
                    flush=True,
                )
    print(
        "\n| processes | throttle | 429 (rate / concurrency) | failed | makespan | bound | ratio |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['processes']} | {r['mode']} | {r['status_429']} ({r['refused']['rate']} / "
            f"{r['refused']['concurrency']}) | {r['processes'] - r['ok']} | "
            f"{r['makespan_s']:.2f} s | {r['bound_s']:.2f} s | {r['ratio']:.2f} |"
        )
    with open("/proc/loadavg") as fh:
        load = fh.read().strip()
    print(f"load average: {load}")
    out_dir = HERE / "results"
    out_dir.mkdir(exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")
    (out_dir / f"quota-{stamp}.json").write_text(
        json.dumps({"args": vars(args), "runs": rows, "loadavg": load}, indent=2)
    )
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        p = argparse.ArgumentParser()
        p.add_argument("worker")
        p.add_argument("--go", required=True)
        p.add_argument("--day", required=True)
        p.add_argument("--page-size", type=int, required=True)
        p.add_argument("--concurrency", type=int, default=4)
        p.add_argument("--base-delay", type=float, default=1.0)
        sys.exit(worker(p.parse_args()))
    sys.exit(main())
