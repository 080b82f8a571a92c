"""What each DAG file costs the DAG processor on every parse, on top of ``import airflow.sdk``.

Each figure is the median of ``--runs`` fresh interpreters: one imports ``airflow.sdk`` (the
baseline every DAG file pays anyway), then times executing the DAG file. Printed side by side
with the baseline, with the load average (machines differ: compare ratios within one run), and
the CPU time of the DAG file (``time.process_time``): on a shared, loaded machine the wall time
of a parse swings with the other processes, its CPU time far less.
A second figure per file ("in the processor") first imports what Airflow's DAG processor has
loaded before it parses a file (``airflow.dag_processing.processor``: cron timetables, asset
serialization, trigger machinery), so it is what a parse costs there. Last, the whole ``dags/``
folder through ``DagBag`` (what the DAG processor does), same way.

    uv run python bench/bench_parse.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBE = """
import json, runpy, sys, time
t0 = time.perf_counter()
import airflow.sdk
c1 = time.process_time()
t1 = time.perf_counter()
runpy.run_path(sys.argv[1])
t2 = time.perf_counter()
c2 = time.process_time()
print(json.dumps({"sdk_ms": (t1 - t0) * 1000, "dag_ms": (t2 - t1) * 1000,
                  "dag_cpu_ms": (c2 - c1) * 1000}))
"""
#: The same, after the imports the DAG processor has made before it parses a file (not timed).
PROCESSOR_PROBE = PROBE.replace(
    "c1 = time.process_time()\n",
    "import airflow.dag_processing.processor\nc1 = time.process_time()\n",
    1,
)
#: The same, for the whole folder through DagBag (the DAG processor's loader).
DAGBAG_PROBE = """
import json, sys, time
t0 = time.perf_counter()
import airflow.sdk
t1 = time.perf_counter()
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1])
assert not bag.import_errors, bag.import_errors
t2 = time.perf_counter()
print(json.dumps({"sdk_ms": (t1 - t0) * 1000, "dag_ms": (t2 - t1) * 1000, "dag_cpu_ms": 0.0}))
"""


def measure(dag_file: Path, runs: int, probe: str = PROBE) -> dict[str, float]:
    sdk, dag, cpu = [], [], []
    # A throwaway AIRFLOW_HOME: DagBag must not write to ~/airflow.
    with tempfile.TemporaryDirectory() as home:
        env = {
            **os.environ,
            "AIRFLOW_HOME": os.environ.get("AIRFLOW_HOME", home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "ERROR",
        }
        for _ in range(runs):
            sdk_ms, dag_ms, cpu_ms = _probe(probe, dag_file, env)
            sdk.append(sdk_ms)
            dag.append(dag_ms)
            cpu.append(cpu_ms)
    return {
        "sdk_ms": statistics.median(sdk),
        "dag_ms": statistics.median(dag),
        "dag_cpu_ms": statistics.median(cpu),
    }


def _probe(probe: str, target: Path, env: dict[str, str]) -> tuple[float, float, float]:
    """One fresh interpreter: (``import airflow.sdk`` ms, target on top ms, its CPU ms)."""
    out = (
        subprocess.run(
            [sys.executable, "-c", probe, str(target)],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    figures = json.loads(out)
    return figures["sdk_ms"], figures["dag_ms"], figures["dag_cpu_ms"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(
        f"{'DAG file':<34} {'import airflow.sdk':>19} {'DAG file on top':>16} {'its CPU':>8} "
        f"{'ratio':>7} {'in the processor':>17}"
    )
    results = {}
    for dag_file in sorted((ROOT / "dags").glob("*.py")):
        r = measure(dag_file, args.runs)
        r["processor_dag_ms"] = measure(dag_file, args.runs, PROCESSOR_PROBE)["dag_ms"]
        results[dag_file.name] = r
        print(
            f"{dag_file.name:<34} {r['sdk_ms']:>16.0f} ms {r['dag_ms']:>13.0f} ms "
            f"{r['dag_cpu_ms']:>5.0f} ms {r['dag_ms'] / r['sdk_ms']:>7.2f} "
            f"{r['processor_dag_ms']:>14.0f} ms"
        )
    r = measure(ROOT / "dags", args.runs, DAGBAG_PROBE)
    results["dags/ (DagBag)"] = r
    print(
        f"{'dags/ (DagBag)':<34} {r['sdk_ms']:>16.0f} ms {r['dag_ms']:>13.0f} ms "
        f"{r['dag_ms'] / r['sdk_ms']:>7.2f}"
    )
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "parse.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
