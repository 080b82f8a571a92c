"""The traffic an on-hold review evaluates, pulled so that its cost follows the new traffic.

The rules' aggregates count every conversion of the window and its look-back, whatever its
on-hold state (issue 18), so a review needs all of that traffic on every run. Pulling it all
again every hour costs the whole window (7 or 8 days of conversions) per run. This module keeps
a **snapshot** of the window's traffic between runs, compacted to the fields the rules and the
audit read, and each run asks the API only for:

* the conversions **after the snapshot's cursor** minus the late-arrival bound (the rules
  file's ``review.late_arrival_hours``, default :data:`DEFAULT_LATE_ARRIVAL_HOURS`: a
  conversion recorded at most that long after its own timestamp is counted by the first run
  after it is recorded), with the documented ``YYYY-MM-DD hh:mm:ss`` form of ``from``/``to``;
* the **current state of the conversions the snapshot has on hold** (searched by on-hold id,
  the way the writer re-checks them before a PATCH), because only their state can change
  between runs in a way the rules see; approved and rejected are final.

Everything else of a conversion (IP, timestamps, offer, affiliate, amounts) is immutable in the
API apart from explicit corrections (sale amount, payout); a full pull every
``max_age_hours`` (default :data:`DEFAULT_MAX_AGE_HOURS`) bounds how long such a correction, a
conversion recorded later than the late-arrival bound, or a deletion older than it, can stay
unseen.

Each pull reads its range in time slices answered whole by one request (the hook's
:class:`~affiliate_network.hooks._paging.SlicedPull`): a conversion that exists for the whole
pull is counted once while others arrive or are deleted during it.

The merged batch holds exactly the conversions a full pull of the same window returns (the
snapshot trimmed to the window, the new pull replacing overlapping ids), so the decisions are
the same. Any doubt falls back to the full pull by itself: no snapshot, an unreadable or
foreign-version one, another timezone, fields the rules now need that it lacks, a window
starting before its coverage, a snapshot older than ``max_age_hours``, a search by on-hold id
the network refuses or answers with ids not asked for, or an on-hold id it no longer finds.

Where it lives: ``<base>/onhold_review/_state/<conn id>/traffic-tz<id>.jsonl.gz`` (beside the
audit and the human decisions), written to a temporary sibling and renamed (a reader sees the
old or the new file, never half of one). Runs only move the cursor forward: a backfill or a
manual run for an earlier ``as_of`` reads the snapshot (trimmed to its own window) but does not
write it back, so it cannot rewind the scheduled runs' state.

No Airflow task context here: callable from a plain script with a hook.
"""

from __future__ import annotations

import datetime as dt
import gzip
import logging
import math
import time
import uuid
from collections.abc import Callable, Collection, Iterable
from contextlib import closing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson
from airflow.sdk import ObjectStoragePath

from affiliate_network.exceptions import ConfigValidationError, InvalidRequestError
from affiliate_network.helpers.tasklog import TaskLog
from affiliate_network.review.audit import AUDIT_FIELDS
from affiliate_network.review.onhold_lookup import iter_on_hold_rows
from affiliate_network.review.window import local_bound
from affiliate_network.rules.fields import on_hold_conversion_id, on_hold_status

if TYPE_CHECKING:
    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
    from affiliate_network.review.window import ReviewWindow
    from affiliate_network.rules.engine import RuleSet

__all__ = [
    "DEFAULT_LATE_ARRIVAL_HOURS",
    "DEFAULT_MAX_AGE_HOURS",
    "DEFAULT_OVERLAP_S",
    "KEEP_FIELDS",
    "KEEP_MEMBERS",
    "SNAPSHOT_VERSION",
    "TrafficPull",
    "TrafficSnapshot",
    "TrafficSnapshotStore",
    "late_arrival_hours",
    "pull_review_traffic",
    "review_fields",
    "traffic_snapshot_path",
]

