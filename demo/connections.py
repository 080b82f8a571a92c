"""Connections that point the project's DAGs at a running sandbox (demo, UI, e2e).

As records for the metadata DB (the demo stores them there, so the UI lists them and Test works)
or as ``AIRFLOW_CONN_<ID>`` environment variables (JSON form, the way a deployment sets
connections without the metadata DB; the e2e stage uses them). Keys come from the sandbox
itself: none is committed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

NETWORK_CONN_ID = "affiliate_network_default"


def _conn(host: str, key: str, portal: str) -> dict[str, Any]:
    return {
        "conn_type": "affiliate_network",
        "host": host,
        "password": key,
        "extra": {"portal": portal},
    }


def sandbox_connection_records(sandbox: Any, include_dir: Path) -> dict[str, dict[str, Any]]:
    """Connection id -> fields, for the network and each affiliate listed in ``reports.yaml``.

    :param sandbox: a running sandbox (``affiliate_network_sandbox.testing.RunningSandbox``).
    :param include_dir: folder holding ``reports.yaml``.
    """
    records = {NETWORK_CONN_ID: _conn(sandbox.base_url, sandbox.keys["network"], "network")}
    reports = yaml.safe_load((include_dir / "reports.yaml").read_text()) or {}
    affiliate_keys: dict[str, str] = sandbox.keys.get("affiliate", {})
    for entry in (reports.get("affiliate_reports") or {}).get("affiliates", []):
        key = affiliate_keys.get(str(entry["affiliate_id"]))
        if key is None:
            raise KeyError(
                f"{include_dir / 'reports.yaml'}: affiliate_id {entry['affiliate_id']} has no "
                f"key in the sandbox (known: {sorted(affiliate_keys)})"
            )
        records[str(entry["conn_id"])] = _conn(sandbox.base_url, key, "affiliate")
    return records


def sandbox_connections(sandbox: Any, include_dir: Path) -> dict[str, str]:
    """The same connections as ``AIRFLOW_CONN_<ID>`` environment variables (JSON form)."""
    return {
        f"AIRFLOW_CONN_{conn_id.upper()}": json.dumps(fields)
        for conn_id, fields in sandbox_connection_records(sandbox, include_dir).items()
    }


def store_connections(records: dict[str, dict[str, Any]]) -> list[str]:
    """Create or replace these connections in the metadata DB (idempotent), so the UI lists them
    and its Test button works. Returns the connection ids written."""
    from airflow.models.connection import Connection
    from airflow.utils.session import create_session

    with create_session() as session:
        for conn_id, fields in records.items():
            session.query(Connection).filter(Connection.conn_id == conn_id).delete()
            session.add(
                Connection(
                    conn_id=conn_id,
                    conn_type=fields["conn_type"],
                    host=fields["host"],
                    password=fields["password"],
                    extra=json.dumps(fields["extra"]),
                )
            )
    return sorted(records)
