"""Wait in the triggerer for another run's on-hold write lease (its module: ``review.lease``).

The lease record is only read (:meth:`WriteLease.read`, in a thread: the file or object-store
read blocks), never written: taking the lease stays the task's business when it resumes. The
trigger fires one event when trying again is worth a worker slot:

* ``free``: there is no record any more (its holder released it);
* ``changed``: the record is another holder's than the one waited for (it may be free again by
  the time the task looks, or taken by a third run: the task then waits again);
* ``stale``: the record stayed the same for ``stale_s`` (its holder renews it after every chunk,
  so it has stopped: a holder that died lets go of a local lease at once, and on object storage
  the task's own rules decide when it may take it over);
* ``timeout``: ``wait_s`` went by (the task then gives up with ``LeaseBusyError``, as after a
  wait in the worker).

Durations are measured by the triggerer's own monotonic clock; no wall clock of another host is
compared with it.

:func:`write_when_the_lease_allows` is the operators' side of the wait (the review and the human
step both write under the lease): wait in the worker up to ``defer_after_s``, then defer to this
trigger, and on resuming look at the lease before doing anything else.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any, NoReturn, Protocol, TypeVar

from airflow.triggers.base import BaseTrigger, TriggerEvent

from affiliate_network.exceptions import LeaseBusyError
from affiliate_network.review.lease import WriteLease, lease_path

_T = TypeVar("_T")


class _Network(Protocol):
    @property
    def slug(self) -> str: ...


class _NetworkHook(Protocol):
    @property
    def network(self) -> _Network: ...


class DeferringOperator(Protocol):
    """What :func:`write_when_the_lease_allows` uses of an operator (the package's base
    operator has it all; nothing below the operators imports them)."""

    deferrable: bool
    defer_after_s: float
    resumed_with: dict[str, Any] | None

    @property
    def hook(self) -> _NetworkHook: ...

    def wait_deferred(
        self, trigger: BaseTrigger, *, why: str, kwargs: dict[str, Any] | None = None
    ) -> NoReturn: ...


#: Seconds between two reads of the lease record.
DEFAULT_POLL_S = 5.0


class WriteLeaseTrigger(BaseTrigger):
    """Fires when the write lease that ``holder_token`` holds may have been let go.

    :param base: data base of the review (``<base>/onhold_review/_leases/...``).
    :param conn_id: the network's connection id (one lease per network).
    :param owner: ``dag_id/run_id`` of the waiting run.
    :param holder_token: ``token`` of the record seen busy (``None``: any record is waited on).
    :param wait_s: longest wait (seconds, this trigger's clock).
    :param stale_s: a record unchanged this long is stale (the lease's ``ttl_s``).
    :param poll_s: seconds between two reads.
    """

    def __init__(
        self,
        *,
        base: str,
        conn_id: str,
        owner: str,
        holder_token: str | None,
        wait_s: float,
        stale_s: float,
        poll_s: float = DEFAULT_POLL_S,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # Airflow's base is untyped
        self.base = base
        self.conn_id = conn_id
        self.owner = owner
        self.holder_token = holder_token
        self.wait_s = float(wait_s)
        self.stale_s = float(stale_s)
        self.poll_s = float(poll_s)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "base": self.base,
                "conn_id": self.conn_id,
                "owner": self.owner,
                "holder_token": self.holder_token,
                "wait_s": self.wait_s,
                "stale_s": self.stale_s,
                "poll_s": self.poll_s,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        lease = WriteLease(lease_path(self.base, self.conn_id), self.owner)
        loop = asyncio.get_running_loop()
        started = loop.time()
        seen: str | None = None
        seen_since = started
        while True:
            record = await asyncio.to_thread(lease.read)
            now = loop.time()
            status = None
            if record is None:
                status = "free"
            elif self.holder_token is not None and record.get("token") != self.holder_token:
                status = "changed"
            else:
                text = json.dumps(record, sort_keys=True)
                if text != seen:
                    seen, seen_since = text, now
                elif now - seen_since >= self.stale_s:
                    status = "stale"
            if status is None and now - started >= self.wait_s:
                status = "timeout"
            if status is not None:
                holder = None if record is None else record.get("owner")
                self.log.info("Write lease %s: %s (holder %s)", lease.path, status, holder)
                yield TriggerEvent(  # type: ignore[no-untyped-call]
                    {"status": status, "waited_s": round(now - started, 3), "holder": holder}
                )
                return
            await asyncio.sleep(max(0.0, min(self.poll_s, started + self.wait_s - now)))


def write_when_the_lease_allows(
    operator: DeferringOperator,
    *,
    base: str,
    owner: str,
    wait_minutes: float,
    write: Callable[[float], _T],
) -> _T:
    """``write(minutes)``, where ``minutes`` is how long ``write`` may wait for the write lease.

    Not deferrable: ``write(wait_minutes)``, the whole wait in the worker. Deferrable: ``write``
    waits in the worker up to the operator's ``defer_after_s``; the lease still busy then, the
    task defers to :class:`WriteLeaseTrigger` for what is left of ``wait_minutes`` (the worker
    slot is free meanwhile) and runs again from the start when it fires. A resumed task first
    looks whether the lease is free (taking it and giving it back at once) and defers again,
    having done nothing else, while it is not.

    ``write`` must raise :class:`LeaseBusyError` only while nothing was written (the lease is
    taken before the first write), so running it again from the start is safe.

    :param operator: the deferring operator (its ``hook`` names the network, one lease per
        network whatever the connection; its ``resumed_with`` says what the trigger saw).
    :param base: data base of the review (where the lease lives).
    :param owner: ``dag_id/run_id`` of this run (the lease's owner).
    :param wait_minutes: longest wait for the lease in all (worker and triggerer).
    :param write: the work, given the minutes it may wait for the lease in the worker.
    :raises LeaseBusyError: the lease stayed busy for ``wait_minutes`` in all.
    """
    if not operator.deferrable:
        return write(wait_minutes)
    left_s = wait_minutes * 60
    network = operator.hook.network.slug
    lease = WriteLease(lease_path(base, network), owner)
    resumed = operator.resumed_with or {}
    if "lease_wait_left_s" in resumed:
        event = resumed.get("event") or {}
        left_s = float(resumed["lease_wait_left_s"]) - float(event.get("waited_s") or 0)
        try:
            lease.acquire(wait_s=0)
        except LeaseBusyError:
            if left_s <= 0:
                raise
            _defer_for_lease(operator, lease, base, network, owner, left_s)
        finally:
            lease.release()
    in_worker_s = min(left_s, operator.defer_after_s)
    try:
        return write(in_worker_s / 60)
    except LeaseBusyError:
        if left_s - in_worker_s <= 0:
            raise
        _defer_for_lease(operator, lease, base, network, owner, left_s - in_worker_s)


def _defer_for_lease(
    operator: DeferringOperator,
    lease: WriteLease,
    base: str,
    network: str,
    owner: str,
    left_s: float,
) -> NoReturn:
    holder = lease.read() or {}
    trigger = WriteLeaseTrigger(
        base=base,
        conn_id=network,  # the trigger reads lease_path(base, this)
        owner=owner,
        holder_token=holder.get("token"),
        wait_s=left_s,
        stale_s=lease.ttl_s,
    )
    operator.wait_deferred(
        trigger,
        why=f"Write lease held by {holder.get('owner', 'another run')}",
        kwargs={"lease_wait_left_s": round(left_s, 3)},
    )
