"""The demo, run twice in the same checkout: the second run works too, and no warning is
printed (issue 15).

Each demo starts a fresh sandbox on a new port, so the first run's sync ledger describes a
network that no longer exists; it used to stop the second run with "this ledger records what
was applied to http://127.0.0.1:<old port>/v1".
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(900)
def test_the_demo_runs_twice_in_one_checkout(tmp_path) -> None:
    for name in ("dags", "include", "plugins"):
        (tmp_path / name).symlink_to(ROOT / name)
    runs = []
    # The whole demo first (the README's command), then the DAG the second run used to fail in.
    for extra in ([], ["--dags", "affiliate_offer_sync"]):
        proc = subprocess.run(
            [sys.executable, "-m", "affiliate_network_sandbox.demo", *extra],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=800,
            check=False,
        )
        runs.append(proc)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        # No warning reaches the user (it printed InsecureKeyLengthWarning four times).
        warned = [x for x in (proc.stdout + proc.stderr).splitlines() if "Warning" in x]
        assert warned == [], warned[:5]
    assert "previous demo's outputs are now in" in runs[1].stdout
    # The connections live in the metadata DB (the UI lists them), once each after two runs,
    # pointing at the second run's sandbox.
    import sqlite3

    with sqlite3.connect(tmp_path / ".airflow" / "airflow.db") as db:
        rows = db.execute(
            "SELECT conn_id, host FROM connection WHERE conn_id = 'affiliate_network_default'"
        ).fetchall()
    assert len(rows) == 1
    assert rows[0][1] in runs[1].stdout  # "[demo] sandbox: <url> ..."
    assert (tmp_path / "data.previous" / "sync").is_dir()
    assert (tmp_path / "data" / "sync").is_dir()
