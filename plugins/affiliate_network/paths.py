"""Where the package finds its YAML config and where it writes outputs.

Both are settings, not constants: DAGs run from a checkout, from docker-compose mounts
(``/opt/airflow/include``) or from an installed wheel, and outputs may live on ``s3://``.
"""

from __future__ import annotations

import os
from pathlib import Path

#: Environment variable naming the folder of YAML config (rules, desired state, reports).
INCLUDE_DIR_ENV = "AFFILIATE_NETWORK_INCLUDE_DIR"
#: Environment variable / Airflow Variable naming the output base (local path or URL).
DATA_BASE_ENV = "AFFILIATE_NETWORK_DATA_BASE"
DATA_BASE_VARIABLE = "affiliate_network_data_base"

# plugins/affiliate_network/paths.py -> project root in a checkout.
PROJECT_ROOT = Path(__file__).resolve().parents[2]


def include_dir() -> Path:
    """Folder holding ``onhold_rules.yaml``, ``offer_state.yaml``, ``reports.yaml``."""
    return Path(os.environ.get(INCLUDE_DIR_ENV) or PROJECT_ROOT / "include")


def default_data_base() -> str:
    """Output base when no Airflow Variable is set: env, else ``<project>/data``."""
    return os.environ.get(DATA_BASE_ENV) or str(PROJECT_ROOT / "data")