#: Fields and relationship members kept from each pulled conversion besides what rules read.
KEEP_FIELDS = ("conversion_id", "transaction_id", "currency_id", *AUDIT_FIELDS)
KEEP_MEMBERS = ("on_hold_snapshots", "affiliate", "offer")

#: Format version of the snapshot file; another version is ignored (full pull).
SNAPSHOT_VERSION = 1
#: The late-arrival bound: hours before the cursor each incremental pull reads again, so a
#: conversion recorded up to this long after its own timestamp is counted by the first run after
#: it is recorded (later ones by the next full pull, at most ``max_age_hours`` on). Six hours:
#: delayed server postbacks and advertiser batch uploads land within hours; each hour of bound
#: costs one hour of traffic re-read per run (a small share of a 7-day window).
DEFAULT_LATE_ARRIVAL_HOURS = 6.0
#: Longest bound accepted: past the snapshot's full-pull age it buys nothing.
MAX_LATE_ARRIVAL_HOURS = 168.0
#: The default bound in seconds (what :func:`pull_review_traffic` reads again before the cursor).
DEFAULT_OVERLAP_S = DEFAULT_LATE_ARRIVAL_HOURS * 3600
#: A snapshot whose last full pull is older than this (wall clock) is refreshed by a full pull.
DEFAULT_MAX_AGE_HOURS = 24.0
#: On-hold ids per search request when refreshing their state.
DEFAULT_REFRESH_CHUNK = 500
_ON_HOLD = "on_hold"

log_ = logging.getLogger(__name__)


def late_arrival_hours(value: float | None = None) -> float:
    """The late-arrival bound in hours: ``value``, else :data:`DEFAULT_LATE_ARRIVAL_HOURS`;
    checked.

    :param value: the bound.
    :raises ConfigValidationError: not a number, not finite, or outside
        ``0 .. MAX_LATE_ARRIVAL_HOURS``; the message names the setting and the value.
    """
    name = "late_arrival_hours"
    if value is None:
        return DEFAULT_LATE_ARRIVAL_HOURS
    try:
        hours = float(value)
    except (TypeError, ValueError):
        hours = math.nan
    if isinstance(value, bool) or not math.isfinite(hours):
        raise ConfigValidationError(f"{name} must be a finite number of hours, got {value!r}")
    if not 0 <= hours <= MAX_LATE_ARRIVAL_HOURS:
        raise ConfigValidationError(
            f"{name} must be 0 to {MAX_LATE_ARRIVAL_HOURS:g} hours, got {value!r}"
        )
    return hours


def review_fields(ruleset: RuleSet) -> tuple[frozenset[str], frozenset[str]]:
    """Top-level fields and ``relationship`` members the rules and the audit read."""
    fields = {*(p.split(".", 1)[0] for p in ruleset.prefetch), *KEEP_FIELDS}
    return frozenset(fields), frozenset({*ruleset.relationship_members(), *KEEP_MEMBERS})


def traffic_snapshot_path(state: ObjectStoragePath, timezone_id: int) -> ObjectStoragePath:
    """The snapshot file of one timezone in a connection's review state directory.

    :param state: ``<base>/onhold_review/_state/<conn id>/`` (``human_decisions.state_dir``).
    :param timezone_id: the API timezone id of the windows it serves.
    """
    return state / f"traffic-tz{int(timezone_id)}.jsonl.gz"


@dataclass
class TrafficSnapshot:
    """Compact conversions of a window and what they cover.

    :param timezone_id: timezone of the pulls.
    :param fields: top-level record fields kept.
    :param members: ``relationship`` members kept.
    :param coverage_from_ts: every conversion at or after this (unix s) is in ``records``...
    :param cursor_ts: ...up to this exclusive end (the last pull's ``to`` plus one second).
    :param full_pull_at: wall-clock time of the last full pull it descends from.
    :param records: the compact conversions.
    """

    timezone_id: int
    fields: frozenset[str]
    members: frozenset[str]
    coverage_from_ts: float
    cursor_ts: float
    full_pull_at: float
    records: list[dict[str, Any]] = field(default_factory=list)

    def header(self) -> dict[str, Any]:
        return {
            "version": SNAPSHOT_VERSION,
            "timezone_id": self.timezone_id,
            "fields": sorted(self.fields),
            "members": sorted(self.members),
            "coverage_from_ts": self.coverage_from_ts,
            "cursor_ts": self.cursor_ts,
            "full_pull_at": self.full_pull_at,
            "count": len(self.records),
        }


