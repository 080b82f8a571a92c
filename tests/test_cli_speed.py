"""The command lines answer ``--help`` and ``validate`` without importing Airflow.

Importing Airflow takes seconds; a command importing it (through the errors module, say) would
make every ``--help`` pay for it. Checked on what a fresh interpreter has imported
(``sys.modules``), never on a timing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from demo import SANDBOX_OFFER_STATE

PROJECT_ROOT = Path(__file__).resolve().parents[1]
INCLUDE = PROJECT_ROOT / "include"
BIN = Path(sys.executable).parent

#: Not needed to print help or to validate a file; each costs from 0.3 s to seconds to import.
HEAVY = ("airflow", "pyarrow", "sqlalchemy", "fastapi", "pandas", "requests")
#: Validation needs pydantic (the rules and desired-state models); help needs nothing of it.
HEAVY_FOR_HELP = (*HEAVY, "pydantic")

# Imports a module in a fresh interpreter, runs its ``main`` when given arguments, then
# reports the exit code and which heavy packages got imported (last line of stderr).
PROBE = """
import json, sys
from importlib import import_module
heavy, module, argv = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3:]
code = None
try:
    loaded = import_module(module)
    if argv:
        code = loaded.main(argv)
except SystemExit as done:
    code = done.code
imported = sorted({name.split(".")[0] for name in sys.modules} & set(heavy))
print(json.dumps({"code": code, "heavy": imported}), file=sys.stderr)
"""


def probe(module: str, *argv: str, heavy: tuple[str, ...] = HEAVY) -> dict:
    """Exit code and ``heavy`` imports of ``module``'s ``main(argv)`` in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(heavy), module, *argv],
        capture_output=True, text=True, timeout=120, check=False, env=os.environ.copy(),
    )  # fmt: skip
    return json.loads(done.stderr.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "module",
    ["affiliate_network.rules.cli", "affiliate_network.backtest.cli", "affiliate_network.sync.cli"],
)
def test_help_imports_no_airflow(module: str) -> None:
    assert probe(module, "--help", heavy=HEAVY_FOR_HELP) == {"code": 0, "heavy": []}


@pytest.mark.parametrize(
    ("module", "argv"),
    [
        ("affiliate_network.rules.cli", ["validate", str(INCLUDE / "onhold_rules.yaml")]),
        ("affiliate_network.rules.cli", ["fields"]),
        ("affiliate_network.backtest.cli", ["validate", str(INCLUDE / "onhold_rules.yaml")]),
        ("affiliate_network.sync.cli", ["validate", str(SANDBOX_OFFER_STATE)]),
    ],
)
def test_validate_imports_no_airflow(module: str, argv: list[str]) -> None:
    assert probe(module, *argv) == {"code": 0, "heavy": []}


def test_the_errors_module_imports_no_airflow() -> None:
    assert probe("affiliate_network.exceptions", heavy=HEAVY_FOR_HELP) == {
        "code": None,
        "heavy": [],
    }


@pytest.mark.parametrize("script", ["affiliate-network-rules", "affiliate-network-sync"])
def test_installed_scripts_print_help_and_exit_0(script: str) -> None:
    done = subprocess.run(
        [str(BIN / script), "--help"], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert f"usage: {script}" in done.stdout


def test_python_m_rules_prints_help() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "affiliate_network.rules", "--help"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "usage: affiliate-network-rules" in done.stdout


def test_plan_on_a_local_ledger_imports_no_airflow(tmp_path: Path) -> None:
    # A local ledger is a plain file; only an object-store URL needs Airflow's ObjectStoragePath.
    ledger = tmp_path / "ledger.json"
    argv = ["plan", str(SANDBOX_OFFER_STATE), "--ledger", str(ledger)]
    assert probe("affiliate_network.sync.cli", *argv) == {"code": 0, "heavy": []}
