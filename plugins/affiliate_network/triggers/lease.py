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
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from affiliate_network.review.lease import WriteLease, lease_path

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
