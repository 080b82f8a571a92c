"""Run a test in a fresh pytest process.

Tests that host Airflow's API app in-process (``TestClient(create_app("core"))``) pass alone but
got 500 "Database error" from it late in a full session (some state of the long-lived test
process; not reproduced in smaller selections). Each such test runs in its own interpreter,
with its own AIRFLOW_HOME and sandbox, through :func:`isolated`.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

FLAG = "AFN_ISOLATED_TEST"


def inside() -> bool:
    """True in the fresh process running the isolated test."""
    return os.environ.get(FLAG) == "1"


#: Put on the real test: it runs only inside the fresh process.
only_isolated = pytest.mark.skipif(not inside(), reason="runs in a fresh process (see isolated)")


def isolated(nodeid: str, timeout: float = 900) -> None:
    """Run ``nodeid`` (``path::test``) in a fresh pytest process; fail with its output."""
    if inside():
        pytest.skip("this is the inner run")
    proc = subprocess.run(
        # -n 0: one test needs no xdist workers of its own (pyproject's addopts asks for two).
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", nodeid],
        env={**os.environ, FLAG: "1"},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    summary = [line for line in out.splitlines() if line.strip()][-1]
    assert " passed" in summary, out[-2000:]
    assert "skipped" not in summary, out[-2000:]
