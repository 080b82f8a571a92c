"""The affiliate's aggregated report and its 10,000-row cap: split the range until it fits.

Runnable without Airflow's task context: :func:`fetch_entity_table` with a hook of the affiliate
portal, then :func:`write_affiliate_report` to publish what it fetched as one partition.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from affiliate_network.api.report_columns import granular_columns
from affiliate_network.exceptions import ReportRowLimitError

if TYPE_CHECKING:
    import os

    from airflow.sdk import ObjectStoragePath

    from affiliate_network.helpers.tasklog import TaskLog
    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
    from affiliate_network.partitions.write import PublishResult

#: (first day, last day, rows) of each sub-request that fitted under the cap.
Piece = tuple[dt.date, dt.date, list[dict[str, Any]]]


def fetch_entity_table(
    hook: AffiliateNetworkHook,
    start: dt.date,
    end: dt.date,
    *,
    columns: Sequence[Any],
    timezone_id: int,
    currency_id: str | None,
    filters: Sequence[dict[str, Any]] | None,
    who: str,
    log: TaskLog,
) -> list[Piece]:
    """The entity table for ``start..end``, split in halves while it hits the row cap.

    :param who: names the affiliate and connection in the error of a single day over the cap.
    :raises ReportRowLimitError: a single day still hits the cap (nothing is landed).
    :raises GranularQuotaError: the request is a granular query (a column of the guide's list)
        and the network's rolling-hour quota has no room for it; nothing is sent.
    """
    granular = bool(granular_columns([_column_name(c) for c in columns]))
    if granular:
        # Planned, not discovered: refuse before sending, naming the numbers.
        hook.check_granular_budget(1, f"{who}, {start}..{end}")
    try:
        table = hook.affiliate_entity_table(
            from_date=start.isoformat(),
            to_date=end.isoformat(),
            columns=columns,
            timezone_id=timezone_id,
            currency_id=currency_id,
            filters=filters,
        )
        return [(start, end, table)]
    except ReportRowLimitError as err:
        if start == end:
            raise ReportRowLimitError(
                f"{who}: the entity table for the single day {start} still hits the 10,000-row "
                f"cap with columns {list(columns)}. Nothing was written. Narrow the report: drop "
                "a high-cardinality column (sub1..sub5, hour, country) or add filters (offer, "
                "country ...) in include/reports.yaml."
            ) from err
    mid = start + dt.timedelta(days=(end - start).days // 2)
    if granular:  # the two halves are two more granular queries (at least)
        hook.check_granular_budget(2, f"{who}, the split of {start}..{end}")
    log.info(
        "%s..%s hit the row cap; splitting into %s..%s and %s..%s",
        start,
        end,
        start,
        mid,
        mid + dt.timedelta(days=1),
        end,
    )
    kwargs: dict[str, Any] = {
        "columns": columns,
        "timezone_id": timezone_id,
        "currency_id": currency_id,
        "filters": filters,
        "who": who,
        "log": log,
    }
    return fetch_entity_table(hook, start, mid, **kwargs) + fetch_entity_table(
        hook, mid + dt.timedelta(days=1), end, **kwargs
    )


def _column_name(column: Any) -> str:
    return str(column.get("column")) if isinstance(column, dict) else str(column)


@dataclass(frozen=True)
class BackfillEstimate:
    """How the granular quota bounds a backfill of the affiliate reports.

    :param days: days backfilled (one mapped task per affiliate per day).
    :param queries: granular queries at least (one per granular affiliate per day; every
        10,000-row split adds two more).
    :param budget: granular queries per rolling window.
    :param window_s: that window (one hour documented).
    :param min_duration_s: the quota's floor on the backfill's duration.
    """

    days: int
    queries: int
    budget: int
    window_s: float
    min_duration_s: float

    def __str__(self) -> str:
        if self.queries == 0:
            return f"{self.days}-day backfill: no granular query (the quota does not bound it)"
        hours = self.min_duration_s / 3600
        return (
            f"{self.days}-day backfill: at least {self.queries:,} granular queries against "
            f"{self.budget:,} per rolling {self.window_s / 3600:g} h: "
            + (
                "fits in one window (the quota does not slow it)"
                if self.queries <= self.budget
                else f"takes at least {hours:.1f} h under the granular quota"
            )
        )


def estimate_granular_backfill(
    days: int,
    targets: Sequence[dict[str, Any]] | None = None,
    *,
    budget: int = 1000,
    window_s: float = 3600.0,
) -> BackfillEstimate:
    """Say up front how long the granular quota makes a backfill of every affiliate report.

    :param days: days to backfill (the daily DAG runs one task per affiliate per day).
    :param targets: the report entries (default: ``include/reports.yaml``).
    :param budget: granular queries per rolling window (documented: 1,000 per hour).
    :param window_s: the rolling window in seconds.
    """
    if targets is None:
        from affiliate_network.settings.models import load_affiliate_report_targets

        targets = load_affiliate_report_targets()
    granular = sum(1 for t in targets if granular_columns([_column_name(c) for c in t["columns"]]))
    queries = granular * days
    # The n-th window of queries can start only when the first has rolled out of it.
    windows = math.ceil(queries / budget) if budget else 0
    return BackfillEstimate(days, queries, budget, window_s, max(0, windows - 1) * window_s)


def write_affiliate_report(
    base: ObjectStoragePath | str | os.PathLike[str],
    *,
    dataset: str,
    affiliate_id: str,
    start: dt.date,
    end: dt.date,
    pieces: Sequence[Piece],
    columns: Sequence[Any],
    request: dict[str, Any],
    format: str,
) -> tuple[str, PublishResult]:
    """Publish the fetched pieces of one affiliate's report as one partition, atomically.

    Every row carries the ``report_from``/``report_to`` range it aggregates. The partition is
    ``affiliate=<id>/date=<start>`` for one day, ``date=<start>_<end>`` for a longer window.

    :param base: the data base (local path or object-storage URL).
    :param dataset: dataset folder under the base.
    :param affiliate_id: the affiliate's id (partition key).
    :param start: first day of the window.
    :param end: last day of the window (inclusive).
    :param pieces: what :func:`fetch_entity_table` returned.
    :param columns: the report's validated columns (the schema follows them).
    :param request: request parameters recorded in the manifest (never a key).
    :param format: ``parquet`` or ``jsonl``.
    :return: the partition key (``affiliate=.../date=...``) and the publish result.
    """
    from affiliate_network.partitions.write import write_partition
    from affiliate_network.reports.schema import AffiliateReportSchema
    from affiliate_network.reports.storage import as_storage_path

    rows = [
        {**row, "report_from": a.isoformat(), "report_to": b.isoformat()}
        for a, b, table in pieces
        for row in table
    ]
    date_key = start.isoformat() if start == end else f"{start}_{end}"
    stats = {
        "requests_landed": [
            {"from": a.isoformat(), "to": b.isoformat(), "rows": len(t)} for a, b, t in pieces
        ],
        "splits": len(pieces) - 1,
    }
    result = write_partition(
        as_storage_path(base),
        dataset,
        {"affiliate": affiliate_id, "date": date_key},
        rows,
        AffiliateReportSchema(columns),
        request=request,
        format=format,
        stats=stats,
    )
    return f"affiliate={affiliate_id}/date={date_key}", result
