"""A landing never imports pandas (``reports/arrow_values.py`` says why: ~55 MB per task).

pyarrow imports pandas, when installed, the first time ``pa.array``/``pa.scalar`` or a compute
function meets a plain Python value. The check runs in a fresh interpreter, so nothing this
test session imported can hide it; pandas is a dev dependency, so it is installed here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

PROBE = textwrap.dedent(
    """
    import datetime as dt, json, logging, sys
    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
    from affiliate_network.reports.landing import land_conversion_day
    from affiliate_network.reports.pull import ConversionPull
    from affiliate_network.partitions.read import iter_partition_records, read_partition

    day, out, fmt = sys.argv[1], sys.argv[2], sys.argv[3]
    pull = ConversionPull(dt.date.fromisoformat(day), 67, show_events=True)
    hook = AffiliateNetworkHook("affiliate_network_default")
    summary = land_conversion_day(
        hook, out, pull,
        format=fmt, page_size=100, row_group_rows=150, consistency_retries=0,
        log=logging.getLogger("probe"))
    hook.close()
    landed_with_pandas = "pandas" in sys.modules  # before reading back, which may import it
    rows = summary["rows"]
    if fmt == "parquet":
        nulls = read_partition(summary["path"]).column("rel_on_hold_status").null_count
    else:
        held = sum(1 for r in iter_partition_records(summary["path"])
                   if r["relationship"].get("on_hold_snapshots"))
        nulls = rows - held
    print(json.dumps({"rows": rows, "nulls": nulls, "pandas": landed_with_pandas}))
    """
)


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_a_landing_does_not_import_pandas(sandbox, network_conn, tmp_path, fmt) -> None:
    pytest.importorskip("pandas")  # without pandas installed there is nothing to check
    day = sandbox.catalog()["last_date"]
    done = subprocess.run(
        [sys.executable, "-c", PROBE, day, str(tmp_path), fmt],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["rows"] > 150  # several pages and row groups went through the Arrow path
    assert 0 < result["nulls"] < result["rows"]  # records with and without on-hold snapshots
    assert result["pandas"] is False
