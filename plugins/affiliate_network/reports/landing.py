"""Landing one day of the conversion report as a partition (raw pages, never Python dicts).

Runnable without Airflow's task context: give it a hook, an output base and the pull.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from affiliate_network.exceptions import PullShiftedError
from affiliate_network.hooks._memory import prefer_system_arrow_pool
from affiliate_network.hooks._paging import SHIFT_RETRIES, SHIFT_WAIT_S, pull_until_still
from affiliate_network.partitions.write import DEFAULT_ROW_GROUP_ROWS, PartitionWriter
from affiliate_network.reports.schema import conversion_schema
from affiliate_network.reports.storage import as_storage_path

if TYPE_CHECKING:
    from affiliate_network.helpers.tasklog import TaskLog
    from affiliate_network.hooks._paging import PullStats
    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
    from affiliate_network.reports.pull import ConversionPull


#: Extra pulls of a day whose pages shifted while it was paged, and the wait between them (one
#: setting with the review's traffic pull: the hook's paging module owns it).
DEFAULT_CONSISTENCY_RETRIES = SHIFT_RETRIES
DEFAULT_CONSISTENCY_WAIT_S = SHIFT_WAIT_S
_LOG = logging.getLogger(__name__)


def land_conversion_day(
    hook: AffiliateNetworkHook,
    base: str,
    pull: ConversionPull,
    *,
    dataset: str = "conversions",
    format: str = "parquet",
    page_size: int | None = None,
    row_group_rows: int | None = None,
    consistency_retries: int = DEFAULT_CONSISTENCY_RETRIES,
    consistency_wait_s: float = DEFAULT_CONSISTENCY_WAIT_S,
    only_if_changed: bool = False,
    run_id: str | None = None,
    log: TaskLog = _LOG,
) -> dict[str, Any]:
    """Pull ``pull.day`` and publish it atomically as ``<base>/<dataset>/date=<day>/``.

    The hook reads the day in time slices, each answered whole by one request
    (:class:`~affiliate_network.hooks._paging.SlicedPull`): every conversion that exists for
    the whole pull is landed exactly once while others arrive, are approved out of a filtered
    list or are deleted; those that change during the pull are landed as the slice that
    held them was read, and the next (trailing) pull of the day lands them as they settled.
    The manifest keeps the logical request (day, timezone, filters), not the slices.

    A pull that still moved (a second fuller than a page was paged and shifted:
    :class:`~affiliate_network.exceptions.PullShiftedError` from the hook; or duplicate keys,
    unique rows differing from the slices' counts: checked here) is discarded whole (its
    staged files removed, nothing published) and pulled again, after ``consistency_wait_s``
    seconds, up to ``consistency_retries`` times. Then the task fails with
    ``PullShiftedError`` naming the day and the counts; a shifted pull is never landed.

    :param pull: the day, timezone, currency, flags and filters asked; the manifest records
        :meth:`~affiliate_network.reports.pull.ConversionPull.record` (no credentials).
    :param dataset: the dataset folder under ``base``.
    :param format: ``parquet`` or ``jsonl``.
    :param page_size: rows per page (``None``: the connection's).
    :param row_group_rows: Parquet rows per row group (``None``: one page's worth).
    :param consistency_retries: extra pulls of a shifted day.
    :param consistency_wait_s: seconds between pulls of a shifted day.
    :param only_if_changed: a pull identical to the published partition (same content
        checksum) publishes nothing and leaves it byte for byte; a changed one publishes its
        change record beside the manifest (status transitions, new, removed and updated ids:
        :mod:`affiliate_network.partitions.changes`).
    :param run_id: the Airflow run pulling, kept in the change record (a rerun of the run
        reports the change it made again, so a crash after publishing loses no event).
    :param log: where a discarded pull is told (the task's log in Airflow).
    :returns: a small summary (path, rows, pages, duplicates dropped, checksum, and whether
        the day ``changed``, was ``rewritten``, and the ``changes`` counts without the ids).
    :raises PullShiftedError: every pull of the day shifted.
    """
    prefer_system_arrow_pool()  # a no-op after the operator's call (pyarrow is loaded by now)

    def land_once(attempt: int) -> dict[str, Any]:
        """One pull of the day, published only if it held still; any error (a shift included)
        leaves the with-block, which discards the staged files and closes the pull."""
        pages = pull.pages(hook, page_size)
        with (
            pages,
            PartitionWriter(
                as_storage_path(base),
                dataset,
                {"date": pull.day.isoformat()},
                conversion_schema(),
                format=format,
                row_group_rows=row_group_rows or DEFAULT_ROW_GROUP_ROWS,
            ) as writer,
        ):
            writer.write_pages(pages)
            st = pages.stats
            # The hook checked every page's count; a key twice (pages overlapping) means another
            # record was skipped even when the counts add up.
            if writer.duplicates_dropped or (
                st.total_count is not None and writer.rows != st.total_count
            ):
                raise PullShiftedError(
                    f"{pull.day}: {writer.rows} unique rows ({writer.duplicates_dropped} "
                    f"duplicates dropped) where total_count said {st.total_count}",
                    expected=st.total_count,
                    got=writer.rows,
                )
            result = writer.commit(
                request=pull.record(),
                stats=_pull_stats(st, attempt),
                only_if_changed=only_if_changed,
                status_field="status",
                run_id=run_id,
            )
        m = result.manifest
        return {
            "date": pull.day.isoformat(),
            "path": result.path,
            "rows": m.row_count,
            "pages": st.pages,
            "duplicates_dropped": m.duplicates_dropped,
            "checksum": m.content_checksum,
            "changed": result.changed,
            "rewritten": result.rewritten,
            "changes": None if result.changes is None else result.changes.summary(),
        }

    return pull_until_still(
        land_once,
        what=f"{pull.day}",
        lost="published",
        log=log,
        retries=consistency_retries,
        wait_s=consistency_wait_s,
    )


def _pull_stats(st: PullStats, attempts: int) -> dict[str, Any]:
    """The manifest's ``stats`` of a pull."""
    return {
        "pages": st.pages,
        "rows_received": st.rows,
        "total_count": st.total_count,
        "retries": st.retries,
        "pull_seconds": round(st.elapsed_s, 3),
        # Time slices (each served by one answer), answers dropped for holding more than a
        # page, and single seconds paged with the count checks.
        "requests": st.requests,
        "slices": st.slices,
        "splits": st.splits,
        "paged_seconds": st.paged_seconds,
        # Only a pull that held still is landed; the key stays for readers of older manifests.
        "consistent_with_total_count": True,
        "pull_attempts": attempts,
    }
