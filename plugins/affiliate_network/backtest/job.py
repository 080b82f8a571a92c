"""Decide landed history as the on-hold review would, day by day, beside what the network did.

For each decide day ``D`` (a local day of the network's timezone) the backtest replays the
review run that decides ``D``'s conversions, with the review's own rules for what a run sees
(``review/window.py``, ``review/candidates.py``; re-stated here: the backtest reads landed
days, it pulls nothing):

* **when**: the run as of ``decide_after_hours`` after ``D`` ends (default: the rules' widest
  ``within_hours``, at least ``min_age_hours``: the first moment every conversion of ``D`` has
  complete windowed aggregates and is old enough). Age-based fields (``hold_age_hours``) are
  measured at that instant.
* **traffic**: every landed conversion of that run's window, whatever its status: the
  ``lookback_days`` local days ending with the run's day, plus the look-back the aggregates
  need before them (the local day of the window's first midnight minus the horizon), up to the
  run's instant. The aggregates count over all of it, like the review's. Events
  (``is_event`` true: the daily report lands them beside the conversions) are dropped as they
  are read: the review pulls conversions only (``show_events`` false), so an event is neither
  counted in an aggregate nor decided.
* **candidates**: the conversions of ``D`` that have been on hold (an on-hold snapshot with an
  on-hold id), whatever their landed state, on hold for ``min_age_hours`` and ``horizon`` old
  at the run's instant (the review's plan).

Each candidate gets the first matching rule's action (no rule: ``hold``), its ``payout`` (exact,
in its ``currency_id``) and the network's landed decision (:func:`network_status`), and the
pair is scored (:func:`agreement`). As in the review, a rule's ``approve`` of a negative payout
(a reversal, an adjustment, a charge-back) becomes ``review``: a person decides it
(``review.guardrails.send_negative_payouts_to_review``). Money is kept per currency and never
added across currencies; negative payouts are counted apart, never netted against the others.
Memory: one decide day at a time; only the landed days of the current run's traffic are held
(compacted to the fields the rules read), so 30 days take what 7 do.
"""

from __future__ import annotations

import datetime as dt
import math
import zoneinfo
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from affiliate_network.backtest.records import as_record
from affiliate_network.exceptions import ConfigValidationError
from affiliate_network.rules.fields import on_hold_conversion_id, on_hold_since, on_hold_status

if TYPE_CHECKING:
    from affiliate_network.rules.engine import RuleSet

#: The review's defaults (the rules file's ``review:`` section: ``lookback_days``,
#: ``min_age_hours``).
DEFAULT_LOOKBACK_DAYS = 7
DEFAULT_MIN_AGE_HOURS = 1.0
#: Longest review window: the conversion report covers the prior 365 days only, so a review
#: could never pull a longer one.
MAX_LOOKBACK_DAYS = 365
#: Most hours any setting may span (min age, decide-after, the rules' horizon): a year. The
#: report's history is a year; beyond it no run could see its traffic.
MAX_HOURS = 8760.0
#: Days a backtest decides: conversion times are Unix seconds (nothing lands before 1970), and
#: the last day leaves room before the calendar's end for its run (up to :data:`MAX_HOURS`
#: later) and the days that run reads.
FIRST_DAY = dt.date(1970, 1, 1)
LAST_DAY = dt.date.max - dt.timedelta(days=400)
#: The rule column of candidates no rule matched (they stay on hold).
NO_RULE = "(no rule)"
#: The network's landed decisions, as reported.
NETWORK_STATUSES = ("approved", "rejected", "on_hold", "other")
#: Fields every compact record keeps besides what the rules read.
_KEEP_FIELDS = (
    "conversion_id",
    "conversion_unix_timestamp",
    "currency_id",
    "payout",
    "status",
    "relationship",
)
#: Landed columns read besides the kept fields: what tells an event from a conversion.
_FILTER_FIELDS = ("is_event",)
#: Where a compact record keeps its exact payout (no rule can name it: not a record field).
_EXACT_PAYOUT = "_backtest_payout"
#: The currency a payout is kept under when its record names none (the review's spelling).
NO_CURRENCY = "(no currency)"


