"""The review's traffic pull as the traffic tests drive it: the shipped rules' fields, a window
``LOOKBACK`` days back from an ``as_of``, a snapshot store under a test's folder."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from airflow.sdk import ObjectStoragePath

from affiliate_network.review.traffic import (
    TrafficSnapshotStore,
    pull_review_traffic,
    traffic_snapshot_path,
)
from affiliate_network.review.window import review_window
from affiliate_network.rules.engine import RuleSet
from affiliate_network.settings.paths import include_dir

LOOKBACK = 2
RULES = include_dir() / "onhold_rules.yaml"
FIELDS = ("conversion_id", "transaction_id", "currency_id", "payout", "sale_amount")
MEMBERS = ("on_hold_snapshots", "affiliate", "offer")


def start_of_traffic(world: Any) -> dt.datetime:
    """Mid-morning of the data's third day (UTC): a window with traffic before and after."""
    first = dt.date.fromisoformat(world.catalog()["first_date"])
    return dt.datetime(first.year, first.month, first.day, 10, tzinfo=dt.UTC) + dt.timedelta(days=2)


def shipped_ruleset() -> RuleSet:
    return RuleSet.from_file(RULES)


def traffic_window(ruleset: RuleSet, as_of: dt.datetime) -> Any:
    return review_window(
        timezone_id=67,
        lookback_days=LOOKBACK,
        to_date=None,
        as_of=as_of.isoformat(),
        horizon_hours=ruleset.horizon_hours,
    )


def traffic_fields(ruleset: RuleSet) -> tuple[set[str], set[str]]:
    fields = {*(p.split(".", 1)[0] for p in ruleset.prefetch), *FIELDS, "conversion_unix_timestamp"}
    return fields, {*ruleset.relationship_members(), *MEMBERS}


def pull_traffic(hook: Any, store: Any, as_of: dt.datetime, **kw: Any) -> Any:
    ruleset = shipped_ruleset()
    fields, members = traffic_fields(ruleset)
    return pull_review_traffic(
        hook,
        window=traffic_window(ruleset, as_of),
        fields=fields,
        members=members,
        store=store,
        page_size=kw.pop("page_size", 200),
        **kw,
    )


def snapshot_store(tmp_path: Path, name: str = "state") -> TrafficSnapshotStore:
    return TrafficSnapshotStore(traffic_snapshot_path(ObjectStoragePath(str(tmp_path / name)), 67))
