"""Daily reporting: conversions, events and per-affiliate aggregates, landed as day partitions.

Thin on purpose: no I/O and no data libraries at parse time. Network settings come from
``include/network.yaml`` and the affiliate list from ``include/reports.yaml``, both read inside
tasks; the output base from the Airflow Variable ``affiliate_network_data_base`` (then env
``AFFILIATE_NETWORK_DATA_BASE``, then ``<project>/data``), also read inside tasks.
"""

from __future__ import annotations

import datetime as dt

import pendulum
from airflow.sdk import Param, dag

# The Task SDK's timetable where the release has it (3.2+): the core class pulls the scheduler's
# serialization modules into every parse (about half a second here). compat knows where it is.
from affiliate_network.compat import CronDataIntervalTimetable
from affiliate_network.notify import attach_notifications
from affiliate_network.operators.base import PARAM_DIALECT
from affiliate_network.operators.conversion_report import (
    AffiliateReportOperator,
    ConversionReportOperator,
    dataset_asset,
)
from affiliate_network.operators.pools import reporting_pool
from affiliate_network.operators.publish import PublishChangesOperator
from affiliate_network.operators.reconciliation import ReconciliationOperator

# Operators only, no @task: the decorator loads the standard provider's PythonOperator module
# into every parse (tests/dags/test_dag_integrity.py pins it).
from affiliate_network.operators.steps import AffiliateReportTargetsOperator
from affiliate_network.settings.agreement import check_network_timezone

#: The network's reporting timezone: the timetable's, fixed at parse time. It must equal
#: ``timezone`` in include/network.yaml; a mismatch is this file's import error (the line below)
#: and fails each report task before any request (the operators check their DAG's timetable).
NETWORK_TIMEZONE = "UTC"
check_network_timezone(NETWORK_TIMEZONE, setting="NETWORK_TIMEZONE", where=__file__)
#: Days re-pulled before each run's day so late status changes converge (DAG param default).
DEFAULT_TRAILING_DAYS = 7

DOC_MD = """
### affiliate_daily_reports

Every day just after midnight in the network's timezone (`CronDataIntervalTimetable`, so the
run's data interval is the whole previous day), this DAG lands:

- `pull_conversions`: yesterday's conversions **and** events (`is_event` tells them apart)
  into `<base>/conversions/date=YYYY-MM-DD/`.
- `repull_trailing_window`: the `trailing_days` days before it (param, default 7), one pull
  per day, so on-hold approvals/rejections and sale-amount corrections reach the partitions
  they belong to. A day whose content is unchanged is not rewritten; a changed one gets a
  `_changes-<ns>-<token>.json` beside its manifest (status transitions, new/removed/updated ids).
- `reconcile_conversions`: compares every day the two pulls landed (the run's day and each
  trailing day) with the network's own aggregated report (per affiliate and offer: approved
  conversions, payout, revenue; no granular query), and any day whose change is still
  unannounced; writes `_reconciliation.json` beside each day's manifest. A day the run
  re-pulled unchanged since it reconciled (same checksum and tolerance) keeps that verdict.
  Beyond the tolerance (exact by default) it fails after comparing every day, naming the days
  and cells (param
  `on_mismatch`: `fail`, or `warn` to land and flag the day `"reconciled": false`).
- `publish_conversions`: the `affiliate_network_conversions` asset event, listing every day
  whose change no run has announced yet (this run's, or a failed run's), each with its
  transition counts and its own verdict (`"reconciled"`: true, false, or null when not
  compared, and the reason); **skipped** when nothing is pending (no event, so DAGs scheduled
  on the asset run only when data changed). The pulls carry no outlet and always end green
  when they worked.
- `affiliate_report_targets`: reads `include/reports.yaml` (one entry per affiliate
  connection, with its columns).
- `affiliate_report` (mapped, one task per affiliate; a failing affiliate is retried alone):
  the affiliate entity table into `<base>/affiliate_reports/affiliate=<id>/date=YYYY-MM-DD/`.

`<base>`: Airflow Variable `affiliate_network_data_base` (local path or `s3://...`), else env
`AFFILIATE_NETWORK_DATA_BASE`, else `<project>/data`.

**Partitions.** A partition is complete iff it holds `_manifest.json` (row count, content
checksum, request parameters, pull time, package version). Publishing is atomic: a crashed or
killed task never leaves a partition that looks complete. The same API data gives the same
`content_checksum`: a rerun of an unchanged day leaves its partition as it is, a changed day
is replaced exactly.

**Which day a run lands.** A run with logical date D covers the data interval [D-1, D) and lands
D-1; a backfill "from D1 to D2" (the UI's Backfill dialog or `airflow backfill create`, dates
inclusive) makes runs whose data intervals start at D1..D2, so it lands D1..D2. Each run logs
"Run ... lands YYYY-MM-DD" in `pull_conversions` and keeps it in its XCom summary (`lands`);
Airflow 3 lets no task set the run's note.

**Backfill.** `airflow backfill create --dag-id affiliate_daily_reports --from-date 2026-01-01
--to-date 2026-01-31`, or Trigger → Backfill in the UI: one run per day, each lands its own day.
A backfill run re-pulls **no** trailing day unless its conf sets `trailing_days` (tick
"Override parameters on existing runs" and give a number, or `--dag-run-conf
'{"trailing_days": 7}'`): without that box the dialog sends no conf, and the default 7 would
make every backfill run pull the same week again.

**Re-landing a day that already has a run.** Triggering that logical date again answers
`409 Conflict ... Unique constraint violation`: open the existing run (Grid view) and **clear**
`pull_conversions` with its downstream tasks instead; the day is pulled again and replaced
exactly (same data, same checksum). For a range, a backfill with "Reprocess behavior" = all
runs (`--reprocess-behavior completed`) does the same.

**Days before the network's data** are refused, not landed as empty partitions: a day older
than the conversion report's 365-day history, or before env `AFFILIATE_NETWORK_FIRST_DAY`
(the network's first day with data, when set), fails the pull with the day to start from and
requests nothing; trailing days before that first day are left out of the re-pull.

**On failure.** Retries with exponential backoff (2 min doubling to 30 min). Every task is
safe to clear and rerun. A `ReportRowLimitError` on `affiliate_report` means a single day still
hits the API's 10,000-row cap with the configured columns: drop a high-cardinality column
(sub1..sub5, hour) or add filters in `include/reports.yaml`. Config errors
(`ConfigValidationError`) name the file and the field.
"""

