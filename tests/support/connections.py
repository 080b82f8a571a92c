"""Airflow connection helpers shared by tests (never import ``tests.conftest``: pytest loads it
as ``conftest``, and a second import as ``tests.conftest`` re-runs its module code, which points
``AIRFLOW_HOME`` and the metadata DB at a new, unmigrated folder for the rest of the session)."""

from __future__ import annotations


def conn_env_name(conn_id: str) -> str:
    """The environment variable an Airflow connection ``conn_id`` is read from."""
    return f"AIRFLOW_CONN_{conn_id.upper()}"