def network_status(record: dict[str, Any]) -> str:
    """What the network decided, from the landed record.

    The last on-hold snapshot's status (the ``rel_on_hold_status`` column), else the record's
    ``status``: ``approved``; ``on_hold`` (still on hold: the snapshot says ``on_hold``, the
    record ``pending``); ``rejected`` (``rejected`` or any other final on-hold status: the
    rejecting value of a PATCH is a setting); ``other`` (no status at all).
    """
    status = on_hold_status(record) or record.get("status")
    if status in ("on_hold", "pending"):
        return "on_hold"
    if status == "approved":
        return "approved"
    if not status:
        return "other"
    return "rejected"


def agreement(action: str, network: str) -> str:
    """``agree`` (approve/approved, reject/rejected), ``disagree`` (approve/rejected,
    reject/approved), ``open`` (approve or reject, the network has not decided yet) or
    ``none`` (``review``/``hold``/no rule: the rules take no side)."""
    if action not in ("approve", "reject"):
        return "none"
    if network not in ("approved", "rejected"):
        return "open"
    return (
        "agree"
        if (action, network) in (("approve", "approved"), ("reject", "rejected"))
        else ("disagree")
    )


@dataclass
class Tally:
    """Candidates of one rule (one day, or all days).

    :param count: candidates the rule decided.
    :param payout: per currency, the sum of their payouts that are not negative (exact; what
        approving them would pay out). Never added across currencies.
    :param negative: per currency, the sum of their negative payouts (reversals, adjustments,
        charge-backs), kept apart: never netted against ``payout``.
    :param negative_count: per currency, how many payouts were negative.
    :param network: count per :data:`NETWORK_STATUSES`.
    :param scores: count per :func:`agreement` outcome.
    """

    count: int = 0
    payout: dict[str, Decimal] = field(default_factory=dict)
    negative: dict[str, Decimal] = field(default_factory=dict)
    negative_count: Counter[str] = field(default_factory=Counter)
    network: Counter[str] = field(default_factory=Counter)
    scores: Counter[str] = field(default_factory=Counter)

    def add(self, payout: Decimal, currency: str, network: str, score: str) -> None:
        """Count one candidate.

        :param payout: its payout, exact.
        :param currency: the payout's currency (:data:`NO_CURRENCY` when the record has none).
        :param network: its :func:`network_status`.
        :param score: its :func:`agreement`.
        """
        self.count += 1
        if payout < 0:
            self.negative[currency] = self.negative.get(currency, Decimal(0)) + payout
            self.negative_count[currency] += 1
        else:
            self.payout[currency] = self.payout.get(currency, Decimal(0)) + payout
        self.network[network] += 1
        self.scores[score] += 1

    def merge(self, other: Tally) -> None:
        self.count += other.count
        for currency, amount in other.payout.items():
            self.payout[currency] = self.payout.get(currency, Decimal(0)) + amount
        for currency, amount in other.negative.items():
            self.negative[currency] = self.negative.get(currency, Decimal(0)) + amount
        self.negative_count.update(other.negative_count)
        self.network.update(other.network)
        self.scores.update(other.scores)


@dataclass(frozen=True)
class DecisionRow:
    """One candidate's backtest decision (a line of ``--decisions``)."""

    conversion_id: str | None
    on_hold_conversion_id: str | None
    day: str
    rule: str
    action: str
    network_status: str
    agreement: str
    payout: Decimal
    currency_id: str = NO_CURRENCY


@dataclass
class DayResult:
    """The backtest of one decide day.

    :param day: the decide day.
    :param as_of: the replayed run's instant (aware, network timezone).
    :param traffic: conversions its aggregates counted over.
    :param candidates: conversions of the day decided (been on hold, old enough).
    :param too_young: conversions of the day on hold but not old enough at ``as_of``.
    :param per_rule: rule id (and :data:`NO_RULE`) -> :class:`Tally`, in rule order.
    :param missing_days: landed days the run's traffic needs but the records lack.
    """

    day: dt.date
    as_of: dt.datetime
    traffic: int
    candidates: int
    too_young: int
    per_rule: dict[str, Tally]
    missing_days: list[dt.date]


