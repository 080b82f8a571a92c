"""Writing on-hold statuses safely: re-check right before each chunk, PATCH, read back.

Runs without Airflow's task context: give it a hook (or anything with the same methods).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING

from affiliate_network.helpers.tasklog import TaskLog
from affiliate_network.review.onhold_lookup import chunked, iter_on_hold_rows
from affiliate_network.review.options import DEFAULT_READBACK_WAIT_S, check_readback_wait
from affiliate_network.rules.fields import on_hold_status

if TYPE_CHECKING:
    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
    from affiliate_network.review.identity import RunIdentity

ON_HOLD = "on_hold"
#: First pause between read-backs, doubled up to the cap (a poll costs a search per chunk).
_POLL_FIRST_S = 0.25
_POLL_CAP_S = 2.0


@dataclass
class ApplyOutcome:
    """What happened to each on-hold id handed to :class:`OnHoldWriter`.

    The read-back decides: an id is ``applied`` only when reading it back shows the status
    sent, whatever the PATCH call returned (it may time out after landing, or report success
    before the change is visible: the API applies status updates asynchronously).

    :param applied: on-hold id -> status, confirmed by the read-back.
    :param skipped: on-hold id -> why it was not sent (e.g. ``no longer on hold: approved``).
    :param mismatches: on-hold id -> state read back after the PATCH when it is neither the
        status sent nor ``on_hold`` (someone else decided it), or ``None`` (not found).
    :param not_landed: on-hold id -> why: accepted by the API but still on hold after the
        read-back wait (late, or lost: the next run decides it again from the traffic).
    :param pending: ids accepted and not yet seen landed (empty once the writer has settled).
    :param unknown: on-hold id -> why the outcome is unknown (the PATCH failed and the read-back
        failed too).
    :param chunks: PATCH requests sent.
    """

    applied: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    mismatches: dict[str, str | None] = field(default_factory=dict)
    not_landed: dict[str, str] = field(default_factory=dict)
    pending: dict[str, None] = field(default_factory=dict)
    unknown: dict[str, str] = field(default_factory=dict)
    chunks: int = 0


@dataclass(eq=False)
class OnHoldWriter:
    """Applies statuses to on-hold ids, never sending an id that is no longer on hold, nor one
    id twice (one writer is one run).

    An id counts as applied only when a read-back shows it. The API applies status updates
    asynchronously, so ids not visible right after their chunk are read back again, with
    backoff, for up to ``readback_wait_s``; what is still on hold then is recorded as accepted
    but not landed, and not sent again: the next run decides it again from the traffic.

    :param hook: the network hook.
    :param from_date: first day of the window the conversions were pulled from.
    :param to_date: last day of that window (searches by on-hold id use it too).
    :param timezone_id: the API's timezone id of those days.
    :param chunk_size: on-hold ids per PATCH.
    :param log: logger of the calling operator.
    :param on_chunk: called after every chunk and between read-backs (the caller renews its
        write lease there).
    :param readback_wait_s: longest wait for sent statuses to show
        (:data:`DEFAULT_READBACK_WAIT_S`; checked by :func:`check_readback_wait`).
    :param before_chunk: called right before every PATCH (the caller checks its write lease
        there; an exception stops the writes before that chunk).
    """

    hook: AffiliateNetworkHook
    _: KW_ONLY
    from_date: dt.date
    to_date: dt.date
    timezone_id: int
    chunk_size: int
    log: TaskLog
    on_chunk: Callable[[], None] | None = None
    readback_wait_s: float = DEFAULT_READBACK_WAIT_S
    before_chunk: Callable[[], None] | None = None
    #: Every id sent by this writer: none is sent twice.
    _sent: set[str] = field(default_factory=set, init=False, repr=False)
    #: Accepted ids not yet seen landed: id -> (status sent, its outcome).
    _pending: dict[str, tuple[str, ApplyOutcome]] = field(
        default_factory=dict, init=False, repr=False
    )

    def __post_init__(self) -> None:
        check_readback_wait(self.readback_wait_s)

    def current_states(self, on_hold_ids: Sequence[str]) -> dict[str, str | None]:
        """Current on-hold state of each id (``None`` when the search does not return it)."""
        states: dict[str, str | None] = dict.fromkeys(on_hold_ids)
        rows = iter_on_hold_rows(
            self.hook,
            list(on_hold_ids),
            from_date=self.from_date,
            to_date=self.to_date,
            timezone_id=self.timezone_id,
            chunk_size=self.chunk_size,
        )
        for row in rows:
            # Rows of ids not asked for (a search the network ignores) are skipped, not fatal.
            if row.on_hold_id is not None and row.on_hold_id in states:
                states[row.on_hold_id] = on_hold_status(row.record)
        return states

    def _read_back(
        self, ids: list[str], status: str, outcome: ApplyOutcome, *, failed: bool = False
    ) -> None:
        after = self.current_states(ids)
        for i in ids:
            seen = after.get(i)
            if seen == status:
                outcome.applied[i] = status
            elif failed:  # after a failed PATCH, "not there" is simply not applied
                continue
            elif seen in (ON_HOLD, None):  # accepted, not visible yet: read again later
                outcome.pending[i] = None
                self._pending[i] = (status, outcome)
            else:  # someone else decided it meanwhile
                outcome.mismatches[i] = seen

    def settle(self) -> None:
        """Read back the accepted ids not yet visible until they show, or ``readback_wait_s``
        has passed (real time, backoff between polls); what is still on hold then is recorded
        as accepted but not landed (never sent again by this writer)."""
        deadline = time.monotonic() + self.readback_wait_s
        pause = _POLL_FIRST_S
        while self._pending and (left := deadline - time.monotonic()) > 0:
            time.sleep(min(pause, left))
            pause = min(pause * 2, _POLL_CAP_S)
            by_status: dict[str, list[str]] = {}
            for i, (status, _) in self._pending.items():
                by_status.setdefault(status, []).append(i)
            for status, ids in by_status.items():
                after = self.current_states(ids)
                for i in ids:
                    seen = after.get(i)
                    if seen in (ON_HOLD, None):
                        continue
                    _, outcome = self._pending.pop(i)
                    del outcome.pending[i]
                    if seen == status:
                        outcome.applied[i] = status
                    else:
                        outcome.mismatches[i] = seen
            if self.on_chunk is not None:
                self.on_chunk()
        for i, (status, outcome) in self._pending.items():
            del outcome.pending[i]
            outcome.not_landed[i] = (
                f"accepted by the API ({status}), not visible after {self.readback_wait_s:g} s: "
                "the next run decides it again from the traffic"
            )
        if self._pending:
            self.log.warning(
                "%d on-hold ids accepted by the API but not visible after %g s (a late or lost "
                "write); not sent again: the next run decides them again from the traffic: %s",
                len(self._pending),
                self.readback_wait_s,
                ", ".join(sorted(self._pending)[:20]),
            )
        self._pending.clear()

    def apply(
        self,
        on_hold_ids: Sequence[str],
        status: str,
        outcome: ApplyOutcome | None = None,
        *,
        wait: bool = True,
    ) -> ApplyOutcome:
        """Send ``status`` for every id still on hold, chunk by chunk, then read back.

        :param outcome: filled as chunks go (so a caller still has it when a chunk fails).
        :param wait: wait for the ids not visible yet (:meth:`settle`) before returning; a
            caller applying several statuses passes ``False`` and settles once at the end.
        """
        outcome = outcome if outcome is not None else ApplyOutcome()
        for chunk in chunked(list(dict.fromkeys(on_hold_ids)), self.chunk_size):
            again = [i for i in chunk if i in self._sent]
            for i in again:
                outcome.skipped[i] = "already sent in this run"
            chunk = [i for i in chunk if i not in self._sent]
            if not chunk:
                continue
            # Right before the write: a rerun, a person or the network may have decided some.
            states = self.current_states(chunk)
            still = [i for i in chunk if states.get(i) == ON_HOLD]
            for i in chunk:
                if states.get(i) != ON_HOLD:
                    outcome.skipped[i] = f"no longer on hold: {states.get(i) or 'not found'}"
            if not still:
                continue
            if self.before_chunk is not None:
                self.before_chunk()
            self._sent.update(still)
            try:
                result = self.hook.set_on_hold_status(still, status)
            except Exception as err:
                # The PATCH may have landed (a timeout after sending): the read-back says.
                try:
                    self._read_back(still, status, outcome, failed=True)
                except Exception as again:
                    for i in still:
                        outcome.unknown[i] = (
                            f"PATCH {status} failed ({type(err).__name__}) and the read-back "
                            f"failed too ({type(again).__name__}): the next run re-checks"
                        )
                raise
            outcome.chunks += 1
            self.log.info(
                "PATCH on-hold %s: %d ids (chunk %d), result=%s",
                status,
                len(still),
                outcome.chunks,
                result,
            )
            # Read back: the PATCH may report success before the change is visible.
            self._read_back(still, status, outcome)
            if self.on_chunk is not None:
                self.on_chunk()
        if wait:
            self.settle()
        if outcome.mismatches:
            self.log.warning(
                "%d on-hold ids show another state after PATCH %s (decided by someone else, or "
                "not found); the next run re-checks them: %s",
                len(outcome.mismatches),
                status,
                ", ".join(sorted(outcome.mismatches)[:20]),
            )
        return outcome


def outcome_reasons(outcomes: Mapping[str, ApplyOutcome]) -> dict[str, tuple[bool, str]]:
    """On-hold id -> (applied, why) for the audit: what the read-back shows landed is applied."""
    into: dict[str, tuple[bool, str]] = {}
    for status, outcome in outcomes.items():
        for i in outcome.applied:
            into[i] = (True, f"{status}; confirmed by read-back")
        for i, seen in outcome.mismatches.items():
            into[i] = (
                False,
                f"sent {status}; read back shows {seen or 'not found'} (decided elsewhere or "
                "not found; the next run re-checks)",
            )
        for i, why in outcome.not_landed.items():
            into[i] = (False, why)
        for i in outcome.pending:  # the run stopped before its read-back wait
            into[i] = (
                False,
                f"accepted by the API ({status}), not yet visible when the run stopped: the "
                "next run re-checks",
            )
        for i, why in outcome.unknown.items():
            into[i] = (False, f"outcome unknown: {why}")
        for i, why in outcome.skipped.items():
            into[i] = (False, why)
    return into


def apply_under_lease(
    hook: AffiliateNetworkHook,
    plan: Mapping[str, Sequence[str]],
    *,
    identity: RunIdentity,
    chunk_size: int,
    lease_wait_s: float,
    log: TaskLog,
    readback_wait_s: float = DEFAULT_READBACK_WAIT_S,
    on_error: Callable[[dict[str, ApplyOutcome], BaseException], None] | None = None,
    while_held: Callable[[dict[str, ApplyOutcome]], None] | None = None,
) -> dict[str, ApplyOutcome]:
    """Apply ``plan`` (status -> on-hold ids, in order) for the run ``identity`` names, under
    the network's write lease: the one write path of the scheduled review and the human step.

    The lease is taken when there is anything to send (waiting up to ``lease_wait_s`` for
    another run's), renewed after every chunk and between read-backs, and checked right before
    every PATCH (a holder that lost it stops before writing). One :class:`OnHoldWriter` sends
    every status (an id is never sent twice), then waits once for the late writes of all of
    them. The lease is released whatever happens.

    :param hook: the network hook.
    :param plan: status -> on-hold ids to send; statuses without ids are left out.
    :param identity: the run (write lease, owner, window days and timezone of the searches).
    :param chunk_size: on-hold ids per PATCH.
    :param lease_wait_s: how long to wait for another run's write lease.
    :param log: logger of the caller.
    :param readback_wait_s: longest wait for sent statuses to show.
    :param on_error: called with the outcomes so far when a write fails (before the error
        propagates, still under the lease).
    :param while_held: called with the outcomes once the writes are done, still under the lease
        (what must not interleave with another writer, such as remembering answers).
    :returns: status -> its outcome, for the statuses that had ids.
    """
    from affiliate_network.review.lease import WriteLease, lease_path

    run = identity.run
    lease = WriteLease(lease_path(run.base, hook.network.slug), run.owner)
    outcomes = {status: ApplyOutcome() for status, ids in plan.items() if ids}
    try:
        if outcomes:
            lease.acquire(wait_s=lease_wait_s, log=log)
        writer = OnHoldWriter(
            hook,
            from_date=identity.decide_from,
            to_date=identity.to_date,
            timezone_id=identity.timezone_id,
            chunk_size=chunk_size,
            log=log,
            on_chunk=lease.renew,
            readback_wait_s=readback_wait_s,
            before_chunk=lease.check,
        )
        try:
            for status, outcome in outcomes.items():
                writer.apply(plan[status], status, outcome, wait=False)
            writer.settle()  # one bounded wait for the late writes of every status
        except Exception as err:
            if on_error is not None:
                on_error(outcomes, err)
            raise
        if while_held is not None:
            while_held(outcomes)
    finally:
        lease.release()
    return outcomes
