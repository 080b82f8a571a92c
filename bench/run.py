"""Run every benchmark, one after another, each in its own process.

    uv run python bench/run.py              # all, full size
    uv run python bench/run.py --quick      # all, smoke size where a bench supports it
    uv run python bench/run.py pull rules   # only these

Each benchmark prints its own table, with the peer it compares to side by side, and writes its
figures as JSON under ``bench/results/``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: name -> (script, the arguments that make it a smoke run for --quick)
BENCHES: dict[str, tuple[str, list[str]]] = {
    "sandbox": ("bench_sandbox.py", ["--pages", "10"]),
    "pull": ("bench_pull.py", ["--quick"]),
    "report": ("bench_report.py", ["--rows", "100000"]),
    "rules": ("bench_rules.py", ["--records", "20000"]),
    "review": ("bench_review.py", ["--quick"]),
    "backtest": ("bench_backtest.py", ["--quick"]),
    "parse": ("bench_parse.py", ["--runs", "2"]),
    "quota": ("bench_quota.py", ["--pages", "90", "--processes", "3,6"]),
    "reconcile": ("bench_reconcile.py", ["--rows", "20000", "200000"]),
    "backfill": ("bench_backfill.py", ["--days", "3"]),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"any of: {', '.join(BENCHES)} (default: all)")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    unknown = sorted(set(args.names) - set(BENCHES))
    if unknown:
        parser.error(f"unknown benchmark(s) {unknown}; choose from {list(BENCHES)}")
    failed = []
    for name in args.names or list(BENCHES):
        script, quick_args = BENCHES[name]
        cmd = [sys.executable, str(HERE / script), *(quick_args if args.quick else [])]
        print(f"\n=== {name}: {' '.join(cmd[1:])}", flush=True)
        if subprocess.run(cmd, check=False).returncode != 0:
            failed.append(name)
    if failed:
        print(f"\nfailed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