@dataclass(frozen=True)
class RunPlan:
    """The review run that decides one day: its instant and the traffic it counts over."""

    day: dt.date
    as_of: dt.datetime
    pull_from: dt.date

    @property
    def span(self) -> tuple[float, float]:
        """Unix ``[start, end)`` of the run's traffic (the review's pull span)."""
        start = dt.datetime(
            self.pull_from.year, self.pull_from.month, self.pull_from.day, tzinfo=self.as_of.tzinfo
        )
        return start.timestamp(), float(int(self.as_of.timestamp())) + 1.0


def _midnight(day: dt.date, tz: zoneinfo.ZoneInfo) -> dt.datetime:
    return dt.datetime(day.year, day.month, day.day, tzinfo=tz)


def check_day(name: str, day: dt.date) -> None:
    """Refuse a day outside :data:`FIRST_DAY`..:data:`LAST_DAY` (its run could not be
    computed, or decides nothing that can have landed), naming it ``name``."""
    if not FIRST_DAY <= day <= LAST_DAY:
        raise ConfigValidationError(f"{name} {day} is out of range ({FIRST_DAY} to {LAST_DAY})")


def _check_hours(name: str, hours: float) -> None:
    """``hours`` a finite number from 0 to :data:`MAX_HOURS` (NaN fails every comparison, so
    it is refused by name rather than let through by one)."""
    if (
        isinstance(hours, bool)
        or not isinstance(hours, int | float)
        or not math.isfinite(hours)
        or not 0 <= hours <= MAX_HOURS
    ):
        raise ConfigValidationError(
            f"{name} must be a number from 0 to {MAX_HOURS:g}, got {hours!r}"
        )


