"""The Assets the operators publish to, and the events that tell downstream DAGs what landed.

Light on purpose: DAG files import it at parse time.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from airflow.sdk import Asset

from affiliate_network.compat import add_asset_partitions

if TYPE_CHECKING:
    from airflow.sdk import Context


def dataset_asset(dataset: str) -> Asset:
    """The Asset a dataset's partitions are published as (downstream DAGs schedule on it).

    :param dataset: the dataset folder name (``conversions``, ``affiliate_reports``).
    """
    # An "x-" scheme: Airflow normalises it without loading every provider's asset handlers
    # (boto3 among them), which cost the DAG processor about 0.7 s per parse of this DAG file.
    return Asset(name=f"affiliate_network_{dataset}", uri=f"x-affiliate-network://{dataset}")


def emit_asset_events(
    context: Context, outlets: Iterable[Any] | None, extra: dict[str, Any], keys: list[str]
) -> None:
    """Annotate the task's asset event(s): what was written, and the partition keys.

    :param context: the task context (its ``outlet_events``; none outside a task run).
    :param outlets: the operator's outlets; only Assets get an event.
    :param extra: the event's ``extra`` (paths, rows, checksums).
    :param keys: partition keys added to each event (``date=YYYY-MM-DD``).
    """
    outlet_events = context.get("outlet_events")
    if outlet_events is None:
        return
    for outlet in outlets or ():
        if isinstance(outlet, Asset):
            event = outlet_events[outlet]
            # Before Airflow 3.3 (no partitioned asset events) extra's "partitions" still says
            # which partitions landed.
            event.extra = extra
            if keys:
                add_asset_partitions(event, keys)
