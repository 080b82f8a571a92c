"""What a correct run of each DAG leaves behind, checked from the outside.

Outputs are read from the object-storage base (manifests, data files), effects from the
sandbox's admin endpoints (``/_sandbox/objects/...``, ``/_sandbox/truth/...``), run states and
task summaries from the REST API. Shared by the LocalExecutor and CeleryExecutor stages.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pendulum
import yaml

from demo import SANDBOX_OFFER_STATE

from .harness import PROJECT_ROOT, AirflowCluster, E2EError, wait_all_runs, wait_for
from .onhold_checks import onhold_conf

DAILY = "affiliate_daily_reports"
ONHOLD = "affiliate_onhold_review"
SYNC = "affiliate_offer_sync"


@dataclass
class Stage:
    """A running deployment, the sandbox it talks to, where outputs land, the runs started.

    :param data_base: output base as the DAGs see it (local folder or ``s3://...``).
    """

    cluster: AirflowCluster
    sandbox: Any
    data_base: str
    runs: dict[str, list[str]] = field(default_factory=dict)
    #: What a stage's fixture records for its tests (e.g. state before the runs).
    notes: dict[str, Any] = field(default_factory=dict)


def trigger_all(stage: Stage) -> None:
    """Unpause each DAG (the scheduler creates the latest scheduled run), then trigger it."""
    api = stage.cluster.api
    for dag_id in (DAILY, ONHOLD, SYNC):
        api.unpause(dag_id)
    stage.runs[DAILY] = [wait_scheduled_run(stage.cluster, DAILY)]
    stage.runs[ONHOLD] = [wait_scheduled_run(stage.cluster, ONHOLD)]
    # Manual runs as an operator starts them from the UI ("Trigger DAG w/ config").
    stage.runs[DAILY].append(
        api.trigger(DAILY, conf={"trailing_days": 1}, logical_date=_days_ago(3))
    )
    stage.runs[ONHOLD].append(api.trigger(ONHOLD, conf=onhold_conf(), logical_date=None))
    stage.runs[SYNC] = [api.trigger(SYNC, conf={"dry_run": False}, logical_date=None)]


def _days_ago(n: int) -> str:
    return pendulum.now("UTC").start_of("day").subtract(days=n).to_iso8601_string()


def day_truth(sandbox: Any, day: str) -> int:
    """Rows a ``conversions`` partition of ``day`` must hold (conversions and events, UTC)."""
    truth = sandbox.truth(day, day, timezone_id=67)
    return int(truth["conversions"]) + int(truth["events"])


def wait_scheduled_run(cluster: AirflowCluster, dag_id: str, timeout: float = 90) -> str:
    """After unpausing a scheduled DAG the scheduler creates its latest run; return its id."""

    def _scheduled() -> str | None:
        for run in cluster.api.dag_runs(dag_id):
            if run["run_type"] == "scheduled":
                return str(run["dag_run_id"])
        return None

    return wait_for(
        _scheduled,
        timeout=timeout,
        interval=2,
        what=f"scheduled run of {dag_id}",
        on_timeout=lambda: cluster.diagnostics(),
    )


# -- affiliate_daily_reports ---------------------------------------------------------------


def report_days(cluster: AirflowCluster, run_id: str) -> list[str]:
    """Days a daily-report run landed, from the two conversion tasks' XCom summaries."""
    days: list[str] = []
    for task_id in ("pull_conversions", "repull_trailing_window"):
        summary = cluster.api.xcom(DAILY, run_id, task_id) or {}
        days.extend(p["date"] for p in summary.get("partitions", []))
    return days


def check_conversion_partitions(
    data_base: str | Path, sandbox: Any, days: Iterable[str]
) -> dict[str, Any]:
    """Each day is a complete partition whose rows equal the sandbox's truth, no duplicates.

    Returns the manifests by day.
    """
    from affiliate_network.partitions.manifest import list_partitions
    from affiliate_network.partitions.publish import STAGING_DIR
    from affiliate_network.partitions.read import read_partition
    from affiliate_network.reports.storage import as_storage_path

    base = as_storage_path(str(data_base))  # an s3:// base names an Airflow connection
    partitions = list_partitions(base, "conversions")
    manifests = {}
    problems = []
    for day in sorted(set(days)):
        manifest = partitions.get(f"date={day}")
        if manifest is None:
            problems.append(f"date={day}: no complete partition (found {sorted(partitions)})")
            continue
        expected = day_truth(sandbox, day)
        table = read_partition(base / "conversions" / f"date={day}")
        ids = table.column("conversion_id").to_pylist()
        if manifest.row_count != expected or table.num_rows != expected:
            problems.append(
                f"date={day}: manifest rows {manifest.row_count}, file rows {table.num_rows}, "
                f"sandbox truth {expected}"
            )
        if len(set(ids)) != len(ids):
            problems.append(f"date={day}: {len(ids) - len(set(ids))} duplicate conversion ids")
        manifests[day] = manifest
    staging = base / "conversions" / STAGING_DIR
    leftovers = sorted(p.name for p in staging.iterdir()) if staging.exists() else []
    if leftovers:
        problems.append(f"staging leftovers: {leftovers}")
    if problems:
        raise E2EError("conversion partitions:\n" + "\n".join(problems))
    return manifests


def check_money_per_currency(data_base: str | Path, sandbox: Any, days: Iterable[str]) -> None:
    """Each day's landed payout and revenue equal the sandbox's truth per currency and status,
    to the minor unit, and the day's comparison with the network's report reconciled.

    Amounts are summed as exact decimals within one currency, never across currencies.
    """
    import json
    from decimal import Decimal

    from affiliate_network.partitions.read import read_partition
    from affiliate_network.reports.reconcile import COMPARISON_NAME
    from affiliate_network.reports.storage import as_storage_path

    problems = []
    for day in sorted(set(days)):
        table = read_partition(as_storage_path(str(data_base)) / "conversions" / f"date={day}")
        landed: dict[tuple[str, str], tuple[Decimal, Decimal, int]] = {}
        rows = table.select(["currency_id", "status", "is_event", "payout", "revenue"])
        for row in rows.to_pylist():
            kind = "event" if row["is_event"] else str(row["status"])
            key = (str(row["currency_id"]), kind)
            payout, revenue, count = landed.get(key, (Decimal(0), Decimal(0), 0))
            landed[key] = (payout + row["payout"], revenue + row["revenue"], count + 1)
        truth = sandbox.truth_money(day, timezone_id=67, cells=False)["currencies"]
        expected: dict[tuple[str, str], tuple[Decimal, Decimal, int]] = {}
        for currency, figures in truth.items():
            for status, cell in figures["conversions"].items():
                if cell["count"]:
                    expected[(currency, status)] = (
                        Decimal(cell["payout"]),
                        Decimal(cell["revenue"]),
                        int(cell["count"]),
                    )
            if figures["events"]["count"]:
                ev = figures["events"]
                expected[(currency, "event")] = (
                    Decimal(ev["payout"]),
                    Decimal(ev["revenue"]),
                    int(ev["count"]),
                )
        if landed != expected:
            diff = sorted(set(landed.items()) ^ set(expected.items()))
            problems.append(f"date={day}: landed money differs from the truth: {diff[:6]}")
        if len({c for c, _ in landed}) < 2:
            problems.append(f"date={day}: one currency only, the stage wants several")
        comparison = (
            as_storage_path(str(data_base)) / "conversions" / f"date={day}" / COMPARISON_NAME
        )
        if not comparison.exists():
            problems.append(f"date={day}: no {COMPARISON_NAME}")
        elif json.loads(comparison.read_text()).get("reconciled") is not True:
            problems.append(f"date={day}: {COMPARISON_NAME} does not say reconciled")
    if problems:
        raise E2EError("money per currency:\n" + "\n".join(problems))


def check_affiliate_partitions(data_base: str | Path, days: Iterable[str]) -> None:
    """One complete aggregate partition per affiliate of include/reports.yaml and day."""
    from affiliate_network.partitions.manifest import list_partitions
    from affiliate_network.reports.storage import as_storage_path

    reports = yaml.safe_load((PROJECT_ROOT / "include" / "reports.yaml").read_text())
    affiliates = [a["affiliate_id"] for a in reports["affiliate_reports"]["affiliates"]]
    found = set(list_partitions(as_storage_path(str(data_base)), "affiliate_reports"))
    missing = [
        f"affiliate={a}/date={d}"
        for a in affiliates
        for d in sorted(set(days))
        if f"affiliate={a}/date={d}" not in found
    ]
    if missing:
        raise E2EError(f"affiliate report partitions missing: {missing}; found {sorted(found)}")


def run_day(run: dict) -> str:
    """The report day of a daily run: the start of its data interval (network timezone UTC)."""
    return dt.datetime.fromisoformat(run["data_interval_start"]).date().isoformat()


# -- affiliate_offer_sync -------------------------------------------------------------------


def check_offer_sync_applied(sandbox: Any) -> None:
    """The sandbox holds the desired state of its example (demo/include/offer_state.yaml)."""
    desired = yaml.safe_load(SANDBOX_OFFER_STATE.read_text())
    problems: list[str] = []

    groups = sandbox.objects("offer_groups")
    for group in desired.get("offer_groups", []):
        stored = _by_id(groups, group["network_offer_group_id"])
        if stored is None:
            problems.append(f"offer group {group['network_offer_group_id']} not written")
            continue
        for name, value in group.items():
            checked = name.endswith("_cap") or name in ("is_caps_enabled", "is_soft_cap", "name")
            if checked and stored.get(name) != value:
                problems.append(
                    f"offer group {group['key']}.{name}: {stored.get(name)!r} != {value!r}"
                )

    offers = sandbox.objects("offers")
    for offer in desired.get("offers", []):
        stored = _by_id(offers, offer["network_offer_id"])
        if stored is None:
            problems.append(f"offer {offer['network_offer_id']} not written")
            continue
        for name in ("name", "offer_status", "destination_url"):
            if stored.get(name) != offer[name]:
                problems.append(
                    f"offer {offer['key']}.{name}: {stored.get(name)!r} != {offer[name]!r}"
                )

    scrub_rates = list(_values(sandbox.objects("custom_scrub_rates")))
    for rate in desired.get("scrub_rates", []):
        matches = [s for s in scrub_rates if s.get("name") == rate["name"]]
        if len(matches) != 1:
            problems.append(f"scrub rate {rate['key']!r}: {len(matches)} created, expected 1")

    urls = sandbox.objects("offer_urls")
    for entry in desired.get("offer_urls", []):
        for url_id in entry["network_offer_url_ids"]:
            stored = _by_id(urls, url_id)
            status = (stored or {}).get("url_status")
            if status != entry["url_status"]:
                problems.append(
                    f"offer url {url_id}: url_status {status!r} != {entry['url_status']!r}"
                )
    if problems:
        raise E2EError("offer sync not applied:\n" + "\n".join(problems))


def _values(objects: Any) -> Iterable[dict]:
    if isinstance(objects, dict):
        return objects.values()
    return objects


def _by_id(objects: Any, ident: int) -> dict | None:
    if isinstance(objects, dict):
        return objects.get(str(ident)) or objects.get(ident)  # type: ignore[call-overload]
    for obj in objects:
        if ident in obj.values():
            return obj
    return None


def check_daily_reports(stage: Stage, timeout: float = 400) -> list[str]:
    """All runs succeeded; their days are complete partitions equal to the network's truth.

    :param timeout: seconds to wait for every run (a backfill needs more).
    :returns: the days checked.
    """
    runs = wait_all_runs(stage.cluster, DAILY, timeout)
    days = [d for r in runs for d in report_days(stage.cluster, r["dag_run_id"])]
    run_days = [run_day(r) for r in runs]
    missing = set(run_days) - set(days)
    if missing:
        raise E2EError(f"runs of days {sorted(missing)} landed no partition of their day")
    check_conversion_partitions(stage.data_base, stage.sandbox, days)
    check_affiliate_partitions(stage.data_base, run_days)
    return sorted(set(days))
