"""The default world, rules and guardrails on any day: the on-hold review of a sandbox started
with no options (what the demo and a new user get) succeeds for worlds ending on every day of two
years, with a stated margin under the default ceilings.

Time is an input: the world's traffic of a day is a function of its seed and that day, so a
world ending on day E, seen at a clock on day E, is the long world below seen at the same clock
(:func:`test_the_long_world_seen_at_a_clock_is_the_world_ending_that_day` pins it, field for
field). The sweep decides each day's window in process, as the review does (window, plan,
rules, guardrails: the job library's own functions); one day goes through the whole review over
HTTP and must give the sweep's figures.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterator
from functools import cache
from typing import Any

import pytest

from affiliate_network.exceptions import GuardrailError
from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
from affiliate_network.review.candidates import plan_positions
from affiliate_network.review.job import ReviewRun, run_review
from affiliate_network.review.options import ReviewOptions
from affiliate_network.review.traffic import review_fields
from affiliate_network.review.window import ReviewWindow, review_window
from affiliate_network.rules.engine import Evaluation, RuleSet
from affiliate_network.settings.paths import include_dir
from affiliate_network_sandbox.clock import SandboxClock
from affiliate_network_sandbox.config import DataConfig
from affiliate_network_sandbox.data import KIND_CONVERSION
from affiliate_network_sandbox.world import World

#: Two years and a month of end dates: three year ends, every month end, 2028-02-29, and the
#: daylight-saving changes of America/New_York in 2027 and 2028.
FIRST_END = dt.date(2026, 12, 1)
LAST_END = dt.date(2028, 12, 31)
#: America/New_York's id in the API's timezone table (its DST days are swept in it too).
NEW_YORK = 80
NEW_YORK_DST_DAYS = (
    dt.date(2027, 3, 14),
    dt.date(2027, 11, 7),
    dt.date(2028, 3, 12),
    dt.date(2028, 11, 5),
)
#: The margin the default world keeps under the default ceilings on every swept day: at most
#: this reject share (the ceiling is 50 %) and this share of the reject-count ceiling.
MAX_SHARE_SEEN = 0.40
MAX_COUNT_SHARE_SEEN = 0.2


@cache
def _rules() -> tuple[RuleSet, ReviewOptions]:
    """The shipped rules file and its review: section (the defaults a new deployment runs)."""
    ruleset = RuleSet.from_file(include_dir() / "onhold_rules.yaml")
    return ruleset, ReviewOptions.of(ruleset.rules_file.review)


@cache
def _kept() -> tuple[frozenset[str], frozenset[str]]:
    return review_fields(_rules()[0])


def _compact(record: dict[str, Any]) -> dict[str, Any]:
    """What the review keeps of a pulled record (:mod:`affiliate_network.review.traffic`)."""
    fields, members = _kept()
    out = {k: record[k] for k in fields if k in record}
    out["relationship"] = {m: record["relationship"][m] for m in members}
    return out


class LongWorld:
    """The default world over the whole sweep; each day's conversions built once."""

    def __init__(self) -> None:
        days = (LAST_END - FIRST_END).days + 12  # the first window's look-back and horizon
        self.world = World(DataConfig(end_date=LAST_END, days=days), "default")
        self._days: dict[int, list[dict[str, Any]]] = {}

    def day(self, ordinal: int) -> list[dict[str, Any]]:
        if ordinal not in self._days:
            gen = self.world.gen
            ctx = gen.day(ordinal)
            self._days[ordinal] = [
                _compact(gen.record_dict(KIND_CONVERSION, ctx, i)) for i in range(ctx.n)
            ]
        return self._days[ordinal]

    def traffic(self, window: ReviewWindow) -> list[dict[str, Any]]:
        """The review's pull of ``window`` with the sandbox's clock at ``window.as_of``."""
        lo, hi = window.pull_from_ts, min(window.pull_to_ts, window.as_of_ts)
        first = dt.datetime.fromtimestamp(lo, dt.UTC).date().toordinal()
        last = dt.datetime.fromtimestamp(hi, dt.UTC).date().toordinal()
        return [
            r
            for o in range(first, last + 1)
            for r in self.day(o)
            if lo <= r["conversion_unix_timestamp"] < hi
        ]


def _window(as_of: dt.datetime, timezone_id: int | None) -> ReviewWindow:
    ruleset = _rules()[0]
    return review_window(
        timezone_id=timezone_id,  # None: include/network.yaml's, as the DAG does
        lookback_days=ruleset.rules_file.review.lookback_days,
        to_date=None,
        as_of=as_of.isoformat(),
        horizon_hours=ruleset.horizon_hours,
    )


def _decide(records: list[dict[str, Any]], window: ReviewWindow) -> Evaluation:
    """The run's plan decided by the rules (what the guardrails judge)."""
    ruleset, options = _rules()
    plan_at, _, _ = plan_positions(
        records, window, min_age_hours=options.min_age_hours, horizon_hours=ruleset.horizon_hours
    )
    return ruleset.evaluate(records, now=window.as_of_ts, eligible=plan_at)


