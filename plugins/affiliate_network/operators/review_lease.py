"""The review operator's wait for the network's write lease, in the worker or deferred.

Apart from :mod:`.onhold_review` so that the operator module stays the adapter: arguments, one
call into :mod:`affiliate_network.review`, a summary.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from affiliate_network.operators.onhold_review import OnHoldReviewOperator
    from affiliate_network.review.job import ReviewResult, ReviewRun
    from affiliate_network.review.lease import WriteLease
    from affiliate_network.review.options import ReviewOptions

__all__ = ["review_when_the_lease_allows"]


def review_when_the_lease_allows(
    op: OnHoldReviewOperator,
    run: ReviewRun,
    dry_run: bool,
    options: ReviewOptions,
    review: Callable[[ReviewOptions], ReviewResult],
) -> ReviewResult:
    """``review(options)``; when ``op`` is deferrable, a long wait for the write lease is deferred.

    The review waits for another run's lease in the worker up to ``defer_after_s``; still
    busy then, the task defers to :class:`~affiliate_network.triggers.lease.WriteLeaseTrigger`
    for what is left of ``lease_wait_minutes`` and runs again when it fires. A resumed task
    first looks whether the lease is free (taking and giving it back at once) and defers
    again without pulling anything while it is not.

    :raises LeaseBusyError: the lease stayed busy for ``lease_wait_minutes`` in all.
    """
    from affiliate_network.exceptions import LeaseBusyError
    from affiliate_network.review.lease import WriteLease, lease_path

    if not op.deferrable or dry_run:  # a dry run never takes the lease
        return review(options)
    left_s = options.lease_wait_minutes * 60
    # The lease the writer takes (review.apply): one per network, whatever the connection.
    lease = WriteLease(lease_path(run.base, op.hook.network.slug), run.owner)
    resumed = op.resumed_with or {}
    if "lease_wait_left_s" in resumed:
        event = resumed.get("event") or {}
        left_s = float(resumed["lease_wait_left_s"]) - float(event.get("waited_s") or 0)
        try:
            lease.acquire(wait_s=0)
        except LeaseBusyError:
            if left_s <= 0:
                raise
            _defer_for_lease(op, lease, run, left_s)
        finally:
            lease.release()
    in_worker_s = min(left_s, op.defer_after_s)
    try:
        return review(dataclasses.replace(options, lease_wait_minutes=in_worker_s / 60))
    except LeaseBusyError:
        if left_s - in_worker_s <= 0:
            raise
        _defer_for_lease(op, lease, run, left_s - in_worker_s)


def _defer_for_lease(
    op: OnHoldReviewOperator, lease: WriteLease, run: ReviewRun, left_s: float
) -> NoReturn:
    from affiliate_network.triggers.lease import WriteLeaseTrigger

    holder = lease.read() or {}
    trigger = WriteLeaseTrigger(
        base=run.base,
        conn_id=op.hook.network.slug,  # the trigger reads lease_path(base, this)
        owner=run.owner,
        holder_token=holder.get("token"),
        wait_s=left_s,
        stale_s=lease.ttl_s,
    )
    op.wait_deferred(
        trigger,
        why=f"Write lease held by {holder.get('owner', 'another run')}",
        kwargs={"lease_wait_left_s": round(left_s, 3)},
    )
