"""On-hold review: decide held conversions with rules, apply safely, ask a human about the rest.

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
import heapq
import json
import re
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
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
from affiliate_network.review.fields import on_hold_conversion_id, on_hold_since, on_hold_status

if TYPE_CHECKING:
    from airflow.sdk import Context

    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
    from affiliate_network.review.engine import Evaluation, RuleSet

#: PATCH status per rule action (the rejection value is configurable: the spec does not show it).
APPROVED = "approved"
DEFAULT_REJECT_STATUS = "rejected"
ON_HOLD = "on_hold"

#: Options a reviewer picks from, per rule, in the Airflow UI ("Required actions").
OPTION_APPROVE = "Approve all"
OPTION_REJECT = "Reject all"
OPTION_KEEP = "Keep on hold"
REVIEW_OPTIONS = [OPTION_APPROVE, OPTION_REJECT, OPTION_KEEP]
#: Audit value for an answer that is not one of the options (or no person answered).
UNANSWERED = "no valid answer"
#: HITL form field: conversion ids (comma/space separated) to leave on hold whatever the choice.
KEEP_PARAM = "keep_on_hold"
#: Conversions listed in one request body (the choice applies to all of the rule's conversions).
BODY_ROWS = 50

#: Fields copied from a conversion into the audit so a reviewer sees what was decided.
_AUDIT_FIELDS = ("payout", "sale_amount", "conversion_unix_timestamp")
#: Fields and relationship members kept from each pulled conversion besides what rules read.
_KEEP_FIELDS = ("conversion_id", "transaction_id", *_AUDIT_FIELDS)
_KEEP_MEMBERS = ("on_hold_snapshots", "affiliate", "offer")


def check_reject_status(status: str) -> None:
    """Fail before anything is pulled or approved, not halfway through the writes."""
    from affiliate_network.hooks.affiliate_network import ON_HOLD_STATUS_FORM

    if not isinstance(status, str) or not ON_HOLD_STATUS_FORM.match(status):
        raise ConfigValidationError(
            f"reject_status {status!r} is not a status word (lowercase letters and '_', "
            f"e.g. 'rejected')"
        )


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", text).strip("_") or "run"


def _chunks(items: Sequence[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


# ---------------------------------------------------------------------------------------------
# Audit file: JSON Lines, written atomically (temp name, then rename)
# ---------------------------------------------------------------------------------------------


def audit_dir(base: str, dag_id: str, run_id: str) -> ObjectStoragePath:
    """``<base>/onhold_review/<dag_id>/<run_id>/`` (the run id made path-safe)."""
    return ObjectStoragePath(base) / "onhold_review" / _safe_name(dag_id) / _safe_name(run_id)


def write_jsonl_atomic(path: ObjectStoragePath, rows: Iterable[dict[str, Any]]) -> int:
    """Write rows as JSON Lines to a temporary sibling, then rename it onto ``path``.

    A reader never sees a half-written file: either the previous version or the new one.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
    count = 0
    with tmp.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, sort_keys=True, default=str) + "\n")
            count += 1
    tmp.rename(path)
    return count


