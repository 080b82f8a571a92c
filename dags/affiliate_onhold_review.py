"""Decide on-hold conversions with ``include/onhold_rules.yaml``; doubtful ones go to a person.

review (rules, guardrails, apply approve/reject, audit) -> review_requests (one per rule with
``review`` decisions) -> human_review (Airflow human-in-the-loop, mapped per rule) ->
apply_human_decisions. Thin: the operators live in ``affiliate_network.operators`` and the work in
the job library ``affiliate_network.review``.
"""

from __future__ import annotations

import os

import pendulum
from airflow.providers.standard.operators.hitl import HITLOperator
from airflow.sdk import Param, TriggerRule, dag

from affiliate_network.notify import attach_notifications

# Operators only, no @task: the decorator loads the standard provider's PythonOperator module
# into every parse (tests/dags/test_dag_integrity.py pins it).
from affiliate_network.operators.base import PARAM_DIALECT
from affiliate_network.operators.onhold_review import OnHoldReviewOperator
from affiliate_network.operators.onhold_review_apply import OnHoldReviewApplyOperator

# Pool and slots of the tasks that send requests to /networks/reporting/* (off unless the
# deployment names its pool: AFFILIATE_NETWORK_REPORTING_POOL).
from affiliate_network.operators.pools import reporting_pool
from affiliate_network.operators.steps import ReviewRequestsOperator
from affiliate_network.review.human_requests import KEEP_PARAM, OPTION_KEEP, REVIEW_OPTIONS
from affiliate_network.review.options import MODE_DRY_RUN, MODE_WRITE
from affiliate_network.review.rules_files import DEFAULT_RULES_FILE, rules_file_choices

#: A deployment choice, so the environment (the rules file, in git, is the same everywhere):
#: cron or preset, "none" = manual only. The review's guardrails and tuning are the rules
#: file's ``review:`` section, read when the task runs.
SCHEDULE = os.environ.get("AFFILIATE_ONHOLD_REVIEW_SCHEDULE", "@hourly")
SCHEDULE = None if SCHEDULE.lower() == "none" else SCHEDULE
CONN_ID = "affiliate_network_default"
#: The trigger form's rules files: the include folder's onhold_rules*.yaml (one listing, no
#: reads); the operator checks the rendered value against the folder again before reading.
RULES_FILES = rules_file_choices()
MODE_LABELS = {
    MODE_DRY_RUN: "Dry run: decide and report, write nothing",
    MODE_WRITE: "Write decisions to the network",
}

#: The doc's first line, also the DAG's description (the DAG list and the DAG page's header).
ARMING_LINE = (
    "Writes to the network only on a deployment that set AFFILIATE_ONHOLD_ARMED=true; until "
    "then every run, scheduled or manual, whatever the trigger form says, only decides and "
    "writes its audit: nothing is approved or rejected and nobody is asked."
)

DOC_MD = f"""
**{ARMING_LINE}**

### On-hold review

Every hour, on-hold conversions of the last days are decided by a rules file
(`include/onhold_rules.yaml`, its `review:` section holds the guardrails and tuning); the first
matching rule wins. `approve`/`reject` write to the network after the guardrails pass, `review`
asks a person under **Required actions**, `hold` and unmatched conversions stay on hold.
The trigger form's **Mode** starts on a dry run. Every decision goes to the audit file.

The manual is `docs/onhold-review.md` in the project (arming, dry runs, guardrails, human
review, audit); every setting is listed in `docs/configuration.md`.
"""


@dag(
    dag_id="affiliate_onhold_review",
    schedule=SCHEDULE,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    render_template_as_native_obj=True,
    tags=["affiliate-network", "on-hold", "review"],
    description=ARMING_LINE,
    doc_md=DOC_MD,
    default_args={
        "owner": "affiliate-ops",
        "retries": 2,
        "retry_delay": pendulum.duration(minutes=2),
        "retry_exponential_backoff": True,
    },
    params={
        # A labelled choice, not a switch: a switch cannot show "empty", so untouched (dry run)
        # and off (write) look alike. Only manual runs read it (review.options.dry_run_choice).
        "mode": Param(
            MODE_DRY_RUN,
            **PARAM_DIALECT,
            type="string",
            enum=[MODE_DRY_RUN, MODE_WRITE],
            values_display=MODE_LABELS,
            title="Mode",
            description="A manual run only decides and reports unless you choose to write. "
            "Scheduled runs write. Nothing is written on a deployment that has not set "
            "AFFILIATE_ONHOLD_ARMED=true.",
        ),
        "rules_file": Param(
            DEFAULT_RULES_FILE if DEFAULT_RULES_FILE in RULES_FILES else RULES_FILES[0],
            **PARAM_DIALECT,
            type="string",
            enum=RULES_FILES,
            title="Rules file",
            description="One of the include folder's onhold_rules*.yaml files.",
        ),
    },
)
def affiliate_onhold_review() -> None:
    review = OnHoldReviewOperator(
        task_id="review",
        **reporting_pool(),
        affiliate_network_conn_id=CONN_ID,
        rules_file="{{ params.rules_file }}",
        dry_run=None,  # the run decides: conf, the form's mode, its type
        max_active_tis_per_dag=1,
    )
    requests = ReviewRequestsOperator(task_id="review_requests", summary=review.output).output
    human = HITLOperator.partial(
        task_id="human_review",
        options=REVIEW_OPTIONS,
        defaults=[OPTION_KEEP],
        params={
            # Nullable: an empty field must not disable the buttons (a required string would).
            KEEP_PARAM: Param(
                None,
                type=["null", "string"],
                description="Conversion ids to leave on hold (comma separated).",
            )
        },
    ).expand_kwargs(requests)  # each with its response_timeout (review.review_minutes)
    OnHoldReviewApplyOperator(
        task_id="apply_human_decisions",
        **reporting_pool(),
        affiliate_network_conn_id=CONN_ID,
        summary=review.output,
        requests=requests,
        responses=human.output,
        trigger_rule=TriggerRule.NONE_FAILED,
        max_active_tis_per_dag=1,
    )


# Notifiers and deadline checkpoints; they read include/notifications.yaml when they fire.
attach_notifications(affiliate_onhold_review())
