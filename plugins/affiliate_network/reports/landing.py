"""Landing one day of the conversion report as a partition (raw pages, never Python dicts).

Runnable without Airflow's task context: give it a hook, an output base and the request.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from affiliate_network.hooks._memory import prefer_system_arrow_pool
from affiliate_network.reports.schema import conversion_schema
from affiliate_network.reports.storage import DEFAULT_ROW_GROUP_ROWS, PartitionWriter

if TYPE_CHECKING:
    from affiliate_network.hooks._paging import PagedIterator, PullStats
    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
    from affiliate_network.tasklog import TaskLog


def land_conversion_day(
    hook: AffiliateNetworkHook,
    base: str,
    day: dt.date,
    *,
    request: dict[str, Any],
    dataset: str,
    format: str,
    page_size: int | None,
    row_group_rows: int | None,
    consistency_retries: int,
    filters: Any,
    search_terms: Any,
    log: TaskLog,
) -> dict[str, Any]:
    """Pull ``day`` and publish it atomically as ``<base>/<dataset>/date=<day>/``.

    A pull whose unique rows disagree with ``total_count`` (the result set moved while paging)
    is pulled again up to ``consistency_retries`` times before it is landed with a warning.

    :param request: the request parameters, recorded in the manifest (no credentials).
    :returns: a small summary (path, rows, pages, duplicates dropped, checksum).
    """
    prefer_system_arrow_pool()  # a no-op after the operator's call (pyarrow is loaded by now)
    attempt = 0
    while True:
        pull = _pull(hook, request, filters, search_terms, page_size)
        with (
            pull,
            PartitionWriter(
                base,
                dataset,
                {"date": day.isoformat()},
                conversion_schema(),
                format=format,
                row_group_rows=row_group_rows or DEFAULT_ROW_GROUP_ROWS,
            ) as writer,
        ):
            writer.write_pages(pull)
            st = pull.stats
            consistent = st.total_count is None or writer.rows == st.total_count
            if not consistent and attempt < consistency_retries:
                # The result set moved while paging (duplicates imply missed rows): re-pull.
                attempt += 1
                log.warning(
                    "%s: %d unique rows but total_count %s (%d duplicates); re-pulling "
                    "(attempt %d)",
                    day,
                    writer.rows,
                    st.total_count,
                    writer.duplicates_dropped,
                    attempt + 1,
                )
                continue  # leaving the with-block discards the staged data
            if not consistent:
                log.warning(
                    "%s: landing %d unique rows, total_count said %s; the trailing re-pull "
                    "will converge it",
                    day,
                    writer.rows,
                    st.total_count,
                )
            stats = _pull_stats(st, consistent, attempt + 1)
            result = writer.commit(request=request, stats=stats)
        m = result.manifest
        return {
            "date": day.isoformat(),
            "path": result.path,
            "rows": m.row_count,
            "pages": st.pages,
            "duplicates_dropped": m.duplicates_dropped,
            "checksum": m.content_checksum,
        }


def _pull(
    hook: AffiliateNetworkHook,
    request: dict[str, Any],
    filters: Any,
    search_terms: Any,
    page_size: int | None,
) -> PagedIterator:
    """The day's paged pull, pages unparsed (split by msgspec, landed by Arrow, never as dicts)."""
    return hook.iter_conversions(
        from_date=request["from"],
        to_date=request["to"],
        timezone_id=request["timezone_id"],
        currency_id=request["currency_id"],
        show_conversions=request["show_conversions"],
        show_events=request["show_events"],
        filters=filters,
        search_terms=search_terms,
        page_size=page_size,
        raw_pages=True,
    )


def _pull_stats(st: PullStats, consistent: bool, attempts: int) -> dict[str, Any]:
    """The manifest's ``stats`` of a pull."""
    return {
        "pages": st.pages,
        "rows_received": st.rows,
        "total_count": st.total_count,
        "retries": st.retries,
        "pull_seconds": round(st.elapsed_s, 3),
        "consistent_with_total_count": consistent,
        "pull_attempts": attempts,
    }