class TrafficSnapshotStore:
    """Reads and atomically writes one :class:`TrafficSnapshot` file (gzip JSON Lines).

    :param path: the file (:func:`traffic_snapshot_path`).
    """

    def __init__(self, path: ObjectStoragePath) -> None:
        self.path = path

    def load(self) -> tuple[TrafficSnapshot | None, str]:
        """The snapshot, or ``None`` and why it cannot be used (missing, corrupt, version)."""
        try:
            with self.path.open("rb") as raw, gzip.open(raw, "rb") as handle:
                head = orjson.loads(handle.readline() or b"null")
                if not isinstance(head, dict) or head.get("version") != SNAPSHOT_VERSION:
                    return None, "snapshot of another format version"
                records = [orjson.loads(line) for line in handle if line.strip()]
        except FileNotFoundError:
            return None, "no snapshot yet (first run)"
        except (OSError, EOFError, ValueError) as err:  # gzip/JSON damage, truncated file
            return None, f"snapshot unreadable ({type(err).__name__})"
        if len(records) != head.get("count") or not all(isinstance(r, dict) for r in records):
            return None, "snapshot incomplete"
        try:
            snap = TrafficSnapshot(
                timezone_id=int(head["timezone_id"]),
                fields=frozenset(head["fields"]),
                members=frozenset(head["members"]),
                coverage_from_ts=float(head["coverage_from_ts"]),
                cursor_ts=float(head["cursor_ts"]),
                full_pull_at=float(head["full_pull_at"]),
                records=records,
            )
        except (KeyError, TypeError, ValueError):
            return None, "snapshot header incomplete"
        return snap, "ok"

    def save(self, snap: TrafficSnapshot) -> None:
        """Write to a temporary sibling, then rename onto the file."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.parent / f".{self.path.name}.{uuid.uuid4().hex}.tmp"
        with tmp.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1) as out:
            out.write(orjson.dumps(snap.header()) + b"\n")
            for record in snap.records:
                out.write(orjson.dumps(record) + b"\n")
        tmp.rename(self.path)


@dataclass
class TrafficPull:
    """What :func:`pull_review_traffic` returns.

    :param records: the window's compact conversions (sorted by time, then id).
    :param mode: ``full`` or ``incremental``.
    :param reason: why the run pulled in full (empty for incremental).
    :param rows_new: conversions returned by the time-range pull.
    :param rows_refreshed: conversions returned by the on-hold refresh searches.
    :param saved: the snapshot was written (False for a run behind the cursor).
    """

    records: list[dict[str, Any]]
    mode: str
    reason: str = ""
    rows_new: int = 0
    rows_refreshed: int = 0
    saved: bool = False

    def summary(self) -> dict[str, Any]:
        """Counts for a task's return value (no records)."""
        return {
            "mode": self.mode,
            "reason": self.reason,
            "rows_new": self.rows_new,
            "rows_refreshed": self.rows_refreshed,
            "snapshot_saved": self.saved,
        }


class _FallBack(Exception):  # noqa: N818 (control flow inside this module only)
    """The incremental path cannot vouch for its result: pull in full instead."""


def _compact_one(
    record: dict[str, Any], fields: Collection[str], members: Collection[str]
) -> dict[str, Any]:
    """Keep only the fields rules and audit read: memory stays bounded for big windows."""
    compact = {k: record[k] for k in fields if k in record}
    rel = record.get("relationship")
    if isinstance(rel, dict):
        compact["relationship"] = {m: rel[m] for m in members if m in rel}
    return compact


