"""reports.affiliate called directly, from a plain script's point of view: a hook on the sandbox.

No operator and no task context: fetch the affiliate's entity table for a window, then publish
it as one partition.
"""

from __future__ import annotations

import datetime as dt
import logging

from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
from affiliate_network.partitions.manifest import read_manifest
from affiliate_network.partitions.read import read_partition
from affiliate_network.reports.affiliate import (
    EntityTablePull,
    fetch_entity_table,
    write_affiliate_report,
)

COLUMNS = ["offer", "country", "date"]


def test_fetch_and_write_one_affiliate_report_without_airflow(
    sandbox, make_connection, tmp_path
) -> None:
    aff = sorted(sandbox.keys["affiliate"])[0]
    conn = make_connection(
        f"afn_reports_aff_{aff}",
        host=sandbox.base_url,
        key=sandbox.keys["affiliate"][aff],
        portal="affiliate",
    )
    last = dt.date.fromisoformat(sandbox.catalog()["last_date"])
    start, end = last - dt.timedelta(days=2), last - dt.timedelta(days=1)
    hook = AffiliateNetworkHook(conn, base_delay=0.01, max_delay=0.05, jitter=0.0)
    pull = EntityTablePull(
        affiliate_id=aff,
        start=start,
        end=end,
        columns=COLUMNS,
        timezone_id=67,
        timezone="America/New_York",
        currency_id="USD",
        conn_id=conn,
    )
    try:
        pieces = fetch_entity_table(hook, pull, logging.getLogger("test"))
        direct = hook.affiliate_entity_table(
            from_date=start, to_date=end, columns=COLUMNS, timezone_id=67, currency_id="USD"
        )
    finally:
        hook.close()
    assert [(a, b) for a, b, _ in pieces] == [(start, end)]  # well under the row cap
    key, result = write_affiliate_report(
        tmp_path, pull, pieces, dataset="affiliate_reports", format="parquet"
    )
    assert key == f"affiliate={aff}/date={start}_{end}"
    part = tmp_path / "affiliate_reports" / f"affiliate={aff}" / f"date={start}_{end}"
    assert result.path == str(part)
    table = read_partition(part)
    assert table.num_rows == result.rows == len(direct) > 0
    assert set(table.column("report_from").to_pylist()) == {start.isoformat()}
    assert set(table.column("report_to").to_pylist()) == {end.isoformat()}
    manifest = read_manifest(part)
    assert manifest.stats["splits"] == 0
    assert manifest.request == pull.record()
    assert manifest.request["from"] == start.isoformat()
    assert manifest.request["conn_id"] == conn
    assert sandbox.keys["affiliate"][aff] not in repr(manifest)
