"""The affiliate's aggregated report and its 10,000-row cap: split the range until it fits.

Runnable without Airflow's task context: :func:`fetch_entity_table` with a hook of the affiliate
portal, then :func:`write_affiliate_report` to publish what it fetched as one partition.
"""

from __future__ import annotations

import dataclasses
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


@dataclass(frozen=True)
class EntityTablePull:
    """One affiliate's aggregated report over a window, as asked of
    ``POST /affiliates/reporting/entity/table``; :meth:`record` is the manifest's ``request``.

    :param affiliate_id: the affiliate (partition key; the connection's key is its own).
    :param start: first day of the window.
    :param end: last day (inclusive).
    :param columns: the validated columns (``api.report_columns.validate_report_columns``).
    :param timezone_id: the API's timezone id the days are cut in.
    :param timezone: that timezone's IANA name (recorded, never sent).
    :param currency_id: the currency asked for, or ``None`` for the network's default.
    :param filters: the API's ``query.filters``, or ``None``.
    :param conn_id: the Airflow connection (recorded, and named in errors).
    """

    affiliate_id: str
    start: dt.date
    end: dt.date
    columns: Sequence[Any]
    timezone_id: int
    timezone: str
    currency_id: str | None = None
    filters: Sequence[dict[str, Any]] | None = None
    conn_id: str = ""

    def part(self, start: dt.date, end: dt.date) -> EntityTablePull:
        """The same report over ``start..end`` (a split of this window)."""
        return dataclasses.replace(self, start=start, end=end)

    @property
    def who(self) -> str:
        """The affiliate and connection, for errors and budget messages."""
        return f"affiliate {self.affiliate_id} (connection {self.conn_id})"

    def record(self) -> dict[str, Any]:
        """The request parameters recorded in the manifest (never a key)."""
        return {
            "endpoint": "POST /affiliates/reporting/entity/table",
            "from": self.start.isoformat(),
            "to": self.end.isoformat(),
            "columns": list(self.columns),
            "timezone_id": self.timezone_id,
            "timezone": self.timezone,
            "currency_id": self.currency_id,
            "filters": None if self.filters is None else list(self.filters),
            "conn_id": self.conn_id,
        }


def fetch_entity_table(
    hook: AffiliateNetworkHook, pull: EntityTablePull, log: TaskLog
) -> list[Piece]:
    """The entity table of ``pull``'s window, split in halves while it hits the row cap.

    :raises ReportRowLimitError: a single day still hits the cap (nothing is landed).
    :raises GranularQuotaError: the request is a granular query (a column of the guide's list)
        and the network's rolling-hour quota has no room for it; nothing is sent.
    """
    start, end = pull.start, pull.end
    granular = bool(granular_columns([_column_name(c) for c in pull.columns]))
    if granular:
        # Planned, not discovered: refuse before sending, naming the numbers.
        hook.check_granular_budget(1, f"{pull.who}, {start}..{end}")
    try:
        table = hook.affiliate_entity_table(
            from_date=start.isoformat(),
            to_date=end.isoformat(),
            columns=pull.columns,
            timezone_id=pull.timezone_id,
            currency_id=pull.currency_id,
            filters=pull.filters,
        )
        return [(start, end, table)]
    except ReportRowLimitError as err:
        if start == end:
            raise ReportRowLimitError(
                f"{pull.who}: the entity table for the single day {start} still hits the "
                f"10,000-row cap with columns {list(pull.columns)}. Nothing was written. Narrow "
                "the report: drop a high-cardinality column (sub1..sub5, hour, country) or add "
                "filters (offer, country ...) in include/reports.yaml."
            ) from err
    mid = start + dt.timedelta(days=(end - start).days // 2)
    if granular:  # the two halves are two more granular queries (at least)
        hook.check_granular_budget(2, f"{pull.who}, the split of {start}..{end}")
    log.info(
        "%s..%s hit the row cap; splitting into %s..%s and %s..%s",
        start,
        end,
        start,
        mid,
        mid + dt.timedelta(days=1),
        end,
    )
    return fetch_entity_table(hook, pull.part(start, mid), log) + fetch_entity_table(
        hook, pull.part(mid + dt.timedelta(days=1), end), log
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
    pull: EntityTablePull,
    pieces: Sequence[Piece],
    *,
    dataset: str,
    format: str,
) -> tuple[str, PublishResult]:
    """Publish the fetched pieces of one affiliate's report as one partition, atomically.

    Every row carries the ``report_from``/``report_to`` range it aggregates. The partition is
    ``affiliate=<id>/date=<start>`` for one day, ``date=<start>_<end>`` for a longer window.

    :param base: the data base (local path or object-storage URL).
    :param pull: the report fetched (partition key, schema and the manifest's ``request``).
    :param pieces: what :func:`fetch_entity_table` returned for it.
    :param dataset: dataset folder under the base.
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
    start, end, affiliate_id = pull.start, pull.end, pull.affiliate_id
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
        AffiliateReportSchema(pull.columns),
        request=pull.record(),
        format=format,
        stats=stats,
    )
    return f"affiliate={affiliate_id}/date={date_key}", result
