"""S3 for the tests: moto's server mode on loopback (a real HTTP S3 endpoint, no AWS).

Registered as a plugin by tests/conftest.py, so any test module asks for ``s3`` by name.

The server is session-scoped on purpose: Airflow caches the filesystem of an
``s3://<conn_id>@...`` path per connection id for the life of the process
(``airflow.sdk.io.store._STORE_CACHE``), so the endpoint first seen for :data:`S3_CONN_ID`
must answer for every later test of the same xdist worker. A server per module (stopped when the
worker moves to another module) left that cache pointing at a closed port.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

BUCKET = "affiliate-reports"
PREFIX = "network"
S3_CONN_ID = "afn_reports_s3"
#: The output base the way the runbook documents it: ``s3://<conn_id>@<bucket>/<prefix>``.
S3_BASE = f"s3://{S3_CONN_ID}@{BUCKET}/{PREFIX}"


@pytest.fixture(scope="session")
def moto_s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One moto S3 server per test process (xdist worker), on a free loopback port.

    Skips when the ``amazon`` extra or moto's server are not installed; stopped by PID at the
    end of the session.
    """
    pytest.importorskip("s3fs", reason="the 'amazon' extra (s3fs) is not installed")
    pytest.importorskip("airflow.providers.amazon", reason="the 'amazon' extra is not installed")
    pytest.importorskip("boto3")
    from tests.e2e.harness import VENV_BIN, MotoS3

    if not (VENV_BIN / "moto_server").exists():
        pytest.skip("moto[server] is not installed (dev dependency)")
    moto = MotoS3(Path(tmp_path_factory.mktemp("moto")), bucket=BUCKET)
    try:
        moto.start()
        yield moto
    finally:
        moto.stop()


@pytest.fixture
def s3(moto_s3: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """An empty bucket and the Airflow connection :data:`S3_CONN_ID` that reaches it.

    :returns: a boto3 S3 client of the server.
    """
    monkeypatch.setenv(f"AIRFLOW_CONN_{S3_CONN_ID.upper()}", moto_s3.connection_json())
    client = moto_s3.client()
    # moto keeps state for the server's lifetime: start each test from an empty bucket.
    with contextlib.suppress(client.exceptions.NoSuchBucket):
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
            for obj in page.get("Contents", []):
                client.delete_object(Bucket=BUCKET, Key=obj["Key"])
        client.delete_bucket(Bucket=BUCKET)
    client.create_bucket(Bucket=BUCKET)
    return client
