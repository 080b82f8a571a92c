"""Connections that point the project's DAGs at a running sandbox (demo, UI, e2e).

Returned as ``AIRFLOW_CONN_<ID>`` environment variables (JSON form), the way a deployment sets
connections without the metadata DB. Keys come from the sandbox itself: none is committed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

NETWORK_CONN_ID = "affiliate_network_default"


def _conn(host: str, key: str, portal: str) -> str:
    return json.dumps(
        {
            "conn_type": "affiliate_network",
            "host": host,
            "password": key,
            "extra": {"portal": portal},
        }
    )


def sandbox_connections(sandbox: Any, include_dir: Path) -> dict[str, str]:
    """Env vars for the network connection and each affiliate listed in ``reports.yaml``.

    :param sandbox: a running sandbox (``affiliate_network.sandbox.testing.RunningSandbox``).
    :param include_dir: folder holding ``reports.yaml``.
    """
    env = {
        f"AIRFLOW_CONN_{NETWORK_CONN_ID.upper()}": _conn(
            sandbox.base_url, sandbox.keys["network"], "network"
        )
    }
    reports = yaml.safe_load((include_dir / "reports.yaml").read_text()) or {}
    affiliate_keys: dict[str, str] = sandbox.keys.get("affiliate", {})
    for entry in (reports.get("affiliate_reports") or {}).get("affiliates", []):
        key = affiliate_keys.get(str(entry["affiliate_id"]))
        if key is None:
            raise KeyError(
                f"{include_dir / 'reports.yaml'}: affiliate_id {entry['affiliate_id']} has no "
                f"key in the sandbox (known: {sorted(affiliate_keys)})"
            )
        env[f"AIRFLOW_CONN_{entry['conn_id'].upper()}"] = _conn(sandbox.base_url, key, "affiliate")
    return env