def _pull_window(
    hook: AffiliateNetworkHook,
    window: ReviewWindow,
    since: dt.date | dt.datetime,
    *,
    span: tuple[float, float],
    fields: Collection[str],
    members: Collection[str],
    page_size: int | None,
    log: TaskLog,
) -> list[dict[str, Any]]:
    """Compact conversions (no events) from ``since`` to the window's end: the time-range pull
    of both paths (``since`` is the window's first day for a full pull, a local time just
    before the cursor for new rows).

    Records outside ``span`` (unix ``[start, end)``) are dropped: in a repeated fall-back hour
    the bounds sent are widened so that either reading covers the window (see
    :func:`~affiliate_network.review.window.local_bound`), and the extra rows are not the
    window's.

    A live window moves while it is paged (conversions arrive): a pull whose pages shifted is
    pulled again, up to :data:`~affiliate_network.hooks._paging.SHIFT_RETRIES` times, then
    :class:`~affiliate_network.exceptions.PullShiftedError` fails the task. Aggregates are
    never computed over a pull that lost or doubled rows.
    """
    from affiliate_network.hooks._paging import pull_until_still

    lo, hi = span

    def pull_once(attempt: int) -> list[dict[str, Any]]:
        pages = hook.iter_conversions(
            from_date=since,
            to_date=window.pull_to_bound,
            timezone_id=window.timezone_id,
            show_conversions=True,
            show_events=False,
            page_size=page_size,
        )
        with pages:
            return [
                _compact_one(record, fields, members)
                for record in pages
                if (at := _ts(record)) is None or lo <= at < hi
            ]

    what = f"the traffic of {window.decide_from}..{window.to_date} since {since}"
    return pull_until_still(pull_once, what=what, lost="decided", log=log)


def _ts(record: dict[str, Any]) -> float | None:
    at = record.get("conversion_unix_timestamp")
    return float(at) if isinstance(at, int | float) and not isinstance(at, bool) else None


