"""Sandbox cost per page: CPU to build and serialise one page of full conversion records.

Two measurements, printed side by side:

1. in-process: ``World.conversion_report`` for pages spread over a 1,000,000-conversion day
   (CPU ms per page, rows/s) - the sandbox's own cost, no HTTP;
2. over HTTP: a real sandbox subprocess, ``requests`` client, N pages of 2000; the server's
   CPU time per page is read from the process (psutil) and wall time per page is printed.

Usage: ``uv run python bench/bench_sandbox.py [--pages 40] [--page-size 2000]``
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import time

import orjson
import psutil
import requests

from affiliate_network_sandbox.config import DataConfig
from affiliate_network_sandbox.testing import start_sandbox
from affiliate_network_sandbox.world import World

DAY = dt.date(2026, 5, 1)
PER_DAY = 1_000_000


def in_process(pages: int, size: int) -> dict:
    cfg = DataConfig(
        end_date=DAY, days=1, conversions_per_day=PER_DAY, offers=50, affiliates=40, advertisers=10
    )
    world = World(cfg, "default")
    body = {"from": DAY.isoformat(), "to": DAY.isoformat(), "timezone_id": 67}
    last_page = PER_DAY // size
    world.conversion_report(body, 1, size)  # warm the pair templates
    step = max(1, last_page // pages)
    cpu, nbytes = [], 0
    for page in range(1, last_page + 1, step)[:pages]:
        t = time.process_time()
        raw = world.conversion_report(body, page, size)
        cpu.append(time.process_time() - t)
        nbytes += sum(len(c) for c in raw.chunks)
    med = statistics.median(cpu)
    return {
        "pages": len(cpu),
        "cpu_ms_median": med * 1000,
        "cpu_ms_min": min(cpu) * 1000,
        "rows_per_s": size / med,
        "bytes_per_page": nbytes / len(cpu),
    }


def over_http(pages: int, size: int) -> dict:
    with start_sandbox(
        seed=42,
        end_date=DAY,
        days=1,
        conversions_per_day=PER_DAY,
        offers=50,
        affiliates=40,
        advertisers=10,
    ) as sb:
        proc = psutil.Process(sb.pid)
        key = sb.keys["network"]
        http = requests.Session()
        http.headers["X-Svc-Api-Key"] = key
        body = {"from": DAY.isoformat(), "to": DAY.isoformat(), "timezone_id": 67}
        url = f"{sb.base_url}/networks/reporting/conversions"
        http.post(url, params={"page": 1, "page_size": size}, json=body).raise_for_status()
        c0 = proc.cpu_times()
        t0 = time.perf_counter()
        rows = 0
        parse = 0.0
        for page in range(2, pages + 2):
            resp = http.post(url, params={"page": page, "page_size": size}, json=body)
            resp.raise_for_status()
            tp = time.perf_counter()
            rows += len(orjson.loads(resp.content)["conversions"])
            parse += time.perf_counter() - tp
        wall = time.perf_counter() - t0
        c1 = proc.cpu_times()
        server_cpu = (c1.user - c0.user) + (c1.system - c0.system)
        return {
            "pages": pages,
            "rows": rows,
            "server_cpu_ms_per_page": server_cpu / pages * 1000,
            "wall_ms_per_page": wall / pages * 1000,
            "client_parse_ms_per_page": parse / pages * 1000,
            "rows_per_s_end_to_end": rows / wall,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=40)
    parser.add_argument("--page-size", type=int, default=2000)
    parser.add_argument("--skip-http", action="store_true")
    args = parser.parse_args()
    a = in_process(args.pages, args.page_size)
    print(
        f"in-process  page_size={args.page_size} pages={a['pages']}: "
        f"CPU {a['cpu_ms_median']:.1f} ms/page (min {a['cpu_ms_min']:.1f}), "
        f"{a['rows_per_s']:,.0f} rows/s, {a['bytes_per_page'] / 1e6:.2f} MB/page"
    )
    if not args.skip_http:
        b = over_http(args.pages, args.page_size)
        print(
            f"over HTTP   page_size={args.page_size} pages={b['pages']}: "
            f"server CPU {b['server_cpu_ms_per_page']:.1f} ms/page, "
            f"wall {b['wall_ms_per_page']:.1f} ms/page "
            f"(of which client orjson parse {b['client_parse_ms_per_page']:.1f} ms), "
            f"{b['rows_per_s_end_to_end']:,.0f} rows/s end to end"
        )


if __name__ == "__main__":
    main()
