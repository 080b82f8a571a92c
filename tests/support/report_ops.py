"""Report operators as the operator tests build them: fast retries, a daily interval context."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pendulum
from airflow.sdk.execution_time.context import OutletEventAccessors

from affiliate_network.operators.conversion_report import ConversionReportOperator
from tests.support.daily_run import FAST_RETRIES

__all__ = ["FAST_RETRIES", "conversions_op", "interval_context"]


def interval_context(day: str, days: int = 1) -> dict[str, Any]:
    """The task-context keys the operators read, for a daily data interval starting at ``day``."""
    start = pendulum.parse(day, tz="UTC")
    return {
        "data_interval_start": start,
        "data_interval_end": start.add(days=days),
        "outlet_events": OutletEventAccessors(),
    }


def conversions_op(base: Path, **kwargs: Any) -> ConversionReportOperator:
    """A :class:`ConversionReportOperator` landing under ``base`` (UTC days, USD)."""
    kwargs.setdefault("show_events", True)
    kwargs.setdefault("hook_kwargs", dict(FAST_RETRIES))
    return ConversionReportOperator(
        task_id=kwargs.pop("task_id", "pull"),
        base_path=str(base),
        timezone_id=67,
        network_timezone="UTC",
        currency_id="USD",
        **kwargs,
    )