def _order(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One order whatever the path (aggregates do not depend on it; audits read better)."""
    return sorted(records, key=lambda r: (_ts(r) or 0.0, str(r.get("conversion_id") or "")))


def _unusable(
    snap: TrafficSnapshot,
    *,
    timezone_id: int,
    fields: frozenset[str],
    members: frozenset[str],
    t0: float,
    now: float,
    max_age_hours: float | None,
) -> str:
    """Why the snapshot cannot serve this window ("" when it can)."""
    if snap.timezone_id != timezone_id:
        return f"snapshot of timezone {snap.timezone_id}, window in {timezone_id}"
    if not fields <= snap.fields or not members <= snap.members:
        return "the rules read fields the snapshot does not keep"
    if t0 < snap.coverage_from_ts:
        return "the window starts before the snapshot's coverage"
    if snap.cursor_ts <= t0:
        return "the snapshot ends before the window starts"
    if max_age_hours is not None and now - snap.full_pull_at > max_age_hours * 3600:
        return f"last full pull more than {max_age_hours:g} h ago (corrections)"
    return ""


def _refresh_on_hold(
    hook: AffiliateNetworkHook,
    ids: list[str],
    *,
    window: ReviewWindow,
    fields: Collection[str],
    members: Collection[str],
    chunk_size: int,
) -> dict[str, dict[str, Any]]:
    """Current compact record of each on-hold id, searched by id in chunks.

    :raises _FallBack: the network refuses the search, answers ids not asked for (a search it
        ignores would page through the whole window), or no longer finds an id.
    """
    found: dict[str, dict[str, Any]] = {}
    rows = iter_on_hold_rows(
        hook,
        ids,
        from_date=window.pull_from,
        to_date=window.pull_to_bound,
        timezone_id=window.timezone_id,
        chunk_size=chunk_size,
    )
    try:
        with closing(rows):  # a stray row stops the pull in flight, not after the window
            for row in rows:
                if not row.asked or row.on_hold_id is None:
                    raise _FallBack("the search by on-hold id answered ids not asked for")
                found[row.on_hold_id] = _compact_one(row.record, fields, members)
    except InvalidRequestError as err:
        raise _FallBack(f"the network refused the search by on-hold id ({err})") from None
    missing = len(ids) - len(found)
    if missing:
        raise _FallBack(f"{missing} on-hold conversions of the snapshot not found by id")
    return found


def _incremental(
    hook: AffiliateNetworkHook,
    snap: TrafficSnapshot,
    *,
    window: ReviewWindow,
    span: tuple[float, float],
    page_size: int | None,
    overlap_s: float,
    refresh_chunk: int,
    log: TaskLog,
) -> TrafficPull:
    """The snapshot trimmed to the window + the conversions after its cursor + the current
    state of those it has on hold: the set a full pull of the window returns."""
    t0, t1 = span
    by_id: dict[str, dict[str, Any]] = {}
    loose: list[dict[str, Any]] = []  # no conversion id: cannot be merged, kept as pulled
    for record in snap.records:
        at = _ts(record)
        if at is not None and not t0 <= at < t1:
            continue  # outside this run's window (it moved on, or a run behind the cursor)
        cid = record.get("conversion_id")
        if cid:
            by_id[str(cid)] = record
        else:
            loose.append(record)
    fresh: set[str] = set()
    rows_new = 0
    if t1 > snap.cursor_ts:
        start = max(t0, snap.cursor_ts - overlap_s)
        since = local_bound(start, window.tz, end=False)
        pulled = _pull_window(
            hook,
            window,
            since,
            span=(start, t1),
            fields=snap.fields,
            members=snap.members,
            page_size=page_size,
            log=log,
        )
        for record in pulled:
            rows_new += 1
            cid = record.get("conversion_id")
            if not cid:
                loose.append(record)
                continue
            by_id[str(cid)] = record
            fresh.add(str(cid))
    held = {
        oh: cid
        for cid, record in by_id.items()
        if cid not in fresh
        and on_hold_status(record) == _ON_HOLD
        and (oh := on_hold_conversion_id(record))
    }
    current = _refresh_on_hold(
        hook,
        sorted(held),
        window=window,
        fields=snap.fields,
        members=snap.members,
        chunk_size=refresh_chunk,
    )
    for oh, record in current.items():
        by_id[held[oh]] = record
    return TrafficPull(
        records=_order([*by_id.values(), *loose]),
        mode="incremental",
        rows_new=rows_new,
        rows_refreshed=len(current),
    )


def pull_review_traffic(
    hook: AffiliateNetworkHook,
    *,
    window: ReviewWindow,
    fields: Collection[str],
    members: Collection[str],
    store: TrafficSnapshotStore | None = None,
    page_size: int | None = None,
    full: bool = False,
    overlap_s: float | None = None,
    max_age_hours: float | None = DEFAULT_MAX_AGE_HOURS,
    refresh_chunk: int = DEFAULT_REFRESH_CHUNK,
    clock: Callable[[], float] = time.time,
    log: TaskLog | None = None,
) -> TrafficPull:
    """Every conversion of the review window and its look-back, whatever its on-hold state,
    compacted to ``fields`` and ``relationship`` ``members``: from the snapshot plus what is new
    when it can (see the module doc), else by a full pull; the snapshot is updated either way
    unless this run's window ends before the snapshot's cursor.

    :param hook: the network hook.
    :param window: the review window (``pull_from`` .. ``pull_to_at``).
    :param fields: top-level record fields the rules and the audit read.
    :param members: ``relationship`` members they read.
    :param store: the snapshot store; ``None`` always pulls in full and keeps nothing.
    :param page_size: conversion report page size (default: the hook's).
    :param full: pull the whole window whatever the snapshot (and rewrite it).
    :param overlap_s: seconds before the cursor pulled again: the late-arrival bound
        (``None``: :data:`DEFAULT_LATE_ARRIVAL_HOURS`).
    :raises ConfigValidationError: the late-arrival bound is not a number of hours in range.
    :param max_age_hours: full pull when the snapshot's last full pull is older (wall clock);
        ``None``: never for age.
    :param refresh_chunk: on-hold ids per search request.
    :param clock: wall clock (tests inject one).
    :param log: logger (default: this module's).
    """
    log = log or log_
    overlap_s = 3600 * late_arrival_hours(None if overlap_s is None else overlap_s / 3600)
    # Exact instants, never the wall-time texts read back (a repeated hour reads two ways).
    span = (window.pull_from_ts, float(int(window.pull_to_ts)) + 1.0)
    need_f, need_m = frozenset(fields), frozenset(members)
    snap, reason = (None, "no snapshot store") if store is None else store.load()
    if full:
        reason = "full pull asked for"
    elif snap is not None:
        reason = _unusable(
            snap,
            timezone_id=window.timezone_id,
            fields=need_f,
            members=need_m,
            t0=span[0],
            now=clock(),
            max_age_hours=max_age_hours,
        )
    if snap is not None and not reason:
        try:
            result = _incremental(
                hook,
                snap,
                window=window,
                span=span,
                page_size=page_size,
                overlap_s=overlap_s,
                refresh_chunk=refresh_chunk,
                log=log,
            )
        except _FallBack as err:
            reason = str(err)
        else:
            result.saved = _save(store, snap, window, span, result.records, snap.full_pull_at)
            log.info(
                "Traffic: incremental, %d conversions (%d pulled since the cursor, %d on-hold "
                "states refreshed), snapshot %s",
                len(result.records),
                result.rows_new,
                result.rows_refreshed,
                "saved" if result.saved else "kept (this run is behind its cursor)",
            )
            return result
    return _full(hook, window, span, need_f, need_m, snap, store, page_size, reason, clock, log)


def _save(
    store: TrafficSnapshotStore | None,
    snap: TrafficSnapshot,
    window: ReviewWindow,
    span: tuple[float, float],
    records: list[dict[str, Any]],
    full_pull_at: float,
    *,
    fresh: bool = False,
) -> bool:
    """Write the window's records as the new snapshot, unless the stored one reaches further
    (a backfill or a manual run for an earlier ``as_of`` must not rewind the cursor)."""
    if store is None or (not fresh and span[1] < snap.cursor_ts):
        return False
    store.save(
        TrafficSnapshot(
            timezone_id=window.timezone_id,
            fields=snap.fields,
            members=snap.members,
            coverage_from_ts=span[0],
            cursor_ts=span[1],
            full_pull_at=full_pull_at,
            records=records,
        )
    )
    return True


def _full(
    hook: AffiliateNetworkHook,
    window: ReviewWindow,
    span: tuple[float, float],
    need_f: frozenset[str],
    need_m: frozenset[str],
    snap: TrafficSnapshot | None,
    store: TrafficSnapshotStore | None,
    page_size: int | None,
    reason: str,
    clock: Callable[[], float],
    log: TaskLog,
) -> TrafficPull:
    """The whole window pulled; the snapshot rewritten unless it is ahead of this run."""
    # Keep the union of what this and the snapshot's rules read: two rules files sharing a
    # connection do not push each other back to full pulls.
    fields = need_f | (snap.fields if snap else frozenset())
    members = need_m | (snap.members if snap else frozenset())
    started = clock()
    pulled = _pull_window(
        hook,
        window,
        window.pull_from,
        span=span,
        fields=fields,
        members=members,
        page_size=page_size,
        log=log,
    )
    records = _order(pulled)
    result = TrafficPull(records=records, mode="full", reason=reason, rows_new=len(records))
    if store is not None and (snap is None or span[1] >= snap.cursor_ts):
        store.save(
            TrafficSnapshot(window.timezone_id, fields, members, span[0], span[1], started, records)
        )
        result.saved = True
    log.info(
        "Traffic: full pull of %s..%s, %d conversions (%s), snapshot %s",
        window.pull_from,
        f"{window.pull_to_bound:%Y-%m-%d %H:%M:%S}",
        len(records),
        reason,
        "saved" if result.saved else "kept (this run is behind its cursor)",
    )
    return result
