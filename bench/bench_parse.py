"""What each DAG file costs the DAG processor on every parse, on top of ``import airflow.sdk``.

Each figure is the median of ``--runs`` fresh interpreters: one imports ``airflow.sdk`` (the
baseline every DAG file pays anyway), then times executing the DAG file. Printed side by side
with the baseline, with the load average (machines differ: compare ratios within one run).

    uv run python bench/bench_parse.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBE = """
import json, runpy, sys, time
t0 = time.perf_counter()
import airflow.sdk
t1 = time.perf_counter()
runpy.run_path(sys.argv[1])
t2 = time.perf_counter()
print(json.dumps({"sdk_ms": (t1 - t0) * 1000, "dag_ms": (t2 - t1) * 1000}))
"""


def measure(dag_file: Path, runs: int) -> dict[str, float]:
    sdk, dag = [], []
    for _ in range(runs):
        out = (
            subprocess.run(
                [sys.executable, "-c", PROBE, str(dag_file)],
                capture_output=True,
                text=True,
                check=True,
                env={**os.environ, "AIRFLOW__LOGGING__LOGGING_LEVEL": "ERROR"},
            )
            .stdout.strip()
            .splitlines()[-1]
        )
        figures = json.loads(out)
        sdk.append(figures["sdk_ms"])
        dag.append(figures["dag_ms"])
    return {"sdk_ms": statistics.median(sdk), "dag_ms": statistics.median(dag)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'DAG file':<34} {'import airflow.sdk':>19} {'DAG file on top':>16} {'ratio':>7}")
    results = {}
    for dag_file in sorted((ROOT / "dags").glob("*.py")):
        r = measure(dag_file, args.runs)
        results[dag_file.name] = r
        print(
            f"{dag_file.name:<34} {r['sdk_ms']:>16.0f} ms {r['dag_ms']:>13.0f} ms "
            f"{r['dag_ms'] / r['sdk_ms']:>7.2f}"
        )
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "parse.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
