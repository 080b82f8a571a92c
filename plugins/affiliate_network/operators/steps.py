"""The small steps around the jobs in the DAG files: what to run, and checks before it.

* :class:`AffiliateReportTargetsOperator`: the affiliate report's mapped-task kwargs from
  ``include/reports.yaml`` (daily reports DAG).
* :class:`OfferStateValidateOperator`: validates ``include/offer_state.yaml`` (offer sync DAG's
  first task).
* :class:`ReviewRequestsOperator`: one human-in-the-loop request per rule with ``review``
  decisions (on-hold review DAG).

Operators rather than ``@task`` functions: the decorator loads the standard provider's
``PythonOperator`` module (and ``packaging``) into every parse of a DAG file, about half of its
parse budget. Everything they run is imported in ``execute``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from affiliate_network.operators.base import failing_fast

if TYPE_CHECKING:
    from airflow.sdk import Context

__all__ = ["AffiliateReportTargetsOperator", "OfferStateValidateOperator", "ReviewRequestsOperator"]


class AffiliateReportTargetsOperator(BaseOperator):
    """The affiliate report's mapped-task kwargs, one dict per affiliate (XCom).

    Reads ``include/reports.yaml`` through
    :func:`affiliate_network.settings.models.load_affiliate_report_targets`, which validates every
    entry (file, line, entry and field): an invalid file fails at once, without retries, before
    any report is requested.

    An operator rather than a ``@task`` function: the decorator loads the standard provider's
    ``PythonOperator`` module (and ``packaging``) into every parse of the DAG file.
    """

    ui_color = "#eaf0f8"

    def execute(self, context: Context) -> list[dict[str, Any]]:
        from affiliate_network.settings.models import load_affiliate_report_targets

        with failing_fast():
            return load_affiliate_report_targets()


class OfferStateValidateOperator(BaseOperator):
    """Validate the desired-state file against the API spec; return the object counts (XCom).

    Every invalid value fails the task at once (no retries: the file must change), naming the
    file, object, field and line. Nothing is read from the network.

    An operator rather than a ``@task`` function: the decorator loads the standard provider's
    ``PythonOperator`` module (and ``packaging``) into every parse of the DAG file.

    :param state_file: desired-state YAML (templated); relative paths are read from the
        include folder.
    """

    template_fields: Sequence[str] = ("state_file",)
    ui_color = "#e8f1fb"

    def __init__(self, *, state_file: str = "offer_state.yaml", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.state_file = state_file

    def execute(self, context: Context) -> dict[str, int]:
        from affiliate_network.operators.offer_state_sync import resolve_state_file
        from affiliate_network.sync.loader import load_desired_state

        with failing_fast():
            state = load_desired_state(
                resolve_state_file(self.state_file), display_name=self.state_file
            )
        return state.counts()


class ReviewRequestsOperator(BaseOperator):
    """One human-in-the-loop request per rule with ``review`` decisions in the review's audit.

    Returns :func:`build_review_requests` of the summary (XCom), each with its
    ``response_timeout`` (the rules file's ``review.review_minutes``, from the summary): the
    kwargs list the DAG's ``HITLOperator.partial(...).expand_kwargs`` maps over; empty on a dry
    run or when nothing
    waits for a person. An operator rather than a ``@task`` function: the decorator loads the
    standard provider's ``PythonOperator`` module (and ``packaging``) into every parse of the
    DAG file, about half of its parse budget.

    :param summary: the :class:`OnHoldReviewOperator` return value (templated: its XCom).
    """

    template_fields: Sequence[str] = ("summary",)
    ui_color = "#fde9c9"

    def __init__(self, *, summary: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.summary = summary

    def execute(self, context: Context) -> list[dict[str, Any]]:
        # Here, not at the top: the daily and offer-sync DAG files import this module too.
        from affiliate_network.review.human_requests import build_review_requests

        settings = (self.summary or {}).get("review_settings") or {}
        wait = dt.timedelta(minutes=settings.get("review_minutes", 50))
        return [{**r, "response_timeout": wait} for r in build_review_requests(self.summary)]