class Backtest:
    """Replays the review over landed days (see the module doc).

    :param ruleset: the rules to try.
    :param timezone: IANA name of the network's timezone (the landed days' timezone).
    :param lookback_days: the review's ``lookback_days`` (days of its window).
    :param min_age_hours: the review's ``min_age_hours``.
    :param decide_after_hours: hours after a day ends that its run happens (``None``: the
        rules' horizon, at least ``min_age_hours``).
    :raises ConfigValidationError: an option out of range (not finite, below 0 or 1, above
        :data:`MAX_LOOKBACK_DAYS` or :data:`MAX_HOURS`; the rules' widest ``within_hours``
        too), or a run so late that the day has left its window.
    """

    def __init__(
        self,
        ruleset: RuleSet,
        *,
        timezone: str,
        lookback_days: int = DEFAULT_LOOKBACK_DAYS,
        min_age_hours: float = DEFAULT_MIN_AGE_HOURS,
        decide_after_hours: float | None = None,
    ) -> None:
        if (
            isinstance(lookback_days, bool)
            or not isinstance(lookback_days, int)
            or not 1 <= lookback_days <= MAX_LOOKBACK_DAYS
        ):
            raise ConfigValidationError(
                f"lookback days must be a whole number from 1 to {MAX_LOOKBACK_DAYS}, "
                f"got {lookback_days!r}"
            )
        _check_hours("min age hours", min_age_hours)
        _check_hours("the rules' widest within_hours", ruleset.horizon_hours)
        self.ruleset = ruleset
        self.tz = zoneinfo.ZoneInfo(timezone)
        self.lookback_days = lookback_days
        self.min_age_hours = min_age_hours
        self.horizon_hours = ruleset.horizon_hours
        after = max(self.horizon_hours, min_age_hours)
        self.decide_after_hours = after if decide_after_hours is None else decide_after_hours
        _check_hours("decide after hours", self.decide_after_hours)
        self.fields = frozenset(
            {*(p.split(".", 1)[0] for p in ruleset.prefetch), *_KEEP_FIELDS, "extra_fields"}
        )
        self.members = frozenset({*ruleset.relationship_members(), "on_hold_snapshots"})
        self.member_keys = _member_keys(ruleset.prefetch, self.members)

    def plan(self, day: dt.date) -> RunPlan:
        """The run deciding ``day``: the review's window as of that run (``review_window``).

        :raises ConfigValidationError: ``day`` outside :data:`FIRST_DAY`..:data:`LAST_DAY`, or
            no longer in the window of its run.
        """
        check_day("day", day)
        end = _midnight(day + dt.timedelta(days=1), self.tz)
        as_of = (end.astimezone(dt.UTC) + dt.timedelta(hours=self.decide_after_hours)).astimezone(
            self.tz
        )
        to_date = as_of.date()
        decide_from = to_date - dt.timedelta(days=self.lookback_days - 1)
        if day < decide_from:
            raise ConfigValidationError(
                f"a run {self.decide_after_hours:g} h after {day} ends has a {self.lookback_days}"
                f"-day window from {decide_from}: {day} is no longer in it (lower the hours or "
                "raise the look-back)"
            )
        start = _midnight(decide_from, self.tz).astimezone(dt.UTC)
        pull_from = (start - dt.timedelta(hours=self.horizon_hours)).astimezone(self.tz).date()
        return RunPlan(day=day, as_of=as_of, pull_from=pull_from)

    def days_needed(self, first: dt.date, last: dt.date) -> tuple[dt.date, dt.date]:
        """First and last landed day the runs deciding ``first``..``last`` read."""
        return self.plan(first).pull_from, self.plan(last).as_of.date()

    def columns(self) -> list[str]:
        """Landed columns to read (the rules' fields, what a decision row reports)."""
        return sorted({*self.fields, *_FILTER_FIELDS})

    def compact(self, batch: Any, source: str) -> list[dict[str, Any]]:
        """Landed rows as the API's records, kept to what the rules and the report read.

        Events are left out: the review's traffic has none (see the module doc).
        """
        rows = batch.to_pylist() if hasattr(batch, "to_pylist") else batch
        out: list[dict[str, Any]] = []
        fields, members = self.fields, self.members
        path = Path(source)
        for row in rows:
            if is_event(row):
                continue
            payout = row.get("payout")
            record = as_record(row, path)
            compact = {k: record[k] for k in fields if k in record}
            rel = record.get("relationship")
            if isinstance(rel, dict):
                compact["relationship"] = {
                    m: _pruned(rel[m], self.member_keys.get(m)) for m in members if m in rel
                }
            compact[_EXACT_PAYOUT] = _exact(payout)
            out.append(compact)
        return out

    def run(
        self,
        first: dt.date,
        last: dt.date,
        days: Iterable[tuple[dt.date, Iterable[Any]]],
        *,
        on_row: Callable[[DecisionRow], None] | None = None,
    ) -> Iterator[DayResult]:
        """Decide ``first``..``last``, one :class:`DayResult` per day, as the days stream in.

        :param days: landed days in ascending order, each with its record batches (Arrow
            record batches or lists of row dicts); days absent from it are reported missing.
        :param on_row: called with each candidate's :class:`DecisionRow`.
        :raises ConfigValidationError: ``first`` after ``last``.
        """
        check_day("--from", first)
        check_day("--to", last)
        if first > last:
            raise ConfigValidationError(f"--from {first} is after --to {last}")
        source = iter(days)
        pending: tuple[dt.date, Iterable[Any]] | None = next(source, None)
        held: OrderedDict[dt.date, list[dict[str, Any]]] = OrderedDict()
        day = first
        while day <= last:
            plan = self.plan(day)
            until = plan.as_of.date()
            while pending is not None and pending[0] <= until:
                landed, batches = pending
                if landed >= plan.pull_from:
                    records: list[dict[str, Any]] = []
                    for batch in batches:
                        records.extend(self.compact(batch, f"date={landed}"))
                    held[landed] = records
                pending = next(source, None)
            for old in [d for d in held if d < plan.pull_from]:
                del held[old]  # before this run's traffic: never needed again
            yield self._decide(plan, held, on_row)
            day += dt.timedelta(days=1)

    def _decide(
        self,
        plan: RunPlan,
        held: OrderedDict[dt.date, list[dict[str, Any]]],
        on_row: Callable[[DecisionRow], None] | None,
    ) -> DayResult:
        lo, hi = plan.span
        traffic = [
            r
            for records in held.values()
            for r in records
            if (at := _ts(r)) is None or lo <= at < hi
        ]
        now = plan.as_of.timestamp()
        day_lo = _midnight(plan.day, self.tz).timestamp()
        day_hi = _midnight(plan.day + dt.timedelta(days=1), self.tz).timestamp()
        min_age_s, horizon_s = self.min_age_hours * 3600, self.horizon_hours * 3600
        eligible: list[int] = []
        too_young = 0
        for i, record in enumerate(traffic):
            at = _ts(record)
            if at is None or not day_lo <= at < day_hi:
                continue
            if on_hold_status(record) is None or not on_hold_conversion_id(record):
                continue  # never held: nothing for the review to decide
            if now - (on_hold_since(record) or now) < min_age_s or now - at < horizon_s:
                too_young += 1
                continue
            eligible.append(i)
        evaluation = self.ruleset.evaluate(traffic, now=now, eligible=eligible)
        per_rule = {rule.id: Tally() for rule in self.ruleset.rules}
        per_rule[NO_RULE] = Tally()
        for i in eligible:
            record = traffic[i]
            decision = evaluation.for_index(i)
            rule = decision.rule_id if decision else NO_RULE
            action = decision.action if decision else "hold"
            payout = record[_EXACT_PAYOUT]
            if action == "approve" and payout < 0:
                action = "review"  # as the review does: a person decides a reversal
            net = network_status(record)
            score = agreement(action, net)
            currency = currency_of(record)
            per_rule[rule].add(payout, currency, net, score)
            if on_row is not None:
                cid = record.get("conversion_id")
                on_row(
                    DecisionRow(
                        conversion_id=None if cid is None else str(cid),
                        on_hold_conversion_id=on_hold_conversion_id(record),
                        day=plan.day.isoformat(),
                        rule=rule,
                        action=action,
                        network_status=net,
                        agreement=score,
                        payout=payout,
                        currency_id=currency,
                    )
                )
        wanted = plan.pull_from
        missing = []
        while wanted <= plan.as_of.date():
            if wanted not in held:
                missing.append(wanted)
            wanted += dt.timedelta(days=1)
        return DayResult(
            day=plan.day,
            as_of=plan.as_of,
            traffic=len(traffic),
            candidates=len(eligible),
            too_young=too_young,
            per_rule=per_rule,
            missing_days=missing,
        )


