"""Benchmark: the network page's server time for 30 landed days, beside the page before issue 45.

One command, figures side by side::

    uv run python bench/network_page.py                 # 30 days of 1,000,000 rows
    uv run python bench/network_page.py --rows 100000   # the quicker run

No network: the days are fabricated Parquet partitions published through partitions/
(:mod:`tests.support.fabricated_days`, one 1,000,000-row table written 30 times, about 0.2 s a
day). Contenders, each reading the same 30 days (``read_page``, what ``/api/overview`` calls):

* ``v2 manifests``: this page; every figure from the manifests' ``summary`` (no row data read).
* ``v1 manifests``: the same days with version 1 manifests (no ``summary``): the partitions
  reader computes each day's figures from its files (linear in rows).
* ``main``: the page as it is on the ``main`` branch (loaded from git): reads every row, and
  its per-row status lookup builds a list of ``num_rows`` Nones per row (quadratic). Run on
  ``--baseline-rows`` rows a day (default 2,000) and ``--baseline-days`` days: at 1,000,000
  rows a day it would take hours.

Reported: rows a day, days, server CPU seconds (this process, median of ``--repeat``), wall
seconds, and CPU per million rows read. Results also go to
``bench/results/network-page-<time>.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _measure import cpu_self_s  # bench/ is sys.path[0]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
LAST = dt.date(2026, 11, 30)


def _fabricate(base: Path, rows: int, days: int, *, v1: bool) -> None:
    sys.path.insert(0, str(ROOT))
    from tests.support.fabricated_days import fabricated_table, publish_day

    table = fabricated_table(rows)
    for n in range(days):
        publish_day(base, LAST - dt.timedelta(days=n), table, with_summary=not v1)


def _main_reader() -> Any:
    """``read_page`` of the main branch's network_data.py (the page before issue 45)."""
    text = subprocess.run(
        ["git", "-C", str(ROOT), "show", "main:plugins/affiliate_network/ui/network_data.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    path = Path(tempfile.mkdtemp()) / "network_data_main.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("network_data_main", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module.read_page


def _time(call: Any, repeat: int) -> tuple[float, float]:
    cpu, wall = [], []
    for _ in range(repeat):
        c0, w0 = cpu_self_s(), time.perf_counter()
        call()
        cpu.append(cpu_self_s() - c0)
        wall.append(time.perf_counter() - w0)
    return statistics.median(cpu), statistics.median(wall)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows a landed day")
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--baseline-rows", type=int, default=2_000)
    parser.add_argument("--baseline-days", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-main", action="store_true", help="skip the main branch's reader")
    args = parser.parse_args()

    from affiliate_network.ui.network_data import read_page

    work = Path(tempfile.mkdtemp(prefix="bench-network-page-"))
    out: list[dict[str, Any]] = []
    try:
        started = time.perf_counter()
        v2, v1 = work / "v2", work / "v1"
        _fabricate(v2, args.rows, args.days, v1=False)
        _fabricate(v1, args.rows, args.days, v1=True)
        print(f"fabricated 2 x {args.days} days of {args.rows:,} rows in "
              f"{time.perf_counter() - started:.1f} s", flush=True)  # fmt: skip
        today = LAST + dt.timedelta(days=1)

        def ours(base: Path) -> Any:
            return lambda: read_page(base, last=LAST, days=args.days, today=today)

        check = read_page(v2, last=LAST, days=args.days, today=today).days
        assert sum(d.get("rows", 0) for d in check) == args.rows * args.days, "rows shown"
        for name, base, repeat in (("v2 manifests", v2, args.repeat), ("v1 manifests", v1, 1)):
            cpu, wall = _time(ours(base), repeat)
            out.append({"contender": name, "rows_a_day": args.rows, "days": args.days,
                        "cpu_s": cpu, "wall_s": wall})  # fmt: skip
        if not args.no_main:
            old = work / "main"
            _fabricate(old, args.baseline_rows, args.baseline_days, v1=True)
            read_main = _main_reader()
            cpu, wall = _time(
                lambda: read_main(old, last=LAST, days=args.baseline_days, sections=("reports",)),
                1,
            )
            out.append({"contender": "main", "rows_a_day": args.baseline_rows,
                        "days": args.baseline_days, "cpu_s": cpu, "wall_s": wall})  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)

    load = os.getloadavg()
    ref = out[0]["cpu_s"] or 1e-9
    print(f"\nload average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {os.cpu_count()} cores")
    print(f"{'contender':<14} {'rows/day':>10} {'days':>5} {'CPU s':>8} {'wall s':>8} "
          f"{'CPU s/M rows':>13} {'vs v2':>9}")  # fmt: skip
    for r in out:
        per_m = r["cpu_s"] / (r["rows_a_day"] * r["days"] / 1e6)
        print(f"{r['contender']:<14} {r['rows_a_day']:>10,} {r['days']:>5} {r['cpu_s']:>8.3f} "
              f"{r['wall_s']:>8.3f} {per_m:>13.4f} {r['cpu_s'] / ref:>8.1f}x")  # fmt: skip
    RESULTS.mkdir(exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")
    (RESULTS / f"network-page-{stamp}.json").write_text(
        json.dumps({"load_average": load, "results": out}, indent=2)
    )
    return 0 if out[0]["cpu_s"] < 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