def _sweep() -> Iterator[tuple[dt.datetime, int | None]]:
    """Every end date in the network's timezone, at an hour that walks round the clock; the
    New York DST days (and the days beside them), every month's last day and Feb 29 in
    America/New_York at four hours, the DST change's hours included."""
    for k in range((LAST_END - FIRST_END).days + 1):
        end = FIRST_END + dt.timedelta(days=k)
        yield dt.datetime(end.year, end.month, end.day, (k * 7) % 24, 30, tzinfo=dt.UTC), None
        tomorrow = end + dt.timedelta(days=1)
        near_dst = any(abs((end - d).days) <= 1 for d in NEW_YORK_DST_DAYS)
        if near_dst or tomorrow.day == 1 or (end.month, end.day) == (2, 29):
            for hour in (1, 6, 7, 18):  # 06:00-07:00 UTC: 01:00-03:00 in New York
                yield dt.datetime(end.year, end.month, end.day, hour, 30, tzinfo=dt.UTC), NEW_YORK


def test_the_default_world_is_decided_within_the_default_guardrails_on_every_day() -> None:
    _, options = _rules()
    guardrails = options.guardrails
    assert guardrails.max_reject_share == 0.5  # the defaults this test states its margin for
    assert guardrails.max_reject_count == 1000
    world = LongWorld()
    tripped: list[str] = []
    shares: list[tuple[float, str]] = []
    counts: list[int] = []
    days = set()
    for as_of, timezone_id in _sweep():
        window = _window(as_of, timezone_id)
        records = world.traffic(window)
        plan = _decide(records, window)
        where = f"{as_of:%Y-%m-%d %H:%M} UTC in {window.timezone}"
        try:
            guardrails.check(plan, records)
        except GuardrailError as err:
            tripped.append(f"{where}: {err}")
        rejects = plan.per_action["reject"]
        assert plan.per_action["approve"] > 0, f"{where}: nothing to approve"
        shares.append((rejects / len(plan.decisions), where))
        counts.append(rejects)
        days.add(as_of.date())

    assert len(days) == (LAST_END - FIRST_END).days + 1
    assert not tripped, f"{len(tripped)} runs tripped the default guardrails: {tripped[:5]}"
    worst_share, worst_at = max(shares)
    assert worst_share <= MAX_SHARE_SEEN, f"reject share {worst_share:.1%} at {worst_at}"
    assert max(counts) <= MAX_COUNT_SHARE_SEEN * guardrails.max_reject_count


@pytest.mark.parametrize(
    "as_of",
    [
        dt.datetime(2027, 3, 14, 7, 30, tzinfo=dt.UTC),  # New York's spring-forward hour
        dt.datetime(2028, 2, 29, 23, 30, tzinfo=dt.UTC),
        dt.datetime(2028, 12, 31, 0, 30, tzinfo=dt.UTC),
    ],
)
def test_the_long_world_seen_at_a_clock_is_the_world_ending_that_day(as_of: dt.datetime) -> None:
    """The sweep's shortcut: a world of 14 days ending on ``as_of``'s day (the sandbox's
    defaults), its clock at ``as_of``, serves the long world's records of the window."""
    window = _window(as_of, NEW_YORK)
    ending = World(DataConfig(end_date=as_of.date()), "default", SandboxClock(as_of.timestamp()))
    gen = ending.gen
    served = [
        _compact(record)
        for seg in gen.segments(int(window.pull_from_ts), int(window.pull_to_ts) + 1)
        for record in gen.dict_range(seg, seg.lo, seg.hi)
    ]
    assert served == LongWorld().traffic(window)
    assert len(served) > 3000


def test_the_review_over_http_gives_the_sweeps_figures(
    sandbox: Any, network_conn: str, tmp_path: Any
) -> None:
    """The whole review (pull over HTTP, plan, rules, guardrails; a dry run) on the sandbox
    reset to a world ending on a New York DST day, clock at the change: the sweep's decisions."""
    as_of = dt.datetime(2027, 11, 7, 6, 30, tzinfo=dt.UTC)
    sandbox.reset(end_date=as_of.date())
    sandbox.set_clock(as_of)
    ruleset, options = _rules()
    window = _window(as_of, NEW_YORK)
    hook = AffiliateNetworkHook(network_conn)
    try:
        result = run_review(
            hook,
            ruleset,
            window,
            options=options,
            run=ReviewRun(base=str(tmp_path), conn_id=network_conn, dag_id="t", run_id="any-day"),
            dry_run=True,
        )
    finally:
        hook.close()
    expected = _decide(LongWorld().traffic(window), window)
    assert result.guardrail is None
    assert Counter(result.plan.per_action) == Counter(expected.per_action)
    assert result.plan.per_rule == expected.per_rule