def read_jsonl(path: str | ObjectStoragePath) -> list[dict[str, Any]]:
    """Rows of a JSON Lines audit file."""
    target = path if isinstance(path, ObjectStoragePath) else ObjectStoragePath(path)
    with target.open("r", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


# ---------------------------------------------------------------------------------------------
# Writing on-hold statuses: re-check, chunk, PATCH, read back
# ---------------------------------------------------------------------------------------------


@dataclass
class ApplyOutcome:
    """What happened to each on-hold id handed to :class:`OnHoldWriter`.

    The read-back decides: an id is ``applied`` only when reading it back shows the status
    sent, whatever the PATCH call returned (it may time out after landing, or report success
    before the change is visible).

    :param applied: on-hold id -> status, confirmed by the read-back.
    :param skipped: on-hold id -> why it was not sent (e.g. ``no longer on hold: approved``).
    :param mismatches: on-hold id -> state read back after the PATCH when it is not the status
        sent (the API applies status changes asynchronously: the next run re-checks).
    :param unknown: on-hold id -> why the outcome is unknown (the PATCH failed and the read-back
        failed too).
    :param chunks: PATCH requests sent.
    """

    applied: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    mismatches: dict[str, str | None] = field(default_factory=dict)
    unknown: dict[str, str] = field(default_factory=dict)
    chunks: int = 0


class OnHoldWriter:
    """Applies statuses to on-hold ids, never sending an id that is no longer on hold.

    :param hook: the network hook.
    :param from_date: first day of the window the conversions were pulled from.
    :param to_date: last day of that window (searches by on-hold id use it too).
    :param timezone_id: the API's timezone id of those days.
    :param chunk_size: on-hold ids per PATCH.
    :param log: logger of the calling operator.
    :param on_chunk: called after every chunk (the caller renews its write lease there).
    """

    def __init__(
        self,
        hook: AffiliateNetworkHook,
        *,
        from_date: str,
        to_date: str,
        timezone_id: int,
        chunk_size: int,
        log: Any,
        on_chunk: Callable[[], None] | None = None,
    ) -> None:
        self.hook = hook
        self.from_date = from_date
        self.to_date = to_date
        self.timezone_id = timezone_id
        self.chunk_size = chunk_size
        self.log = log
        self.on_chunk = on_chunk

    def current_states(self, on_hold_ids: Sequence[str]) -> dict[str, str | None]:
        """Current on-hold state of each id (``None`` when the search does not return it)."""
        states: dict[str, str | None] = dict.fromkeys(on_hold_ids)
        for chunk in _chunks(list(on_hold_ids), self.chunk_size):
            terms = [{"search_type": "on_hold_conversion_id", "value": i} for i in chunk]
            for record in self.hook.iter_conversions(
                from_date=self.from_date,
                to_date=self.to_date,
                timezone_id=self.timezone_id,
                search_terms=terms,
                page_size=max(len(chunk), 1),
            ):
                oh_id = on_hold_conversion_id(record)
                if oh_id in states:
                    states[oh_id] = on_hold_status(record)
        return states

    def _read_back(
        self, ids: list[str], status: str, outcome: ApplyOutcome, *, failed: bool = False
    ) -> None:
        after = self.current_states(ids)
        for i in ids:
            if after.get(i) == status:
                outcome.applied[i] = status
            elif not failed:  # after a failed PATCH, "not there" is simply not applied
                outcome.mismatches[i] = after.get(i)

    def apply(
        self, on_hold_ids: Sequence[str], status: str, outcome: ApplyOutcome | None = None
    ) -> ApplyOutcome:
        """Send ``status`` for every id still on hold, chunk by chunk, then read back.

        :param outcome: filled as chunks go (so a caller still has it when a chunk fails).
        """
        outcome = outcome if outcome is not None else ApplyOutcome()
        for chunk in _chunks(list(dict.fromkeys(on_hold_ids)), self.chunk_size):
            # Right before the write: a rerun, a person or the network may have decided some.
            states = self.current_states(chunk)
            still = [i for i in chunk if states.get(i) == ON_HOLD]
            for i in chunk:
                if states.get(i) != ON_HOLD:
                    outcome.skipped[i] = f"no longer on hold: {states.get(i) or 'not found'}"
            if not still:
                continue
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
        if outcome.mismatches:
            self.log.warning(
                "%d on-hold ids still show another state after PATCH %s (asynchronous or ignored "
                "write); the next run re-checks them: %s",
                len(outcome.mismatches),
                status,
                ", ".join(sorted(outcome.mismatches)[:20]),
            )
        return outcome


def _outcome_reasons(outcomes: dict[str, ApplyOutcome], into: dict[str, tuple[bool, str]]) -> None:
    """On-hold id -> (applied, why) for the audit: what the read-back shows landed is applied."""
    for status, outcome in outcomes.items():
        for i in outcome.applied:
            into[i] = (True, f"{status}; confirmed by read-back")
        for i, seen in outcome.mismatches.items():
            into[i] = (
                False,
                f"sent {status}; read back shows {seen or 'not found'} (not visible yet: the API "
                "applies status changes asynchronously; the next run re-checks)",
            )
        for i, why in outcome.unknown.items():
            into[i] = (False, f"outcome unknown: {why}")
        for i, why in outcome.skipped.items():
            into[i] = (False, why)


# ---------------------------------------------------------------------------------------------
# The review window
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReviewWindow:
    """Where a review looks, in the network's timezone.

    :param timezone_id: the API's id of the network's reporting timezone.
    :param timezone: its IANA name.
    :param as_of: the review's "now" (``YYYY-MM-DD hh:mm:ss`` local): nothing later is seen.
    :param as_of_ts: the same, in unix seconds.
    :param decide_from: first local day whose conversions are decided.
    :param decide_from_ts: its local midnight, in unix seconds.
    :param decide_to_ts: the local midnight after ``to_date`` (conversions before it are decided).
    :param to_date: the local day of ``as_of`` (last day decided).
    :param pull_from: first local day pulled: ``decide_from`` minus the aggregates' look-back.
    :param pull_to: end of the pull, ``as_of`` (the documented ``YYYY-MM-DD hh:mm:ss`` form).
    """

    timezone_id: int
    timezone: str
    as_of: str
    as_of_ts: float
    decide_from: str
    decide_from_ts: float
    decide_to_ts: float
    to_date: str
    pull_from: str
    pull_to: str


def review_window(
    *,
    timezone_id: int | str | None,
    lookback_days: int,
    to_date: str | None,
    as_of: str | None,
    horizon_hours: float,
) -> ReviewWindow:
    """The window of a review as of ``as_of`` (default: now), in the network's timezone.

    ``timezone_id`` None takes the network's reporting timezone from ``include/network.yaml``
    (there is no default of the review's own).
    """
    import math
    import zoneinfo

    import pendulum

    from affiliate_network.settings import resolve_timezone

    tz_id, tz_name = resolve_timezone(timezone_id, None)
    tz = zoneinfo.ZoneInfo(tz_name)
    now = dt.datetime.now(dt.UTC)
    if as_of:
        try:
            moment = pendulum.parse(str(as_of), tz="UTC")
        except Exception as err:  # pendulum raises several parser errors
            raise ConfigValidationError(f"as_of {as_of!r} is not an ISO date-time") from err
        moment_utc = dt.datetime.fromtimestamp(moment.timestamp(), dt.UTC)  # type: ignore[union-attr]
    else:
        moment_utc = now
    day: dt.date | None = None
    if to_date:
        try:
            day = dt.date.fromisoformat(str(to_date).strip()[:10])
        except ValueError as err:
            raise ConfigValidationError(f"to_date {to_date!r} is not a YYYY-MM-DD date") from err
        end_of_day = dt.datetime(day.year, day.month, day.day, 23, 59, 59, tzinfo=tz)
        if not as_of:
            moment_utc = min(now, end_of_day.astimezone(dt.UTC))
    local = moment_utc.astimezone(tz)
    last = day if day is not None else local.date()
    first = last - dt.timedelta(days=lookback_days - 1)
    horizon = dt.timedelta(hours=horizon_hours)
    back = dt.timedelta(days=math.ceil(horizon_hours / 24))
    start = dt.datetime(first.year, first.month, first.day, tzinfo=tz)
    after_last = last + dt.timedelta(days=1)
    end = dt.datetime(after_last.year, after_last.month, after_last.day, tzinfo=tz)
    # Windowed aggregates look both ways: pull the horizon after the last day too (up to as_of).
    pull_end = min(moment_utc, (end + horizon - dt.timedelta(seconds=1)).astimezone(dt.UTC))
    return ReviewWindow(
        timezone_id=tz_id,
        timezone=tz_name,
        as_of=local.strftime("%Y-%m-%d %H:%M:%S"),
        as_of_ts=moment_utc.timestamp(),
        decide_from=first.isoformat(),
        decide_from_ts=start.timestamp(),
        decide_to_ts=end.timestamp(),
        to_date=last.isoformat(),
        pull_from=(first - back).isoformat(),
        pull_to=pull_end.astimezone(tz).strftime("%Y-%m-%d %H:%M:%S"),
    )


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
        dry_run: bool | str = False,
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
        self, hook: AffiliateNetworkHook, ruleset: RuleSet, window: ReviewWindow
    ) -> list[dict[str, Any]]:
        """Every conversion of the window and its look-back, whatever its on-hold state,
        projected to what rules and audit need (aggregates count all of them)."""
        keep = {*(p.split(".", 1)[0] for p in ruleset.prefetch), *_KEEP_FIELDS}
        members = {*ruleset.relationship_members(), *_KEEP_MEMBERS}
        records: list[dict[str, Any]] = []
        for record in hook.iter_conversions(
            from_date=window.pull_from,
            to_date=window.pull_to,
            timezone_id=window.timezone_id,
            show_conversions=True,
            show_events=False,
            page_size=self.page_size,
        ):
            # Keep only the fields rules and audit read: memory stays bounded for big windows.
            compact = {k: record[k] for k in keep if k in record}
            rel = record.get("relationship")
            if isinstance(rel, dict):
                compact["relationship"] = {m: rel[m] for m in members if m in rel}
            records.append(compact)
        return records

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

        dry_run = as_bool(self.dry_run, "dry_run")
        check_reject_status(self.reject_status)
        rules_path = self._rules_path()
        ruleset = RuleSet.from_file(rules_path)  # validation happens before anything is pulled
        self.log.info("Rules %s: %d enabled rules", rules_path, len(ruleset.compiled))
        horizon = ruleset.horizon_hours
        window = self._window(horizon)
        base = resolve_data_base(self.base_path)
        hook = self.hook
        started = time.monotonic()
        records = self._pull_traffic(hook, ruleset, window)
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
                    _outcome_reasons(outcomes, outcome_by_id)
                    self._finish_rows(
                        rows, outcome_by_id, f"not applied: failed ({type(err).__name__})"
                    )
                    write_jsonl_atomic(audit_path, rows)
                    raise
            finally:
                lease.release()
            _outcome_reasons(outcomes, outcome_by_id)
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