default_args = {
    "owner": "affiliate-data",
    "retries": 3,
    "retry_delay": dt.timedelta(minutes=2),
    "retry_exponential_backoff": True,
    "max_retry_delay": dt.timedelta(minutes=30),
    "execution_timeout": dt.timedelta(hours=2),
}


@dag(
    dag_id="affiliate_daily_reports",
    schedule=CronDataIntervalTimetable("0 0 * * *", timezone=NETWORK_TIMEZONE),
    start_date=pendulum.datetime(2026, 1, 1, tz=NETWORK_TIMEZONE),
    # History is loaded with `airflow backfill create`, not by catching up on deploy.
    catchup=False,
    # Runs overlap in the days they write (trailing window): one at a time.
    max_active_runs=1,
    default_args=default_args,
    tags=["affiliate-network", "reporting"],
    doc_md=DOC_MD,
    params={
        "trailing_days": Param(
            DEFAULT_TRAILING_DAYS,
            **PARAM_DIALECT,
            type="integer",
            minimum=0,
            maximum=60,
            title="Trailing days to re-pull",
            description=(
                "Days before the run's day pulled again, so late approvals, rejections and "
                "corrections reach their day. A backfill run re-pulls none unless this is "
                "sent (the backfill dialog's override box)."
            ),
        ),
        "on_mismatch": Param(
            "fail",
            **PARAM_DIALECT,
            type="string",
            enum=["fail", "warn"],
            title="When a day differs from the network's report",
            description=(
                "fail: the reconciliation task fails naming the days and cells; warn: the "
                'day stays landed and is flagged "reconciled": false.'
            ),
        ),
    },
)
def affiliate_daily_reports() -> None:
    # No outlet on the pulls nor on the reconciliation: the publish step announces the changes
    # no run has announced yet, each partition with its verdict, and is skipped (no asset
    # event) when there is none, while the pulls themselves end green. Every day the run lands
    # or re-lands is reconciled before it; a day that does not reconcile fails that task, the
    # publish step is upstream_failed and the changes stay pending for the next run.
    pull = ConversionReportOperator(
        task_id="pull_conversions",
        **reporting_pool(),
        show_conversions=True,
        show_events=True,
        outlets=[],
    )
    repull = ConversionReportOperator(
        task_id="repull_trailing_window",
        **reporting_pool(),
        lookback_days="{{ params.trailing_days }}",
        # A backfill run re-pulls trailing days only when its conf asks (the UI's dialog
        # sends no conf unless its override box is ticked: the default would apply).
        backfill_lookback_param="trailing_days",
        show_conversions=True,
        show_events=True,
        outlets=[],
    )
    reconcile = ReconciliationOperator(
        task_id="reconcile_conversions",
        **reporting_pool(),
        source_task_ids=["pull_conversions", "repull_trailing_window"],
        on_mismatch="{{ params.on_mismatch }}",
        outlets=[],
        # A difference is not transient: re-pull the day instead (ReconciliationError fails
        # without retries); transport trouble still gets the default retries.
    )
    publish = PublishChangesOperator(
        task_id="publish_conversions",
        dataset="conversions",
        source_task_ids=["pull_conversions", "repull_trailing_window"],
        reconciliation_task_id="reconcile_conversions",
    )
    pull >> repull >> reconcile >> publish

    # One mapped-task kwargs dict per affiliate connection in include/reports.yaml.
    targets = AffiliateReportTargetsOperator(task_id="affiliate_report_targets")

    # Outlets on .partial(): a mapped operator's __init__ runs only at execution, so an outlet
    # set there is never registered and the Assets view never lists the dataset.
    AffiliateReportOperator.partial(
        task_id="affiliate_report", outlets=[dataset_asset("affiliate_reports")]
    ).expand_kwargs(targets.output)


# Notifiers and deadline checkpoints; they read include/notifications.yaml when they fire.
attach_notifications(affiliate_daily_reports())
