"""Push the desired offer state in ``include/offer_state.yaml`` to the network, Terraform-style.

validate -> plan -> apply offer groups (caps) -> apply offers (payouts) -> sync scrub rates ->
sync channels / categories / offer URL status. Thin: the work lives in
``affiliate_network.operators.offer_state_sync`` and ``affiliate_network.sync``.
"""

from __future__ import annotations

import os

import pendulum
from airflow.sdk import Param, dag

from affiliate_network.notify import attach_notifications

# Operators only, no @task: the decorator loads the standard provider's PythonOperator module
# into every parse (tests/dags/test_dag_integrity.py pins it).
from affiliate_network.operators.base import PARAM_DIALECT
from affiliate_network.operators.offer_state_sync import (
    OfferCatalogSyncOperator,
    OfferGroupCapsSyncOperator,
    OfferPayoutSyncOperator,
    OfferStateSyncOperator,
    ScrubRateSyncOperator,
)
from affiliate_network.operators.steps import OfferStateValidateOperator

#: Optional cron schedule (e.g. "0 6 * * 1-5"); unset = manual trigger only. An environment
#: setting, read without I/O at parse time.
SCHEDULE = os.environ.get("AFFILIATE_OFFER_SYNC_SCHEDULE") or None
CONN_ID = "affiliate_network_default"
# A person triggering from the UI gets a dry run unless they untick it; scheduled runs apply,
# on an armed deployment only (the operators read AFFILIATE_OFFER_SYNC_ARMED when they run).
DRY_RUN = "{{ params.dry_run if dag_run.run_type == 'manual' else false }}"
SYNC_ARGS = {
    "state_file": "{{ params.state_file }}",
    "affiliate_network_conn_id": CONN_ID,
    "force": "{{ params.force }}",
    "resolve_unknown": "{{ params.resolve_unknown }}",
    "accept_drift": "{{ params.accept_drift }}",
}

#: The doc's first line, also the DAG's description (the DAG list and the DAG page's header).
ARMING_LINE = (
    "Sends to the network only on a deployment that set AFFILIATE_OFFER_SYNC_ARMED=true; until "
    "then every run, scheduled or manual, whatever the trigger form says, only plans and "
    "reports: nothing is sent."
)

_HOW_IT_WORKS = """
### Offer sync

Pushes `include/offer_state.yaml` (reviewed in git) to the network.

1. **validate** every value against the API spec (file, object, field and line in errors).
2. **plan**: create / update / unchanged per object with a field-level diff against the ledger
   (`<data base>/sync/ledger-<network>.json`, one per network whatever connection reaches it).
   Read its log.
3. **apply** offer groups (caps), offers (payouts), scrub rates, channels/categories/URL status.
   Unchanged objects are not sent; each success is recorded in the ledger.

Triggered from the UI, `dry_run` is **on**: read the plan, then trigger again with it off.
The shipped `include/offer_state.yaml` is a template: its placeholders are refused until they
are replaced with your network's ids (`docs/offer-sync.md`).

On-call:
- *UNKNOWN OUTCOME* for a scrub rate: check the network UI for the named setting, then trigger
  with `resolve_unknown` = `{"<key>": <id found>}` or `{"<key>": "absent"}`.
- *DRIFT*: a created scrub rate's definition changed; revert the YAML, or fix it by hand and
  trigger with `accept_drift` = `["<key>"]`.
- Someone edited an object in the UI: trigger with `force` = `["<key>"]` to send ours again.
"""
DOC_MD = f"\n**{ARMING_LINE}**\n{_HOW_IT_WORKS}"


@dag(
    dag_id="affiliate_offer_sync",
    schedule=SCHEDULE,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    render_template_as_native_obj=True,
    tags=["affiliate-network", "offers", "sync"],
    description=ARMING_LINE,
    doc_md=DOC_MD,
    default_args={
        "owner": "affiliate-ops",
        "retries": 2,
        "retry_delay": pendulum.duration(minutes=1),
        "retry_exponential_backoff": True,
    },
    # Optional params are typed ["null", ...] with a None default: the trigger form shows them
    # as optional (a plain "array" param is marked required); the operators read None as empty.
    params={
        "dry_run": Param(
            True,
            **PARAM_DIALECT,
            type="boolean",
            title="Dry run",
            description="Only plan and log the changes; send nothing (manual runs only). "
            "Nothing is sent on a deployment that has not set AFFILIATE_OFFER_SYNC_ARMED=true.",
        ),
        "state_file": Param(
            "offer_state.yaml",
            **PARAM_DIALECT,
            type="string",
            minLength=1,
            title="Desired-state file",
            description="The YAML file in the include folder that says what the network holds.",
        ),
        "force": Param(
            None,
            **PARAM_DIALECT,
            type=["null", "array"],
            items={"type": "string"},
            title="Send again even if unchanged",
            description="Keys of objects to send although the ledger says unchanged, e.g. "
            "after someone edited them in the network's UI.",
        ),
        "resolve_unknown": Param(
            None,
            **PARAM_DIALECT,
            type=["null", "object"],
            title="Resolve unknown outcomes",
            description='For a create whose outcome is unknown: {"<key>": <id found on the '
            'network>} or {"<key>": "absent"}.',
        ),
        "accept_drift": Param(
            None,
            **PARAM_DIALECT,
            type=["null", "array"],
            items={"type": "string"},
            title="Accept drift",
            description="Keys of scrub rates fixed by hand on the network to match the YAML.",
        ),
    },
)
def affiliate_offer_sync() -> None:
    # Fails fast on any invalid value; returns the object counts.
    validate = OfferStateValidateOperator(
        task_id="validate", state_file="{{ params.state_file }}", retries=1
    )
    plan = OfferStateSyncOperator(
        task_id="plan",
        sections=[
            "offer_groups",
            "offers",
            "scrub_rates",
            "channels",
            "categories",
            "offer_urls",
        ],
        dry_run=True,
        **SYNC_ARGS,
    )
    caps = OfferGroupCapsSyncOperator(task_id="apply_offer_groups", dry_run=DRY_RUN, **SYNC_ARGS)
    payouts = OfferPayoutSyncOperator(task_id="apply_offers", dry_run=DRY_RUN, **SYNC_ARGS)
    scrub = ScrubRateSyncOperator(task_id="sync_scrub_rates", dry_run=DRY_RUN, **SYNC_ARGS)
    catalog = OfferCatalogSyncOperator(task_id="sync_catalog", dry_run=DRY_RUN, **SYNC_ARGS)

    validate >> plan >> caps >> payouts >> scrub >> catalog


# Notifiers and deadline checkpoints; they read include/notifications.yaml when they fire.
attach_notifications(affiliate_offer_sync())