def build_review_requests(summary: dict[str, Any], *, max_rows: int = BODY_ROWS) -> list[dict]:
    """One human-in-the-loop request per rule with ``review`` decisions in the run's audit.

    :param summary: the :class:`OnHoldReviewOperator` return value (counts + ``audit_path``).
    :param max_rows: conversions listed in each body (the choice covers all of the rule's).
    :return: ``[{"subject": ..., "body": ...}]`` ready for ``HITLOperator.partial().expand_kwargs``;
        empty when nothing waits for review or on a dry run.
    """
    if not summary or summary.get("dry_run") or not summary.get("review_pending"):
        return []
    rows = [r for r in read_jsonl(summary["audit_path"]) if r["action"] == "review"]
    by_rule: dict[str, list[dict]] = {}
    for row in rows:
        by_rule.setdefault(row["rule_id"], []).append(row)
    requests = []
    for rule_id, items in by_rule.items():
        description = items[0].get("rule_description") or ""
        payout = sum(float(r.get("payout") or 0) for r in items)
        lines = [
            f"**Rule `{rule_id}`** flagged **{len(items)}** on-hold conversions "
            f"(payout {payout:.2f}). {description}".strip(),
            "",
            f"Your choice applies to all {len(items)}. To leave some on hold, list their "
            f"conversion ids in `{KEEP_PARAM}`.",
            "",
            "| conversion | affiliate | offer | payout | sale | matched |",
            "|---|---|---|---|---|---|",
        ]
        shown = heapq.nlargest(max_rows, items, key=lambda r: float(r.get("payout") or 0))
        for r in shown:
            matched = ", ".join(f"{k}={v}" for k, v in (r.get("matched") or {}).items())
            lines.append(
                f"| `{r['conversion_id']}` | {r.get('affiliate_id')} | {r.get('offer_id')} | "
                f"{r.get('payout')} | {r.get('sale_amount')} | {matched} |"
            )
        if len(items) > max_rows:
            lines.append(f"\n… and {len(items) - max_rows} more (highest payout shown first).")
        lines.append(f"\nAudit file: `{summary['audit_path']}`")
        requests.append(
            {
                "subject": f"On-hold review: {len(items)} conversions flagged by rule {rule_id}",
                "body": "\n".join(lines),
            }
        )
    return requests


def _rule_of_subject(subject: str) -> str:
    return subject.rsplit(" rule ", 1)[-1].strip()


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
            rule_id = _rule_of_subject(request["subject"])
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
            _outcome_reasons(per_status, outcomes)
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
