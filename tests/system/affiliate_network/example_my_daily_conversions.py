"""A DAG of your own, built from the provider's hook and operators (an example DAG).

Every day after midnight in the network's timezone it lands yesterday's conversions with
:class:`~affiliate_network.operators.conversion_report.ConversionReportOperator` (its own dataset
folder, ``my_conversions``, beside the product DAG's), then counts yesterday's conversions per
offer with :class:`~affiliate_network.hooks.affiliate_network.AffiliateNetworkHook` in a task of
its own. Copy it into your DAGs folder and change what you need; the reference of every argument
is ``docs/reference.md``.

Kept here as Airflow's providers keep theirs (``tests/system/<provider>/example_*.py``): the test
beside it, ``test_example_my_daily_conversions.py``, loads it and runs it against the sandbox.

What it shows:

- The timetable's zone is the network's: the check below fails the file's import when
  ``include/network.yaml`` says another zone (a run would land a half day), and the operator
  checks again when it runs.
- The operator finds the network's timezone, currency and the data base itself
  (``include/network.yaml``, the Variable ``affiliate_network_data_base``); a task of your own
  opens the hook, asks, and closes it.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import dag, task

from affiliate_network.compat import CronDataIntervalTimetable
from affiliate_network.operators.conversion_report import ConversionReportOperator
from affiliate_network.settings.agreement import check_network_timezone

#: The network's reporting timezone (``timezone`` in include/network.yaml).
NETWORK_TIMEZONE = "UTC"
check_network_timezone(NETWORK_TIMEZONE, setting="NETWORK_TIMEZONE", where=__file__)
CONN_ID = "affiliate_network_default"


@dag(
    dag_id="example_my_daily_conversions",
    # Midnight in the network's zone: the data interval is exactly the network's day before.
    # (A later hour, "0 2 * * *", would make the interval [D-1 02:00, D 02:00), two network
    # days, one of them unfinished: keep the cron at midnight and wait with a sensor instead.)
    schedule=CronDataIntervalTimetable("0 0 * * *", timezone=NETWORK_TIMEZONE),
    start_date=pendulum.datetime(2026, 1, 1, tz=NETWORK_TIMEZONE),
    catchup=False,
    max_active_runs=1,
    default_args={"owner": "me", "retries": 2, "retry_delay": pendulum.duration(minutes=2)},
    tags=["affiliate-network", "example"],
    doc_md=__doc__,
)
def example_my_daily_conversions() -> None:
    # One partition per day under <data base>/my_conversions/date=YYYY-MM-DD/, with a manifest;
    # a rerun of an unchanged day leaves it as it is.
    land = ConversionReportOperator(
        task_id="land_conversions",
        affiliate_network_conn_id=CONN_ID,
        dataset="my_conversions",
        show_conversions=True,
        show_events=False,
        outlets=[],
    )

    @task
    def conversions_per_offer(data_interval_start=None) -> dict[str, int]:  # type: ignore[no-untyped-def]
        """Yesterday's conversions per offer, asked through the hook (one paged pull)."""
        from affiliate_network.api.timezones import id_for_name
        from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook

        day = pendulum.instance(data_interval_start).in_timezone(NETWORK_TIMEZONE).date()
        hook = AffiliateNetworkHook(affiliate_network_conn_id=CONN_ID)
        counts: dict[str, int] = {}
        try:
            for record in hook.iter_conversions(
                from_date=day, to_date=day, timezone_id=id_for_name(NETWORK_TIMEZONE)
            ):
                offer = record["relationship"]["offer"]["name"]
                counts[offer] = counts.get(offer, 0) + 1
        finally:
            hook.close()
        print(f"{day}: {sum(counts.values())} conversions over {len(counts)} offers")
        return dict(sorted(counts.items()))

    land >> conversions_per_offer()


example_my_daily_conversions()