def is_event(row: dict[str, Any]) -> bool:
    """Whether a landed or exported row is an event (``is_event`` true; the text ``true`` of an
    export too), not a conversion: the review never pulls events."""
    flag = row.get("is_event")
    return flag is True or (isinstance(flag, str) and flag.strip().lower() == "true")


def _member_keys(
    prefetch: Iterable[str], members: Iterable[str]
) -> dict[str, frozenset[str] | None]:
    """Per ``relationship`` member, the keys the rules read when they read it only through
    plain ``relationship.M.K`` paths; ``None`` (keep it whole) when a path stops at the member
    (a list walked or indexed, ``on_hold_snapshots``, a derived field's need)."""
    keys: dict[str, set[str] | None] = {m: set() for m in members}
    keys["on_hold_snapshots"] = None
    for path in prefetch:
        parts = path.split(".")
        if parts[0] != "relationship" or len(parts) < 2:
            continue
        known = keys.get(parts[1], set())
        if len(parts) == 2 or known is None:
            keys[parts[1]] = None
        else:
            known.add(parts[2])
            keys[parts[1]] = known
    return {m: None if k is None or not k else frozenset(k) for m, k in keys.items()}


def _pruned(value: Any, keys: frozenset[str] | None) -> Any:
    """A member object kept to ``keys`` (the window's records are held for days: memory)."""
    if keys is None or type(value) is not dict:
        return value
    return {k: value[k] for k in keys if k in value}


def currency_of(record: dict[str, Any]) -> str:
    """The currency a record's payout is in (its ``currency_id``), or :data:`NO_CURRENCY`."""
    code = str(record.get("currency_id") or "").strip().upper()
    return code or NO_CURRENCY


def _ts(record: dict[str, Any]) -> float | None:
    at = record.get("conversion_unix_timestamp")
    return float(at) if isinstance(at, int | float) and not isinstance(at, bool) else None


def _exact(value: Any) -> Decimal:
    """A landed amount exactly: decimals as stored; an older float column's shortest text."""
    if isinstance(value, Decimal):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    if isinstance(value, str) and value.strip():
        try:
            return Decimal(value.strip())
        except ArithmeticError:
            return Decimal(0)
    return Decimal(0)
