"""On-hold review operators: thin adapters over the job library in :mod:`affiliate_network.review`
(rules engine, window, apply with re-check and read-back, audit, review requests).

Three pieces, used by the ``affiliate_onhold_review`` DAG:

* :class:`OnHoldReviewOperator` pulls the conversions of a lookback window, keeps those whose
  CURRENT on-hold state (the LAST ``relationship.on_hold_snapshots`` entry) is ``on_hold``,
  decides them with ``include/onhold_rules.yaml``, checks the guardrails before the first write,
  applies approvals and rejections in chunks (re-checking right before each chunk which are still
  on hold, reading back after), and writes one audit file per attempt.
* :func:`build_review_requests` turns the ``review`` decisions of that audit file into one
  human-in-the-loop request per rule (subject + markdown body listing the conversions).
* :class:`OnHoldReviewApplyOperator` (in :mod:`.onhold_review_apply`, re-exported here) applies
  the human's choice for each request, with the same re-check / chunk / read-back path, so
  rerunning it never writes twice.
"""

from __future__ import annotations

import datetime as dt
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from affiliate_network.exceptions import (
    ConfigValidationError,
    GuardrailError,
)
from affiliate_network.operators.base import AffiliateNetworkBaseOperator, as_bool
from affiliate_network.operators.onhold_review_apply import OnHoldReviewApplyOperator
from affiliate_network.paths import include_dir, resolve_data_base
from affiliate_network.review.apply import (
    APPROVED,
    DEFAULT_REJECT_STATUS,
    ApplyOutcome,
    OnHoldWriter,
    check_reject_status,
    outcome_reasons,
)
from affiliate_network.review.audit import (
    audit_dir,
    audit_rows,
    finish_rows,
    read_jsonl,
    write_jsonl_atomic,
)
from affiliate_network.review.candidates import eligible_positions
from affiliate_network.review.guardrails import Guardrails
from affiliate_network.review.requests import (
    KEEP_PARAM,
    REVIEW_OPTIONS,
    build_review_requests,
)
from affiliate_network.review.traffic import pull_review_traffic
from affiliate_network.review.window import review_window

if TYPE_CHECKING:
    from airflow.sdk import Context


# ---------------------------------------------------------------------------------------------
# The review operator
# ---------------------------------------------------------------------------------------------


