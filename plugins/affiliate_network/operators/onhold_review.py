"""On-hold review operators: thin adapters over the job library :mod:`affiliate_network.review`.

* :class:`OnHoldReviewOperator` reads its arguments and the run, calls
  :func:`affiliate_network.review.job.run_review` and returns a small summary (XCom).
* :class:`~affiliate_network.operators.steps.ReviewRequestsOperator` turns the ``review``
  decisions of that audit file into one human-in-the-loop request per rule.
* :class:`OnHoldReviewApplyOperator` (:mod:`.onhold_review_apply`, re-exported here) applies the
  human's choices on the same re-check / chunk / read-back path: a rerun never writes twice.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from affiliate_network.operators.base import (
    DEFER_AFTER_S,
    AffiliateNetworkBaseOperator,
    as_bool,
    deferral_settings,
)
from affiliate_network.operators.lineage import (
    CONVERSIONS_ENDPOINT,
    ONHOLD_ENDPOINT,
    OpenLineageMixin,
    api_endpoint_dataset,
    storage_dataset,
)
from affiliate_network.operators.onhold_review_apply import OnHoldReviewApplyOperator
from affiliate_network.review.options import (
    ARMED_VARIABLE,
    DEFAULT_READBACK_WAIT_S,
    ReviewOptions,
    check_reject_status,
    check_tuning,
    dry_run_choice,
    refuse_moved_variables,
    review_armed,
)
from affiliate_network.review.rules_files import DEFAULT_RULES_FILE, resolve_rules_file
from affiliate_network.settings.paths import resolve_data_base

# A DAG file imports this at parse time: the review run and window load in execute.
if TYPE_CHECKING:
    from airflow.sdk import Context

    from affiliate_network.review.job import ReviewResult, ReviewRun


class OnHoldReviewOperator(AffiliateNetworkBaseOperator, OpenLineageMixin):
    """Decide on-hold conversions with a rules file and apply the clear cases: one call into
    :func:`affiliate_network.review.job.run_review` (docs/onhold-review.md says how a rerun or an
    overlapping run ends where one clean run ends). The rules file's ``review:`` section holds
    the guardrails and tuning; the XCom holds counts and paths only. Lineage (optional): the
    conversion report in; the audit file, and the on-hold endpoint when patched, out.

    :param rules_file: name of a rules file in the include folder, ``onhold_rules*.yaml``
        (templated; the trigger form offers the choices). Anything else, a path outside the
        folder or a symlink out of it, is refused before reading (:func:`resolve_rules_file`).
    :param affiliate_network_conn_id: network-portal connection.
    :param to_date: last day of the window, ``YYYY-MM-DD`` (templated); default: the day of
        ``as_of`` in the network's timezone.
    :param as_of: the review's "now", ISO date-time (templated); default: the current time.
        Conversions after it are not seen; ages are measured up to it.
    :param timezone_id: the API's timezone id of the window (default: ``include/network.yaml``).
    :param dry_run: decide and audit, change nothing (templated). ``None``: the run decides
        (:func:`~affiliate_network.review.options.dry_run_choice`). An unarmed deployment
        (:func:`~affiliate_network.review.options.review_armed`) always gets a dry run.
    :param lease_wait_minutes: how long to wait for another run's write lease.
    :param base_path: audit base (templated); default Variable ``affiliate_network_data_base``.
    :param page_size: conversion report page size (default: the connection's).
    :param full_pull: pull the whole window instead of the traffic snapshot plus what is new
        (templated; the snapshot is rewritten from it).
    :param readback_wait_s: longest wait, in seconds, for sent statuses to show (0..600).
    :param deferrable: wait for another run's write lease in the triggerer once the wait passes
        ``defer_after_s`` (default: the deployment's ``[operators] default_deferrable``).
    :param defer_after_s: seconds waited for the lease in the worker before deferring (60).
    """

    template_fields: Sequence[str] = (
        "rules_file",
        "to_date",
        "as_of",
        "dry_run",
        "base_path",
        "full_pull",
    )
    # The template field shadows BaseOperator.dry_run() (render-only, unused) on purpose.
    dry_run: bool | str | None  # type: ignore[assignment]
    ui_color = "#fde9c9"

    def __init__(
        self,
        *,
        rules_file: str = DEFAULT_RULES_FILE,
        affiliate_network_conn_id: str = "affiliate_network_default",
        to_date: str | None = None,
        as_of: str | None = None,
        timezone_id: int | None = None,
        dry_run: bool | str | None = False,
        lease_wait_minutes: float = 35.0,
        base_path: str | None = None,
        page_size: int | None = None,
        full_pull: bool | str = False,
        readback_wait_s: float = DEFAULT_READBACK_WAIT_S,
        deferrable: bool | str | None = None,
        defer_after_s: float = DEFER_AFTER_S,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.deferrable, self.defer_after_s = deferral_settings(deferrable, defer_after_s)
        self.rules_file = rules_file
        self.affiliate_network_conn_id = affiliate_network_conn_id
        self.to_date = to_date
        self.as_of = as_of
        self.timezone_id = timezone_id
        self.dry_run = dry_run
        self.lease_wait_minutes = lease_wait_minutes
        self.base_path = base_path
        self.page_size = page_size
        self.full_pull = full_pull
        self.readback_wait_s = readback_wait_s
        # A bad argument fails at DAG parse time (the rules file's part when the task runs).
        as_bool(full_pull, "full_pull")
        check_tuning(lease_wait_minutes, page_size, readback_wait_s)

    def _dry_run(self, context: Context, armed: bool) -> bool:
        """The run's choice (:meth:`_chosen_dry_run`), overruled by an unarmed deployment."""
        dry_run = self._chosen_dry_run(context)
        if not armed:
            self.log.warning(
                "Not armed: this deployment does not set %s=true, so the review only plans "
                "and writes its audit (what it would approve and reject); it asks nobody and "
                "writes nothing to the network%s. To let it write, set %s=true on the "
                "deployment (docs/onhold-review.md#arming-the-review).",
                ARMED_VARIABLE,
                "" if dry_run else ", whatever the run asked",
                ARMED_VARIABLE,
            )
            return True
        return dry_run

    def _chosen_dry_run(self, context: Context) -> bool:
        dag_run = (context or {}).get("dag_run")
        run_type = str(getattr(dag_run, "run_type", "") or "").lower()
        chosen = self.dry_run
        if chosen is None:
            params = (context or {}).get("params")
            chosen = dry_run_choice(getattr(dag_run, "conf", None), params, run_type)  # type: ignore[assignment]
        if chosen is not None:
            return as_bool(chosen, "dry_run")
        manual = run_type.endswith("manual")
        self.log.info(
            "dry_run not set: a %s run %s",
            run_type or "manual",
            "only decides and audits (to write: Mode 'Write decisions to the network' in the "
            "trigger form, or conf dry_run false)"
            if manual or not run_type
            else "writes",
        )
        return manual or not run_type

    def _run(self, context: Context, base: str) -> ReviewRun:
        """This attempt's place: audit folder per run id, file per try number."""
        from affiliate_network.review.job import ReviewRun

        run_id = str(
            (context or {}).get("run_id") or f"manual__{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S}"
        )
        ti = (context or {}).get("ti")
        attempt = getattr(ti, "try_number", None) or 1
        return ReviewRun(base, self.affiliate_network_conn_id, self.dag_id, run_id, attempt)

    def execute_job(self, context: Context) -> dict[str, Any]:
        """The review, with what the run was recorded beside its audit (the network page)."""
        from affiliate_network.review.audit import audit_dir
        from affiliate_network.review.job import review_outcome

        base = resolve_data_base(self.base_path)
        return self.run_recorded(
            context,
            lambda: self._review(context),
            folder=lambda dag_id, run_id: audit_dir(base, dag_id, run_id),
            outcome_of=review_outcome,
        )

    def _review(self, context: Context) -> dict[str, Any]:
        from affiliate_network.review.job import run_review
        from affiliate_network.review.window import review_window
        from affiliate_network.rules.engine import RuleSet
        from affiliate_network.triggers.lease import write_when_the_lease_allows

        self.reset_lineage()
        rules_path = resolve_rules_file(self.rules_file)
        refuse_moved_variables(str(rules_path))
        armed = review_armed()  # at run time: arming takes effect without a re-parse
        dry_run = self._dry_run(context, armed)
        ruleset = RuleSet.from_file(rules_path)  # validation happens before anything is pulled
        settings = ruleset.rules_file.review
        check_reject_status(settings.reject_status)
        options = ReviewOptions.of(  # the rules file's review: section, and this task's part
            settings,
            lease_wait_minutes=self.lease_wait_minutes,
            page_size=self.page_size,
            full_pull=as_bool(self.full_pull, "full_pull"),
            readback_wait_s=self.readback_wait_s,
        )
        self.log.info("Rules %s: %d enabled rules", rules_path, len(ruleset.compiled))
        window = review_window(
            timezone_id=self.timezone_id,
            lookback_days=settings.lookback_days,
            to_date=self.to_date,
            as_of=self.as_of,
            horizon_hours=ruleset.horizon_hours,
        )
        run = self._run(context, resolve_data_base(self.base_path))

        def review(minutes: float) -> ReviewResult:
            tuned = dataclasses.replace(options, lease_wait_minutes=minutes)
            return run_review(
                self.hook, ruleset, window, options=tuned, run=run, dry_run=dry_run, log=self.log
            )

        wait = options.lease_wait_minutes
        result = (  # a dry run never takes the lease
            review(wait)
            if dry_run
            else write_when_the_lease_allows(
                self, base=run.base, owner=run.owner, wait_minutes=wait, write=review
            )
        )
        self._record_review_lineage(result)
        # The human steps after it read these (one place: this run's rules file).
        human = settings.model_dump(include={"reject_status", "chunk_size", "review_minutes"})
        return {**result.summary(), "armed": armed, "review_settings": human}

    def _record_review_lineage(self, result: ReviewResult) -> None:
        """Lineage: conversions read; the audit written, and the on-hold endpoint if patched."""
        base_url = self.hook.base_url
        outputs = [storage_dataset(str(result.audit_path), rows=len(result.rows))]
        if result.writes.chunks:
            outputs.append(api_endpoint_dataset(base_url, ONHOLD_ENDPOINT))
        self.record_lineage(
            inputs=[api_endpoint_dataset(base_url, CONVERSIONS_ENDPOINT)], outputs=outputs
        )


__all__ = ["OnHoldReviewApplyOperator", "OnHoldReviewOperator"]
