"""One on-hold review run, callable from a plain script with a hook: pull, decide, guard, apply.

The :class:`~affiliate_network.operators.onhold_review.OnHoldReviewOperator` is a thin adapter
over :func:`run_review`; a script does the same::

    hook = AffiliateNetworkHook("affiliate_network_default")
    ruleset = RuleSet.from_file("include/onhold_rules.yaml")
    window = review_window(timezone_id=None, lookback_days=7, to_date=None, as_of=None,
                           horizon_hours=ruleset.horizon_hours)
    result = run_review(hook, ruleset, window, options=ReviewOptions(),
                        run=ReviewRun(base="data", conn_id="affiliate_network_default",
                                      dag_id="script", run_id="2026-11-25"), dry_run=True)
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from affiliate_network.exceptions import GuardrailError
from affiliate_network.helpers.tasklog import TaskLog
from affiliate_network.review.apply import apply_under_lease, outcome_reasons
from affiliate_network.review.audit import audit_rows, finish_rows, write_jsonl_atomic
from affiliate_network.review.candidates import plan_positions
from affiliate_network.review.guardrails import Guardrails, send_negative_payouts_to_review
from affiliate_network.review.human_decisions import apply_sticky_keeps
from affiliate_network.review.identity import ReviewRun as ReviewRun
from affiliate_network.review.identity import RunIdentity

# Defined apart so the operator checks its arguments at parse without loading this module.
from affiliate_network.review.options import APPROVED, check_reject_status
from affiliate_network.review.options import ReviewOptions as ReviewOptions
from affiliate_network.review.traffic import (
    TrafficSnapshotStore,
    pull_review_traffic,
    review_fields,
    traffic_snapshot_path,
)
from affiliate_network.rules.engine import Evaluation

if TYPE_CHECKING:
    from airflow.sdk import ObjectStoragePath

    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
    from affiliate_network.review.apply import ApplyOutcome
    from affiliate_network.review.window import ReviewWindow
    from affiliate_network.rules.engine import RuleSet

_LOG = logging.getLogger(__name__)


@dataclass
class WriteTotals:
    """What the writes of a run did (all zero on a dry run or without decisions).

    :param applied: status -> ids confirmed by the read-back.
    :param skipped: ids no longer on hold right before their chunk.
    :param mismatches: ids whose read-back shows another state.
    :param chunks: PATCH requests sent.
    :param not_landed: ids accepted by the API but not visible within the read-back wait.
    """

    applied: dict[str, int]
    skipped: int = 0
    mismatches: int = 0
    chunks: int = 0
    not_landed: int = 0


@dataclass
class ReviewResult:
    """The outcome of :func:`run_review` (the audit file holds the per-conversion detail).

    :param window: where the run looked.
    :param identity: the run's identity (in the summary: the human step reads it back whole).
    :param pulled: conversions pulled (window and look-back, every on-hold state).
    :param on_hold: conversions of the window currently on hold.
    :param eligible: those old enough to decide.
    :param evaluation: the rules' decisions of the conversions still on hold (what is written).
    :param plan: the rules' decisions of the run's whole plan: every conversion of the window
        that has been on hold and is old enough, already decided ones included (what the
        guardrails judge; :func:`~affiliate_network.review.candidates.plan_positions`).
    :param rows: the audit rows, as written.
    :param writes: what was written.
    :param kept_by_reviewer: ``review`` decisions turned to ``hold`` by a recent "Keep on hold".
    :param dry_run: nothing was written.
    :param guardrail: on a dry run, the guardrail message a real run would have failed with.
    :param elapsed_s: wall time from the pull to the audit.
    :param traffic: how the traffic came: ``mode`` (full or incremental), ``reason``, rows asked
        (:meth:`~affiliate_network.review.traffic.TrafficPull.summary`).
    """

    window: ReviewWindow
    identity: RunIdentity
    pulled: int
    on_hold: int
    eligible: int
    evaluation: Evaluation
    plan: Evaluation
    rows: list[dict[str, Any]]
    writes: WriteTotals
    kept_by_reviewer: int
    dry_run: bool
    guardrail: str | None
    elapsed_s: float
    traffic: dict[str, Any] = field(default_factory=dict)

    @property
    def audit_path(self) -> ObjectStoragePath:
        """The audit file."""
        return self.identity.audit_path

    @property
    def state_dir(self) -> ObjectStoragePath:
        """The network's state folder (reviewers' decisions)."""
        return self.identity.state_dir

    @property
    def per_action(self) -> dict[str, int]:
        """Audit rows per action (after reviewers' sticky keeps)."""
        counts = Counter(r["action"] for r in self.rows)
        return {a: counts.get(a, 0) for a in ("approve", "reject", "review", "hold")}

    def summary(self) -> dict[str, Any]:
        """The XCom of a review: counts, window and paths, JSON-serialisable (the audit file
        holds the per-conversion detail)."""
        window, writes, per_action = self.window, self.writes, self.per_action
        return {
            # The run's identity, whole: what the human step reads (the rest is for people).
            "run": self.identity.to_dict(),
            "window": [window.decide_from.isoformat(), window.to_date.isoformat()],
            "as_of": f"{window.as_of:%Y-%m-%d %H:%M:%S}",
            "timezone_id": window.timezone_id,
            "pulled": self.pulled,
            "traffic": self.traffic,  # full or incremental, rows asked of the API
            "on_hold": self.on_hold,
            "eligible": self.eligible,
            "too_young": self.on_hold - self.eligible,
            "undecided": self.evaluation.unmatched,
            "decisions": per_action,
            # What the guardrails judged: the window's whole plan, decided conversions included.
            "plan": self.plan.per_action,
            "per_rule": dict(self.evaluation.per_rule),
            "applied": writes.applied,
            "skipped_not_on_hold": writes.skipped,
            "readback_mismatches": writes.mismatches,
            "accepted_not_landed": writes.not_landed,
            "patch_requests": writes.chunks,
            "review_pending": per_action["review"],
            "kept_on_hold_by_reviewer": self.kept_by_reviewer,
            "dry_run": self.dry_run,
            "guardrail_tripped": self.guardrail is not None,
            "guardrail": self.guardrail,
            "audit_path": str(self.audit_path),
            "state_dir": str(self.state_dir),
            "elapsed_s": self.elapsed_s,
        }


def run_review(
    hook: AffiliateNetworkHook,
    ruleset: RuleSet,
    window: ReviewWindow,
    *,
    options: ReviewOptions,
    run: ReviewRun,
    dry_run: bool,
    log: TaskLog | None = None,
) -> ReviewResult:
    """Decide the on-hold conversions of ``window`` and, unless ``dry_run``, apply the clear cases.

    Guardrails are checked before the first write (a dry run reports a trip instead of failing),
    on the run's whole plan: conversions of the window already approved or rejected (by an
    earlier attempt that crashed, an earlier run or a person) count with the action the rules
    give them, so a crash never changes the verdict; only ids still on hold are written.
    Writes hold the network's write lease and go through :class:`OnHoldWriter` (re-check before
    each chunk, read-back after). One audit file per attempt, written atomically: the intentions
    before the first write, the outcome after (or what landed, when a write fails).

    :param hook: the network hook.
    :param ruleset: the rules.
    :param window: the review's window (:func:`~affiliate_network.review.window.review_window`
        with ``ruleset.horizon_hours``).
    :param options: how to decide and write.
    :param run: where the audit, state and lease live.
    :param dry_run: decide and audit only.
    :param log: logger (default: this module's).
    :raises GuardrailError: a ceiling was crossed (not on a dry run); nothing was written.
    """
    log = log or _LOG
    check_reject_status(options.reject_status)
    started = time.monotonic()
    identity = RunIdentity.of(run, window, ruleset.source)
    fields, members = review_fields(ruleset)
    traffic = pull_review_traffic(
        hook,
        window=window,
        fields=fields,
        members=members,
        store=TrafficSnapshotStore(traffic_snapshot_path(run.state_dir, window.timezone_id)),
        page_size=options.page_size,
        full=options.full_pull,
        overlap_s=options.late_arrival_hours * 3600,
        log=log,
    )
    records = traffic.records
    horizon = ruleset.horizon_hours
    plan_at, eligible, on_hold = plan_positions(
        records, window, min_age_hours=options.min_age_hours, horizon_hours=horizon
    )
    # The rules decide the whole plan, so the guardrails judge the same decisions however many
    # of them an earlier (crashed) attempt, an earlier run or a person already applied; only
    # the ones still on hold are audited and written.
    plan = ruleset.evaluate(records, now=window.as_of_ts, eligible=plan_at)
    evaluation = _restricted(plan, eligible)
    _log_decisions(log, ruleset, window, evaluation, options, (len(records), on_hold, eligible))
    if len(plan_at) > len(eligible):
        log.info(
            "Guardrails judge the plan: %d conversions of the window (%d no longer on hold), "
            "decisions %s",
            len(plan_at),
            len(plan_at) - len(eligible),
            plan.per_action,
        )
    audit_path = run.audit_path
    rows = audit_rows(records, evaluation, ruleset)
    negative = send_negative_payouts_to_review(rows)
    if negative:
        log.info("%d approvals of negative payouts (reversals) sent to a person", negative)
    # Wall-clock time: how long ago a person answered (as_of only moves the traffic view).
    sticky = apply_sticky_keeps(
        rows, run.state_dir, now=time.time(), keep_hours=options.keep_decision_hours
    )
    guardrail = _check_guardrails(options.guardrails, plan, records, rows, dry_run, run, log)
    writes = WriteTotals({APPROVED: 0, options.reject_status: 0})
    if dry_run:
        finish_rows(rows, {}, "dry run" if guardrail is None else "dry run; guardrail")
    elif any(r["action"] in ("approve", "reject") for r in rows):
        writes = _write_decisions(hook, rows, identity, options, log)
    else:
        finish_rows(rows, {}, "not applied")
    count = write_jsonl_atomic(audit_path, rows)
    log.info("Audit: %d decisions -> %s", count, audit_path)
    return ReviewResult(
        window=window,
        identity=identity,
        pulled=len(records),
        traffic=traffic.summary(),
        on_hold=on_hold,
        eligible=len(eligible),
        evaluation=evaluation,
        plan=plan,
        rows=rows,
        writes=writes,
        kept_by_reviewer=sticky,
        dry_run=dry_run,
        guardrail=guardrail,
        elapsed_s=round(time.monotonic() - started, 3),
    )


def _restricted(plan: Evaluation, positions: list[int]) -> Evaluation:
    """The plan's decisions of ``positions`` (the conversions still on hold), counted anew."""
    keep = set(positions)
    decisions = [d for d in plan.decisions if d.index in keep]
    per_rule = Counter(d.rule_id for d in decisions)
    return Evaluation(
        decisions=decisions,
        evaluated=len(positions),
        per_rule={rule: per_rule.get(rule, 0) for rule in plan.per_rule},
        cpu_seconds=plan.cpu_seconds,
    )


def _log_decisions(
    log: TaskLog,
    ruleset: RuleSet,
    window: ReviewWindow,
    evaluation: Evaluation,
    options: ReviewOptions,
    counts: tuple[int, int, list[int]],
) -> None:
    pulled, on_hold, eligible = counts
    log.info(
        "Window %s..%s (%s, as of %s; aggregates over %d conversions from %s): %d on "
        "hold, %d old enough (on hold %.4gh, aggregates complete %.4gh), decided %d in "
        "%.3f s CPU",
        window.decide_from,
        window.to_date,
        window.timezone,
        window.as_of,
        pulled,
        window.pull_from,
        on_hold,
        len(eligible),
        options.min_age_hours,
        ruleset.horizon_hours,
        len(evaluation.decisions),
        evaluation.cpu_seconds,
    )
    for rule in ruleset.rules:
        log.info("  rule %-28s %-7s %6d", rule.id, rule.action, evaluation.per_rule.get(rule.id, 0))


def _check_guardrails(
    guardrails: Guardrails,
    evaluation: Evaluation,
    records: list[dict[str, Any]],
    rows: list[dict[str, Any]],
    dry_run: bool,
    run: ReviewRun,
    log: TaskLog,
) -> str | None:
    """``None`` when the run may write; a dry run gets the message a real run would fail with.

    :raises GuardrailError: a real run crossed a ceiling (its audit says nothing was written).
    """
    try:
        guardrails.check(evaluation, records)
    except GuardrailError as err:
        if not dry_run:
            err.audit_path = str(run.audit_path)  # a notification points to it
            finish_rows(rows, {}, "guardrail tripped: nothing written")
            write_jsonl_atomic(run.audit_path, rows)
            log.error("%s Audit: %s", err, run.audit_path)
            raise
        # A dry run reports the verdict instead of failing: on-call wants the decisions.
        log.warning("Dry run: a real run would stop here. %s", err)
        return str(err)
    return None


def _write_decisions(
    hook: AffiliateNetworkHook,
    rows: list[dict[str, Any]],
    identity: RunIdentity,
    options: ReviewOptions,
    log: TaskLog,
) -> WriteTotals:
    """Apply approvals, then rejections, under the network's write lease; fill in the rows."""
    plan = {
        status: [r["on_hold_conversion_id"] for r in rows if r["action"] == action]
        for action, status in (("approve", APPROVED), ("reject", options.reject_status))
    }
    # Intentions first: if the task dies mid-apply the audit shows what was planned.
    finish_rows(rows, {}, "pending: not yet applied")
    write_jsonl_atomic(identity.audit_path, rows)

    def record_failure(outcomes: dict[str, ApplyOutcome], err: BaseException) -> None:
        # Record what the read-back shows landed: a retry sends only what is on hold.
        finish_rows(rows, outcome_reasons(outcomes), f"not applied: failed ({type(err).__name__})")
        write_jsonl_atomic(identity.audit_path, rows)

    outcomes = apply_under_lease(
        hook,
        plan,
        identity=identity,
        chunk_size=options.chunk_size,
        lease_wait_s=options.lease_wait_minutes * 60,
        readback_wait_s=options.readback_wait_s,
        log=log,
        on_error=record_failure,
    )
    finish_rows(rows, outcome_reasons(outcomes), "not applied")
    totals = WriteTotals(dict.fromkeys(plan, 0))
    for status, outcome in outcomes.items():
        totals.applied[status] = len(outcome.applied)
        totals.mismatches += len(outcome.mismatches)
        totals.not_landed += len(outcome.not_landed)
        totals.skipped += len(outcome.skipped)
        totals.chunks += outcome.chunks
    return totals


def review_outcome(summary: dict[str, Any]) -> tuple[str, str | None]:
    """What a finished review run was, for its run record: ``wrote``, or ``dry_run`` with the
    guardrail a real run would have stopped at (:mod:`affiliate_network.helpers.run_records`)."""
    if not summary.get("dry_run"):
        return "wrote", None
    guardrail = summary.get("guardrail")
    return "dry_run", None if guardrail is None else f"a real run stops: {guardrail}"
