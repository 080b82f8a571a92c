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
* :class:`OnHoldReviewApplyOperator` applies the human's choice for each request, with the same
  re-check / chunk / read-back path, so rerunning it never writes twice.
"""

from __future__ import annotations

import datetime as dt
import re
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.sdk import ObjectStoragePath

from affiliate_network.exceptions import (
    AffiliateNetworkError,
    ConfigValidationError,
    GuardrailError,
)
from affiliate_network.operators.base import AffiliateNetworkBaseOperator, as_bool
from affiliate_network.paths import include_dir, resolve_data_base
from affiliate_network.review.apply import (
    APPROVED,
    DEFAULT_REJECT_STATUS,
    ON_HOLD,
    ApplyOutcome,
    OnHoldWriter,
    check_reject_status,
    outcome_reasons,
)
from affiliate_network.review.audit import audit_dir, read_jsonl, write_jsonl_atomic
from affiliate_network.review.fields import on_hold_conversion_id, on_hold_since, on_hold_status
from affiliate_network.review.requests import (
    KEEP_PARAM,
    OPTION_APPROVE,
    OPTION_KEEP,
    REVIEW_OPTIONS,
    UNANSWERED,
    build_review_requests,
    rule_of_subject,
)
from affiliate_network.review.window import ReviewWindow, review_window

if TYPE_CHECKING:
    from airflow.sdk import Context

    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
    from affiliate_network.review.engine import Evaluation, RuleSet

#: Fields copied from a conversion into the audit so a reviewer sees what was decided.
_AUDIT_FIELDS = ("payout", "sale_amount", "conversion_unix_timestamp")
#: Fields and relationship members kept from each pulled conversion besides what rules read.
_KEEP_FIELDS = ("conversion_id", "transaction_id", "currency_id", *_AUDIT_FIELDS)
_KEEP_MEMBERS = ("on_hold_snapshots", "affiliate", "offer")


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
    :param full_pull: pull the whole window instead of the snapshot plus what is new
        (templated; the snapshot is rewritten from it).
    """

    template_fields: Sequence[str] = (
        "rules_file",
        "to_date",
        "as_of",
        "dry_run",
        "base_path",
        "full_pull",
    )
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
        full_pull: bool | str = False,
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
        if max_reject_share is not None and not 0 <= max_reject_share <= 1:
            raise ConfigValidationError(
                f"max_reject_share must be in [0, 1], got {max_reject_share}"
            )
        if max_reject_count is not None and max_reject_count < 0:
            raise ConfigValidationError(f"max_reject_count must be >= 0, got {max_reject_count}")
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
        self.full_pull = full_pull

    # -- helpers --------------------------------------------------------------------------------

    def _rules_path(self) -> Path:
        path = Path(self.rules_file)
        return path if path.is_absolute() else include_dir() / path

    def _window(self, horizon_hours: float) -> ReviewWindow:
        return review_window(
            timezone_id=self.timezone_id,
            lookback_days=self.lookback_days,
            to_date=self.to_date,
            as_of=self.as_of,
            horizon_hours=horizon_hours,
        )

    def _pull_traffic(
        self, hook: AffiliateNetworkHook, ruleset: RuleSet, window: ReviewWindow, base: str
    ) -> list[dict[str, Any]]:
        """Every conversion of the window and its look-back, whatever its on-hold state,
        projected to what rules and audit need (aggregates count all of them): the snapshot
        kept beside the audit plus what is new (:mod:`affiliate_network.review.traffic`)."""
        from affiliate_network.review.human_decisions import state_dir
        from affiliate_network.review.traffic import (
            TrafficSnapshotStore,
            pull_review_traffic,
            traffic_snapshot_path,
        )

        state = state_dir(base, self.affiliate_network_conn_id)
        pull = pull_review_traffic(
            hook,
            window=window,
            fields={*(p.split(".", 1)[0] for p in ruleset.prefetch), *_KEEP_FIELDS},
            members={*ruleset.relationship_members(), *_KEEP_MEMBERS},
            store=TrafficSnapshotStore(traffic_snapshot_path(state, window.timezone_id)),
            page_size=self.page_size,
            full=as_bool(self.full_pull, "full_pull"),
            log=self.log,
        )
        self._traffic = pull.summary()
        return pull.records

    def _eligible(
        self, records: list[dict[str, Any]], window: ReviewWindow, horizon_hours: float
    ) -> tuple[list[int], int]:
        """Positions to decide (on hold, in the window, old enough) and how many on hold."""
        now = window.as_of_ts
        min_age_s = self.min_age_hours * 3600
        horizon_s = horizon_hours * 3600
        eligible: list[int] = []
        on_hold = 0
        for i, record in enumerate(records):
            if on_hold_status(record) != ON_HOLD or not on_hold_conversion_id(record):
                continue
            at = record.get("conversion_unix_timestamp")
            if (
                not isinstance(at, int | float)
                or not window.decide_from_ts <= at < window.decide_to_ts
            ):
                continue  # look-back traffic: counted in aggregates, decided by its own window
            on_hold += 1
            if now - (on_hold_since(record) or now) < min_age_s or now - at < horizon_s:
                continue
            eligible.append(i)
        return eligible, on_hold

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

    def _guardrails(self, evaluation: Evaluation, records: list[dict[str, Any]]) -> None:
        """Ceilings checked before the first write.

        The reject share is rejections / conversions a rule decided (matched), undecided ones
        left out: the stricter of the two readings (a smaller denominator, a larger share), so
        a rules change that rejects most of what it matches trips the guardrail even when many
        conversions match no rule.
        """
        rejects = [d for d in evaluation.decisions if d.action == "reject"]
        decided = len(evaluation.decisions)
        problems = []
        if self.max_reject_count is not None and len(rejects) > self.max_reject_count:
            problems.append(f"{len(rejects)} rejections > max_reject_count {self.max_reject_count}")
        share = len(rejects) / decided if decided else 0.0
        if self.max_reject_share is not None and share > self.max_reject_share:
            problems.append(
                f"reject share {share:.1%} ({len(rejects)}/{decided} decided) > max_reject_share "
                f"{self.max_reject_share:.1%}"
            )
        if self.max_approved_payout is not None:
            payout = sum(
                float(records[d.index].get("payout") or 0)
                for d in evaluation.decisions
                if d.action == "approve"
            )
            if payout > self.max_approved_payout:
                problems.append(
                    f"approved payout {payout:.2f} > max_approved_payout "
                    f"{self.max_approved_payout:.2f}"
                )
        if problems:
            top = Counter(d.rule_id for d in rejects).most_common(5)
            top_text = ", ".join(f"{rule} ({n})" for rule, n in top) or "none"
            raise GuardrailError(
                "On-hold review stopped before any write: "
                + "; ".join(problems)
                + f". Top rejecting rules: {top_text}. Check those rules (or the traffic), then "
                "rerun; raise the ceiling only if the volume is expected."
            )

    def _apply_sticky_keeps(self, rows: list[dict], state: ObjectStoragePath, now: float) -> int:
        """Turn ``review`` rows a person recently kept on hold (same data) into ``hold``."""
        from affiliate_network.review.human_decisions import HumanDecisions

        store = HumanDecisions(state).load()
        kept = 0
        for row in rows:
            if row["action"] != "review":
                continue
            rec = store.kept(row, now=now, keep_hours=self.keep_decision_hours)
            if rec is None:
                continue
            until = dt.datetime.fromtimestamp(
                float(rec["decided_at"]) + self.keep_decision_hours * 3600, dt.UTC
            )
            row["action"] = "hold"
            row["hold_reason"] = (
                f"kept on hold by {rec.get('responded_by') or 'a reviewer'} (run "
                f"{rec.get('run_id')}); not asked again before {until:%Y-%m-%d %H:%M} UTC "
                "unless its data changes"
            )
            kept += 1
        return kept

    # -- execute --------------------------------------------------------------------------------

    def execute_job(self, context: Context) -> dict[str, Any]:
        from affiliate_network.review.engine import RuleSet
        from affiliate_network.review.human_decisions import state_dir
        from affiliate_network.review.lease import WriteLease, lease_path

        dry_run = self._dry_run(context)
        check_reject_status(self.reject_status)
        rules_path = self._rules_path()
        ruleset = RuleSet.from_file(rules_path)  # validation happens before anything is pulled
        self.log.info("Rules %s: %d enabled rules", rules_path, len(ruleset.compiled))
        horizon = ruleset.horizon_hours
        window = self._window(horizon)
        base = resolve_data_base(self.base_path)
        hook = self.hook
        started = time.monotonic()
        records = self._pull_traffic(hook, ruleset, window, base)
        eligible, on_hold = self._eligible(records, window, horizon)
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
        rows = self._audit_rows(records, evaluation, ruleset)
        # Wall-clock time: how long ago a person answered (as_of only moves the traffic view).
        sticky = self._apply_sticky_keeps(rows, state, time.time())

        outcome_by_id: dict[str, tuple[bool, str]] = {}
        approve_ids = [r["on_hold_conversion_id"] for r in rows if r["action"] == "approve"]
        reject_ids = [r["on_hold_conversion_id"] for r in rows if r["action"] == "reject"]
        guardrail: str | None = None
        try:
            self._guardrails(evaluation, records)
        except GuardrailError as err:
            if not dry_run:
                self._finish_rows(rows, {}, "guardrail tripped: nothing written")
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
            self._finish_rows(rows, {}, reason)
        elif approve_ids or reject_ids:
            # Intentions first: if the task dies mid-apply the audit shows what was planned.
            self._finish_rows(rows, {}, "pending: not yet applied")
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
                    self._finish_rows(
                        rows, outcome_by_id, f"not applied: failed ({type(err).__name__})"
                    )
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
            self._finish_rows(rows, outcome_by_id, "not applied")
        else:
            self._finish_rows(rows, {}, "not applied")
        count = write_jsonl_atomic(audit_path, rows)
        self.log.info("Audit: %d decisions -> %s", count, audit_path)

        per_action = Counter(r["action"] for r in rows)
        return {
            "window": [window.decide_from, window.to_date],
            "as_of": window.as_of,
            "timezone_id": window.timezone_id,
            "pulled": len(records),
            "traffic": self._traffic,  # full or incremental, rows asked of the API
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

    def _audit_rows(
        self, records: list[dict[str, Any]], evaluation: Evaluation, ruleset: RuleSet
    ) -> list[dict]:
        descriptions = {rule.id: rule.description for rule in ruleset.rules}
        rows = []
        for decision in evaluation.decisions:
            record = records[decision.index]
            rel = record.get("relationship") or {}
            affiliate = rel.get("affiliate") or {}
            offer = rel.get("offer") or {}
            row = {
                "conversion_id": record.get("conversion_id"),
                "on_hold_conversion_id": on_hold_conversion_id(record),
                "rule_id": decision.rule_id,
                "rule_description": descriptions.get(decision.rule_id, ""),
                "action": decision.action,
                "matched": decision.matched,
                "affiliate_id": affiliate.get("network_affiliate_id"),
                "affiliate_name": affiliate.get("name"),
                "offer_id": offer.get("network_offer_id"),
                "offer_name": offer.get("name"),
                "currency_id": record.get("currency_id"),
            }
            for key in _AUDIT_FIELDS:
                row[key] = record.get(key)
            rows.append(row)
        return rows

    def _finish_rows(
        self, rows: list[dict], outcomes: dict[str, tuple[bool, str]], default_reason: str
    ) -> None:
        for row in rows:
            action = row["action"]
            if action == "review":
                row["applied"], row["reason"] = False, "waiting for a human decision"
            elif action == "hold":
                row["applied"] = False
                row["reason"] = row.get("hold_reason") or "rule says keep on hold"
            elif row["on_hold_conversion_id"] in outcomes:
                row["applied"], row["reason"] = outcomes[row["on_hold_conversion_id"]]
            else:
                row["applied"], row["reason"] = False, default_reason


# ---------------------------------------------------------------------------------------------
# Human in the loop
# ---------------------------------------------------------------------------------------------


class OnHoldReviewApplyOperator(AffiliateNetworkBaseOperator):
    """Apply the reviewers' choices: approve, reject or keep on hold, per rule.

    Only the exact options write: "Approve all" approves, "Reject all" rejects. "Keep on hold"
    keeps, and is remembered (who, when, which rule, which ids) so the next runs do not ask
    again for ``keep_decision_hours`` unless the data changes. Any other answer (a renamed
    option, an empty or missing answer, a timeout without a person) keeps the conversions on
    hold, is logged, and is asked again next time.

    Safe to rerun: writes hold the network's write lease, every id is re-checked right before
    its chunk and only ids still on hold are sent, so nothing is approved or rejected twice.

    :param summary: the review operator's summary (templated XCom: ``audit_path``, window).
    :param requests: the requests shown to reviewers (from :func:`build_review_requests`), in
        map-index order.
    :param responses: the human-in-the-loop operators' results, in the same order (each with
        ``chosen_options``, ``params_input`` and ``responded_by_user``).
    :param affiliate_network_conn_id: network-portal connection.
    :param reject_status: PATCH status for rejections.
    :param chunk_size: on-hold ids per PATCH.
    :param timezone_id: the API's timezone id of the window (default: the review's).
    :param lease_wait_minutes: how long to wait for another run's write lease.
    """

    template_fields: Sequence[str] = ("summary", "requests", "responses")

    def __init__(
        self,
        *,
        summary: Any,
        requests: Any,
        responses: Any,
        affiliate_network_conn_id: str = "affiliate_network_default",
        reject_status: str = DEFAULT_REJECT_STATUS,
        chunk_size: int = 100,
        timezone_id: int | None = None,
        lease_wait_minutes: float = 35.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if not 1 <= chunk_size <= 2000:
            raise ConfigValidationError(f"chunk_size must be between 1 and 2000, got {chunk_size}")
        self.summary = summary
        self.requests = requests
        self.responses = responses
        self.affiliate_network_conn_id = affiliate_network_conn_id
        self.reject_status = reject_status
        self.chunk_size = chunk_size
        self.timezone_id = timezone_id
        self.lease_wait_minutes = lease_wait_minutes

    def _plan(
        self, requests: list[dict], responses: list[Any], rows: list[dict]
    ) -> tuple[dict[str, list[str]], dict[str, tuple[str, str]]]:
        """Status -> on-hold ids to send, and on-hold id -> (choice, responder)."""
        plan: dict[str, list[str]] = {APPROVED: [], self.reject_status: []}
        decided: dict[str, tuple[str, str]] = {}
        for request, response in zip(requests, responses, strict=True):
            rule_id = rule_of_subject(request["subject"])
            response = response if isinstance(response, dict) else {}
            chosen = response.get("chosen_options") or []
            params = response.get("params_input") or {}
            keep = set(re.split(r"[\s,;]+", str(params.get(KEEP_PARAM) or "").strip())) - {""}
            who = response.get("responded_by_user")
            who_name = (who.get("name") or who.get("id")) if isinstance(who, dict) else who
            choice = chosen[0] if len(chosen) == 1 and isinstance(chosen[0], str) else None
            if choice not in REVIEW_OPTIONS:
                # Only the exact options write; anything else changes nothing and is asked again.
                self.log.warning(
                    "Rule %s: unexpected answer %r from %s: nothing written, the conversions "
                    "stay on hold and are asked about again next run (options: %s)",
                    rule_id,
                    chosen,
                    who_name or "nobody",
                    REVIEW_OPTIONS,
                )
                choice = UNANSWERED
            self.log.info(
                "Rule %s: %s chose %r (keep on hold: %d)", rule_id, who_name, choice, len(keep)
            )
            for row in rows:
                if row["rule_id"] != rule_id:
                    continue
                oh_id = row["on_hold_conversion_id"]
                if choice in (OPTION_KEEP, UNANSWERED) or row["conversion_id"] in keep:
                    decided[oh_id] = (
                        UNANSWERED if choice == UNANSWERED else OPTION_KEEP,
                        str(who_name or ""),
                    )
                    continue
                status = APPROVED if choice == OPTION_APPROVE else self.reject_status
                plan[status].append(oh_id)
                decided[oh_id] = (choice, str(who_name or ""))
        return plan, decided

    def execute_job(self, context: Context) -> dict[str, Any]:
        from affiliate_network.review.human_decisions import HumanDecisions
        from affiliate_network.review.lease import WriteLease, lease_path

        check_reject_status(self.reject_status)
        summary = self.summary or {}
        requests = list(self.requests or [])
        responses = list(self.responses or [])
        if not requests or summary.get("dry_run"):
            self.log.info("No human review requests in this run.")
            return {"requests": 0, "applied": {}, "audit_path": None}
        if len(responses) != len(requests):
            raise AffiliateNetworkError(
                f"{len(requests)} review requests but {len(responses)} responses"
            )
        rows = [r for r in read_jsonl(summary["audit_path"]) if r["action"] == "review"]
        plan, decided = self._plan(requests, responses, rows)
        window = summary.get("window") or [None, None]
        run_id = str((context or {}).get("run_id") or "manual")
        folder = ObjectStoragePath(str(summary["audit_path"])).parent
        base = str(folder.parent.parent.parent)  # <base>/onhold_review/<dag>/<run>/
        applied: dict[str, int] = {}
        outcomes: dict[str, tuple[bool, str]] = {}
        mismatches = 0
        hook = self.hook
        lease = WriteLease(
            lease_path(base, self.affiliate_network_conn_id), f"{self.dag_id}/{run_id}"
        )
        try:
            if any(plan.values()):
                lease.acquire(wait_s=self.lease_wait_minutes * 60, log=self.log)
            writer = OnHoldWriter(
                hook,
                from_date=window[0],
                to_date=window[1],
                timezone_id=self.timezone_id or summary.get("timezone_id") or _network_tz_id(),
                chunk_size=self.chunk_size,
                log=self.log,
                on_chunk=lease.renew,
            )
            per_status: dict[str, ApplyOutcome] = {}
            for status, ids in plan.items():
                if ids:
                    per_status[status] = writer.apply(ids, status)
                    applied[status] = len(per_status[status].applied)
                    mismatches += len(per_status[status].mismatches)
            outcome_reasons(per_status, outcomes)
            now = time.time()
            human_rows = []
            for row in rows:
                oh_id = row["on_hold_conversion_id"]
                if oh_id not in decided:
                    continue
                choice, who_name = decided[oh_id]
                default = "kept on hold by reviewer" if choice == OPTION_KEEP else (
                    "no valid answer: kept on hold, asked again next run"
                )  # fmt: skip
                ok, why = outcomes.get(oh_id, (False, default))
                human_rows.append(
                    {
                        **row,
                        "human_choice": choice,
                        "responded_by": who_name,
                        "decided_at": now,
                        "run_id": run_id,
                        "applied": ok,
                        "reason": why,
                    }
                )
            # Remember the answers (under the lease): a conversion a person kept on hold is not
            # asked again soon. A timeout (defaults, no person) is not a decision to remember.
            state = summary.get("state_dir")
            answered = [
                {**r, "choice": r["human_choice"]}
                for r in human_rows
                if r["human_choice"] != UNANSWERED
                and (r["responded_by"] or r["human_choice"] != OPTION_KEEP)
            ]
            if state and answered:
                HumanDecisions(ObjectStoragePath(str(state))).load().record(answered)
        finally:
            lease.release()
        ti = (context or {}).get("ti")
        attempt = getattr(ti, "try_number", None) or 1
        audit_path = folder / f"human-attempt-{attempt}.jsonl"
        write_jsonl_atomic(audit_path, human_rows)
        return {
            "requests": len(requests),
            "applied": applied,
            "kept_on_hold": sum(1 for c, _ in decided.values() if c == OPTION_KEEP),
            "unanswered": sum(1 for c, _ in decided.values() if c == UNANSWERED),
            "readback_mismatches": mismatches,
            "audit_path": str(audit_path),
        }


def _network_tz_id() -> int:
    from affiliate_network.settings import load_network_settings

    return load_network_settings().timezone_id


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
