"""The on-hold review's human-in-the-loop step: apply the reviewers' choices.

Used by the ``affiliate_onhold_review`` DAG after its ``human_review`` tasks; re-exported from
:mod:`affiliate_network.operators.onhold_review`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import ObjectStoragePath

from affiliate_network.exceptions import AffiliateNetworkError, ConfigValidationError
from affiliate_network.operators.base import AffiliateNetworkBaseOperator
from affiliate_network.review.apply import (
    APPROVED,
    DEFAULT_REJECT_STATUS,
    ApplyOutcome,
    OnHoldWriter,
    check_reject_status,
    outcome_reasons,
)
from affiliate_network.review.audit import read_jsonl, write_jsonl_atomic
from affiliate_network.review.requests import (
    KEEP_PARAM,
    OPTION_APPROVE,
    OPTION_KEEP,
    REVIEW_OPTIONS,
    UNANSWERED,
    rule_of_subject,
)

if TYPE_CHECKING:
    from airflow.sdk import Context


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


__all__ = ["OnHoldReviewApplyOperator"]