class OnHoldReviewOperator(AffiliateNetworkBaseOperator):
    """Decide on-hold conversions with a rules file and apply the clear cases.

    **What is decided is a function of the traffic, never of the review's own history.** Every
    conversion of the window counts in the rules' aggregates whatever its on-hold state (on
    hold, approved, rejected, never held), plus the traffic the windowed aggregates need before
    the window (``within_hours``). Only conversions currently on hold are decided, and only once
    every windowed aggregate about them is complete (``within_hours`` after their conversion
    time) and they have been on hold for ``min_age_hours``. A rerun, the next hourly run or an
    overlapping run therefore decides what one clean run decides.

    Guardrails are checked before the first write. Writes hold the network's write lease (one
    writer per network: :mod:`affiliate_network.review.lease`) and go in chunks of
    ``chunk_size``: right before each chunk the ids are searched again and only those still on
    hold are sent; after each chunk they are read back, and the read-back decides what the audit
    calls applied. ``review`` decisions wait for a human (see :func:`build_review_requests`),
    except conversions a person kept on hold less than ``keep_decision_hours`` ago with the same
    data; ``hold`` and unmatched conversions stay on hold.

    One audit file per attempt (JSON Lines, written atomically) lists every decision: conversion
    id, on-hold id, rule id, action, the values the rule tested, applied or not and why. The
    return value (XCom) holds counts and paths only.

    :param rules_file: rules YAML (templated); relative names are looked up in the include dir.
    :param affiliate_network_conn_id: network-portal connection.
    :param lookback_days: days of conversions to decide, ending with the day of ``as_of``.
    :param to_date: last day of the window, ``YYYY-MM-DD`` (templated); default: the day of
        ``as_of`` in the network's timezone.
    :param as_of: the review's "now", ISO date-time (templated); default: the current time.
        Conversions after it are not seen; ages are measured up to it.
    :param timezone_id: the API's timezone id of the window (default: ``include/network.yaml``;
        no default of its own).
    :param min_age_hours: decide only conversions on hold for at least this long.
    :param keep_decision_hours: a reviewer's "Keep on hold" is not asked again for this long
        (unless the conversion's data changed).
    :param chunk_size: on-hold ids per PATCH.
    :param dry_run: decide and write the audit, change nothing (templated; bool or "true"/"false").
        ``None`` decides by the run: a manual trigger is a dry run (writing is a deliberate
        choice in the trigger form), a scheduled or backfill run writes.
    :param reject_status: PATCH status for rejections (documented: ``rejected``).
    :param max_reject_share: fail before any write when rejections / decided conversions (those a
        rule matched) exceed this share (0..1); ``None`` disables.
    :param max_reject_count: fail before any write when rejections exceed this count.
    :param max_approved_payout: fail before any write when the payout of approvals exceeds this.
    :param lease_wait_minutes: how long to wait for another run's write lease.
    :param base_path: audit base (templated); default Variable ``affiliate_network_data_base``.
    :param page_size: conversion report page size (default: the connection's).
    """

    template_fields: Sequence[str] = ("rules_file", "to_date", "as_of", "dry_run", "base_path")
    ui_color = "#fde9c9"

    def __init__(
        self,
        *,
        rules_file: str = "onhold_rules.yaml",
        affiliate_network_conn_id: str = "affiliate_network_default",
        lookback_days: int = 7,
        to_date: str | None = None,
        as_of: str | None = None,
        timezone_id: int | None = None,
        min_age_hours: float = 0.0,
        keep_decision_hours: float = 24.0,
        chunk_size: int = 100,
        dry_run: bool | str | None = False,
        reject_status: str = DEFAULT_REJECT_STATUS,
        max_reject_share: float | None = 0.5,
        max_reject_count: int | None = 1000,
        max_approved_payout: float | None = None,
        lease_wait_minutes: float = 35.0,
        base_path: str | None = None,
        page_size: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if lookback_days < 1:
            raise ConfigValidationError(f"lookback_days must be >= 1, got {lookback_days}")
        if not 1 <= chunk_size <= 2000:
            raise ConfigValidationError(f"chunk_size must be between 1 and 2000, got {chunk_size}")
        if min_age_hours < 0:
            raise ConfigValidationError(f"min_age_hours must be >= 0, got {min_age_hours}")
        if keep_decision_hours < 0:
            raise ConfigValidationError(
                f"keep_decision_hours must be >= 0, got {keep_decision_hours}"
            )
        Guardrails(max_reject_share, max_reject_count, max_approved_payout).validate()
        if not reject_status or reject_status == APPROVED:
            raise ConfigValidationError(
                f"reject_status must be a rejecting status, got {reject_status!r}"
            )
        self.rules_file = rules_file
        self.affiliate_network_conn_id = affiliate_network_conn_id
        self.lookback_days = lookback_days
        self.to_date = to_date
        self.as_of = as_of
        self.timezone_id = timezone_id
        self.min_age_hours = min_age_hours
        self.keep_decision_hours = keep_decision_hours
        self.chunk_size = chunk_size
        self.dry_run = dry_run
        self.reject_status = reject_status
        self.max_reject_share = max_reject_share
        self.max_reject_count = max_reject_count
        self.max_approved_payout = max_approved_payout
        self.lease_wait_minutes = lease_wait_minutes
        self.base_path = base_path
        self.page_size = page_size

    # -- helpers --------------------------------------------------------------------------------

    def _rules_path(self) -> Path:
        path = Path(self.rules_file)
        return path if path.is_absolute() else include_dir() / path

    def _dry_run(self, context: Context) -> bool:
        if self.dry_run is not None and self.dry_run != "None":
            return as_bool(self.dry_run, "dry_run")
        dag_run = (context or {}).get("dag_run")
        run_type = str(getattr(dag_run, "run_type", "") or "").lower()
        manual = run_type.endswith("manual")
        self.log.info(
            "dry_run not set: a %s run %s",
            run_type or "manual",
            "only decides and audits (set dry_run false in the trigger form to write)"
            if manual or not run_type
            else "writes",
        )
        return manual or not run_type

    # -- execute --------------------------------------------------------------------------------

    def execute_job(self, context: Context) -> dict[str, Any]:
        from affiliate_network.review.engine import RuleSet
        from affiliate_network.review.human_decisions import apply_sticky_keeps, state_dir
        from affiliate_network.review.lease import WriteLease, lease_path

        dry_run = self._dry_run(context)
        check_reject_status(self.reject_status)
        rules_path = self._rules_path()
        ruleset = RuleSet.from_file(rules_path)  # validation happens before anything is pulled
        self.log.info("Rules %s: %d enabled rules", rules_path, len(ruleset.compiled))
        horizon = ruleset.horizon_hours
        window = review_window(
            timezone_id=self.timezone_id,
            lookback_days=self.lookback_days,
            to_date=self.to_date,
            as_of=self.as_of,
            horizon_hours=horizon,
        )
        base = resolve_data_base(self.base_path)
        hook = self.hook
        started = time.monotonic()
        records = pull_review_traffic(hook, ruleset, window, self.page_size)
        eligible, on_hold = eligible_positions(
            records, window, min_age_hours=self.min_age_hours, horizon_hours=horizon
        )
        evaluation = ruleset.evaluate(records, now=window.as_of_ts, eligible=eligible)
        self.log.info(
            "Window %s..%s (%s, as of %s; aggregates over %d conversions from %s): %d on "
            "hold, %d old enough (on hold %.4gh, aggregates complete %.4gh), decided %d in "
            "%.3f s CPU",
            window.decide_from,
            window.to_date,
            window.timezone,
            window.as_of,
            len(records),
            window.pull_from,
            on_hold,
            len(eligible),
            self.min_age_hours,
            horizon,
            len(evaluation.decisions),
            evaluation.cpu_seconds,
        )
        for rule in ruleset.rules:
            self.log.info(
                "  rule %-28s %-7s %6d",
                rule.id,
                rule.action,
                evaluation.per_rule.get(rule.id, 0),
            )

        run_id = str(
            (context or {}).get("run_id") or f"manual__{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S}"
        )
        ti = (context or {}).get("ti")
        attempt = getattr(ti, "try_number", None) or 1
        folder = audit_dir(base, self.dag_id, run_id)
        audit_path = folder / f"decisions-attempt-{attempt}.jsonl"
        state = state_dir(base, self.affiliate_network_conn_id)
        rows = audit_rows(records, evaluation, ruleset)
        # Wall-clock time: how long ago a person answered (as_of only moves the traffic view).
        sticky = apply_sticky_keeps(
            rows, state, now=time.time(), keep_hours=self.keep_decision_hours
        )

        outcome_by_id: dict[str, tuple[bool, str]] = {}
        approve_ids = [r["on_hold_conversion_id"] for r in rows if r["action"] == "approve"]
        reject_ids = [r["on_hold_conversion_id"] for r in rows if r["action"] == "reject"]
        guardrail: str | None = None
        try:
            Guardrails(
                self.max_reject_share, self.max_reject_count, self.max_approved_payout
            ).check(evaluation, records)
        except GuardrailError as err:
            if not dry_run:
                finish_rows(rows, {}, "guardrail tripped: nothing written")
                write_jsonl_atomic(audit_path, rows)
                self.log.error("%s Audit: %s", err, audit_path)
                raise
            # A dry run reports the verdict instead of failing: on-call wants the decisions.
            guardrail = str(err)
            self.log.warning("Dry run: a real run would stop here. %s", err)

        summary_applied = {APPROVED: 0, self.reject_status: 0}
        mismatches = skipped = chunks = 0
        if dry_run:
            reason = "dry run" if guardrail is None else "dry run; guardrail"
            finish_rows(rows, {}, reason)
        elif approve_ids or reject_ids:
            # Intentions first: if the task dies mid-apply the audit shows what was planned.
            finish_rows(rows, {}, "pending: not yet applied")
            write_jsonl_atomic(audit_path, rows)
            lease = WriteLease(
                lease_path(base, self.affiliate_network_conn_id), f"{self.dag_id}/{run_id}"
            )
            lease.acquire(wait_s=self.lease_wait_minutes * 60, log=self.log)
            try:
                writer = OnHoldWriter(
                    hook,
                    from_date=window.decide_from,
                    to_date=window.to_date,
                    timezone_id=window.timezone_id,
                    chunk_size=self.chunk_size,
                    log=self.log,
                    on_chunk=lease.renew,
                )
                outcomes = {APPROVED: ApplyOutcome(), self.reject_status: ApplyOutcome()}
                try:
                    for ids, status in (
                        (approve_ids, APPROVED),
                        (reject_ids, self.reject_status),
                    ):
                        if ids:
                            writer.apply(ids, status, outcomes[status])
                except Exception as err:
                    # Record what the read-back shows landed: a retry sends only what is on
                    # hold.
                    outcome_reasons(outcomes, outcome_by_id)
                    finish_rows(rows, outcome_by_id, f"not applied: failed ({type(err).__name__})")
                    write_jsonl_atomic(audit_path, rows)
                    raise
            finally:
                lease.release()
            outcome_reasons(outcomes, outcome_by_id)
            for status, outcome in outcomes.items():
                summary_applied[status] = len(outcome.applied)
                mismatches += len(outcome.mismatches)
                skipped += len(outcome.skipped)
                chunks += outcome.chunks
            finish_rows(rows, outcome_by_id, "not applied")
        else:
            finish_rows(rows, {}, "not applied")
        count = write_jsonl_atomic(audit_path, rows)
        self.log.info("Audit: %d decisions -> %s", count, audit_path)

        per_action = Counter(r["action"] for r in rows)
        return {
            "window": [window.decide_from, window.to_date],
            "as_of": window.as_of,
            "timezone_id": window.timezone_id,
            "pulled": len(records),
            "on_hold": on_hold,
            "eligible": len(eligible),
            "too_young": on_hold - len(eligible),
            "undecided": evaluation.unmatched,
            "decisions": {a: per_action.get(a, 0) for a in ("approve", "reject", "review", "hold")},
            "per_rule": dict(evaluation.per_rule),
            "applied": summary_applied,
            "skipped_not_on_hold": skipped,
            "readback_mismatches": mismatches,
            "patch_requests": chunks,
            "review_pending": per_action.get("review", 0),
            "kept_on_hold_by_reviewer": sticky,
            "dry_run": dry_run,
            "guardrail_tripped": guardrail is not None,
            "audit_path": str(audit_path),
            "state_dir": str(state),
            "elapsed_s": round(time.monotonic() - started, 3),
        }


__all__ = [
    "KEEP_PARAM",
    "REVIEW_OPTIONS",
    "GuardrailError",
    "OnHoldReviewApplyOperator",
    "OnHoldReviewOperator",
    "OnHoldWriter",
    "build_review_requests",
    "read_jsonl",
    "write_jsonl_atomic",
]
