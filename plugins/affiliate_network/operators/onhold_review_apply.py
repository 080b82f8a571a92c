"""The on-hold review's human-in-the-loop step: apply the reviewers' choices.

A thin adapter over :func:`affiliate_network.review.human_apply.apply_human_choices`, used by the
``affiliate_onhold_review`` DAG after its ``human_review`` tasks; re-exported from
:mod:`affiliate_network.operators.onhold_review`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from affiliate_network.operators.base import (
    DEFER_AFTER_S,
    AffiliateNetworkBaseOperator,
    deferral_settings,
)
from affiliate_network.operators.lineage import (
    CONVERSIONS_ENDPOINT,
    ONHOLD_ENDPOINT,
    OpenLineageMixin,
    api_endpoint_dataset,
    storage_dataset,
)
from affiliate_network.review.options import (
    ARMED_VARIABLE,
    DEFAULT_REJECT_STATUS,
    check_chunk_size,
    check_reject_status,
    review_armed,
)

if TYPE_CHECKING:
    from airflow.sdk import Context

    from affiliate_network.review.human_apply import HumanApplyResult


class OnHoldReviewApplyOperator(AffiliateNetworkBaseOperator, OpenLineageMixin):
    """Apply the reviewers' choices: approve, reject or keep on hold, per rule.

    Only the exact options write: "Approve all" approves, "Reject all" rejects. "Keep on hold"
    keeps, and is remembered (who, when, which rule, which ids) so the next runs do not ask
    again for ``keep_decision_hours`` unless the data changes. Any other answer (a renamed
    option, an empty or missing answer, a timeout without a person) keeps the conversions on
    hold, is logged, and is asked again next time.

    ``keep_on_hold`` ids are matched without regard to case, a conversion's on-hold id naming it
    too. An id matching none of a request's conversions writes nothing of that request (its
    conversions stay on hold and are asked again next run); after the other requests are
    applied the task fails with ``InvalidRequestError`` naming the ids (a rerun meets the same
    answer, so it fails without retries).

    Safe to rerun: writes hold the network's write lease, every id is re-checked right before
    its chunk and only ids still on hold are sent, so nothing is approved or rejected twice.
    Another run's lease is waited for as in the review: in the worker up to ``defer_after_s``,
    then, when deferrable, in the triggerer (the worker slot is free meanwhile).

    Lineage (OpenLineage provider, optional): inputs the review's audit file and the conversion
    report endpoint (the re-check); outputs this step's audit file and, when it wrote, the
    on-hold endpoint.

    :param summary: the review operator's summary (templated XCom): its ``run`` is the run's
        identity, read back whole (:class:`~affiliate_network.review.identity.RunIdentity`);
        its ``review_settings`` the rules file's ``reject_status`` and ``chunk_size``.
    :param requests: the requests shown to reviewers, in map-index order (from
        :func:`affiliate_network.review.human_requests.build_review_requests`).
    :param responses: the human-in-the-loop operators' results, in the same order (each with
        ``chosen_options``, ``params_input`` and ``responded_by_user``).
    :param affiliate_network_conn_id: network-portal connection.
    :param timezone_id: ignored (the review's run identity names its window's timezone); kept
        so DAG files that pass it still parse. A value other than the review's is logged.
    :param lease_wait_minutes: how long to wait for another run's write lease.
    :param deferrable: wait for another run's write lease in the triggerer once the wait passes
        ``defer_after_s``; default: the deployment's ``[operators] default_deferrable``.
    :param defer_after_s: seconds a deferrable task waits for the lease in the worker before it
        defers (default 60).
    """

    template_fields: Sequence[str] = ("summary", "requests", "responses")

    def __init__(
        self,
        *,
        summary: Any,
        requests: Any,
        responses: Any,
        affiliate_network_conn_id: str = "affiliate_network_default",
        timezone_id: int | None = None,
        lease_wait_minutes: float = 35.0,
        deferrable: bool | str | None = None,
        defer_after_s: float = DEFER_AFTER_S,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.deferrable, self.defer_after_s = deferral_settings(deferrable, defer_after_s)
        self.summary = summary
        self.requests = requests
        self.responses = responses
        self.affiliate_network_conn_id = affiliate_network_conn_id
        self.timezone_id = timezone_id
        self.lease_wait_minutes = lease_wait_minutes

    def execute_job(self, context: Context) -> dict[str, Any]:
        from affiliate_network.review.human_apply import apply_human_choices
        from affiliate_network.review.identity import RunIdentity
        from affiliate_network.triggers.lease import write_when_the_lease_allows

        self.reset_lineage()
        summary = self.summary or {}
        settings = summary.get("review_settings") or {}
        reject_status = settings.get("reject_status", DEFAULT_REJECT_STATUS)
        check_reject_status(reject_status)
        chunk_size = settings.get("chunk_size", 100)
        check_chunk_size(chunk_size)
        requests = list(self.requests or [])
        if not requests or summary.get("dry_run"):
            self.log.info("No human review requests in this run.")
            return {"requests": 0, "applied": {}, "audit_path": None}
        if not review_armed():  # disarmed since the review ran: the answers wait
            self.log.warning(
                "Not armed: this deployment does not set %s=true, so the %d answered "
                "request(s) are not applied; nothing is written to the network and the next "
                "armed run asks again.",
                ARMED_VARIABLE,
                len(requests),
            )
            return {"requests": 0, "applied": {}, "audit_path": None}
        ti = (context or {}).get("ti")
        identity = RunIdentity.from_summary(summary)
        if self.timezone_id is not None and int(self.timezone_id) != identity.timezone_id:
            self.log.warning(
                "timezone_id %s ignored: the review's window is in timezone %s",
                self.timezone_id,
                identity.timezone_id,
            )
        responses = list(self.responses or [])
        attempt = getattr(ti, "try_number", None) or 1
        result = write_when_the_lease_allows(
            self,
            base=identity.run.base,
            owner=identity.run.owner,
            wait_minutes=self.lease_wait_minutes,
            write=lambda minutes: apply_human_choices(
                self.hook,
                identity,
                requests,
                responses,
                attempt=attempt,
                reject_status=reject_status,
                chunk_size=chunk_size,
                lease_wait_minutes=minutes,
                log=self.log,
            ),
        )
        self._record_apply_lineage(summary, result)
        return {
            "requests": result.requests,
            "applied": result.applied,
            "kept_on_hold": result.kept_on_hold,
            "unanswered": result.unanswered,
            "readback_mismatches": result.readback_mismatches,
            "accepted_not_landed": result.accepted_not_landed,
            "audit_path": str(result.audit_path),
        }

    def _record_apply_lineage(self, summary: dict[str, Any], result: HumanApplyResult) -> None:
        """Lineage: the review's audit and the re-check read; this audit (and PATCHes) written."""
        base_url = self.hook.base_url
        inputs = [api_endpoint_dataset(base_url, CONVERSIONS_ENDPOINT)]
        if summary.get("audit_path"):
            inputs.insert(0, storage_dataset(str(summary["audit_path"])))
        outputs = [storage_dataset(str(result.audit_path))]
        sent = sum(result.applied.values()) + result.readback_mismatches
        if sent + result.accepted_not_landed:  # PATCH requests were sent
            outputs.append(api_endpoint_dataset(base_url, ONHOLD_ENDPOINT))
        self.record_lineage(inputs=inputs, outputs=outputs)


__all__ = ["OnHoldReviewApplyOperator"]
