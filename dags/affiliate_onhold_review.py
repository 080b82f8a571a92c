"""Decide on-hold conversions with ``include/onhold_rules.yaml``; doubtful ones go to a person.

review (rules, guardrails, apply approve/reject, audit) -> review_requests (one per rule with
``review`` decisions) -> human_review (Airflow human-in-the-loop, mapped per rule) ->
apply_human_decisions. Thin: the operators live in ``affiliate_network.operators`` and the work in
the job library ``affiliate_network.review``.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Mapping
from typing import Any

import pendulum
from airflow.providers.standard.operators.hitl import HITLOperator
from airflow.sdk import Param, TriggerRule, dag

from affiliate_network.notify import attach_notifications

# Operators only, no @task: the decorator loads the standard provider's PythonOperator module
# into every parse (tests/dags/test_dag_integrity.py pins it).
from affiliate_network.operators.onhold_review import MAX_LOOKBACK_DAYS, OnHoldReviewOperator
from affiliate_network.operators.onhold_review_apply import OnHoldReviewApplyOperator

# Pool and slots of the tasks that send requests to /networks/reporting/* (off unless the
# deployment names its pool: AFFILIATE_NETWORK_REPORTING_POOL).
from affiliate_network.operators.pools import reporting_pool
from affiliate_network.operators.steps import ReviewRequestsOperator
from affiliate_network.review.money import payout_ceilings
from affiliate_network.review.numbers import MAX_HOURS, env_number
from affiliate_network.review.requests import KEEP_PARAM, OPTION_KEEP, REVIEW_OPTIONS
from affiliate_network.review.rules_files import DEFAULT_RULES_FILE, rules_file_choices

#: Settings from the environment (no I/O at parse time), each checked where it is read: a value
#: that is not a finite number in its range (``nan``, ``inf``, ``-1``) fails the DAG file's import
#: with a ConfigValidationError naming the variable. Schedule: cron or preset, "none" = manual.
SCHEDULE = os.environ.get("AFFILIATE_ONHOLD_REVIEW_SCHEDULE", "@hourly")
SCHEDULE = None if SCHEDULE.lower() == "none" else SCHEDULE
CONN_ID = "affiliate_network_default"
#: The trigger form's rules files: the include folder's onhold_rules*.yaml (one listing, no
#: reads); the operator checks the rendered value against the folder again before reading.
RULES_FILES = rules_file_choices()
LOOKBACK_DAYS = int(
    env_number("AFFILIATE_ONHOLD_LOOKBACK_DAYS", 7, low=1, high=MAX_LOOKBACK_DAYS, whole=True)
)
# Hours: "none" is 0.
MIN_AGE_HOURS = env_number(
    "AFFILIATE_ONHOLD_MIN_AGE_HOURS", 1.0, low=0, high=MAX_HOURS, unit="hours", none=0.0
)
CHUNK_SIZE = int(env_number("AFFILIATE_ONHOLD_CHUNK_SIZE", 100, low=1, high=2000, whole=True))
REJECT_STATUS = os.environ.get("AFFILIATE_ONHOLD_REJECT_STATUS", "rejected")
# Guardrails: "none" switches one off.
MAX_REJECT_SHARE = env_number("AFFILIATE_ONHOLD_MAX_REJECT_SHARE", 0.5, low=0, high=1, none=None)
MAX_REJECT_COUNT = env_number(
    "AFFILIATE_ONHOLD_MAX_REJECT_COUNT", 1000, low=0, whole=True, none=None
)
#: Per currency, "USD=2000,EUR=1800" (review.money.payout_ceilings); a plain number is refused.
MAX_APPROVED_PAYOUT = payout_ceilings(
    os.environ.get("AFFILIATE_ONHOLD_MAX_APPROVED_PAYOUT"), "AFFILIATE_ONHOLD_MAX_APPROVED_PAYOUT"
)
#: A reviewer's "Keep on hold" is not asked again for this long (unless the data changes).
KEEP_DECISION_HOURS = env_number(
    "AFFILIATE_ONHOLD_KEEP_DECISION_HOURS", 24.0, low=0, high=MAX_HOURS, unit="hours", none=0.0
)
#: How long a review request waits; then "Keep on hold" applies and the next run asks again
#: (max_active_runs=1: a waiting run holds back the next hourly run).
#: A plain timedelta: the HITL request is serialized, and pendulum's Duration is not supported.
MAX_REVIEW_MINUTES = 10_080  # a week
REVIEW_TIMEOUT = datetime.timedelta(
    minutes=env_number(
        "AFFILIATE_ONHOLD_REVIEW_MINUTES", 50, low=1, high=MAX_REVIEW_MINUTES, whole=True
    )
)

#: The trigger form's ``mode`` choice.
MODE_DRY_RUN, MODE_WRITE = "dry_run", "write"
MODE_LABELS = {
    MODE_DRY_RUN: "Dry run: decide and report, write nothing",
    MODE_WRITE: "Write decisions to the network",
}


def dry_run_choice(
    conf: dict[str, Any] | None, params: Any = None, run_type: Any = None
) -> bool | str | None:
    """The review's ``dry_run`` from the run's conf (and, for a manual run, its params).

    ``dry_run`` (true/false, as API callers, the demo and older scripts send it) wins; else the
    form's ``mode``. A manual run without either (``airflow tasks test ... -t '{"mode":
    "write"}'``, an API trigger without conf) reads ``params.mode``, whose default is the dry
    run. Otherwise (a scheduled run, a backfill): ``None``, and the operator decides by run
    type (manual: dry run; scheduled, backfill: write).

    :param conf: ``dag_run.conf``.
    :param params: the run's ``params`` (read for manual runs only: a scheduled run also
        carries the form's default, which must not turn it into a dry run).
    :param run_type: ``dag_run.run_type``.
    """
    conf = conf or {}
    if conf.get("dry_run") is not None:
        return conf["dry_run"]
    mode = conf.get("mode")
    if mode is None and str(run_type or "").lower().endswith("manual"):
        mode = params.get("mode") if isinstance(params, Mapping) else None
    return None if mode is None else mode == MODE_DRY_RUN


#: The doc's first line, also the DAG's description (the DAG list and the DAG page's header).
ARMING_LINE = (
    "Writes to the network only on a deployment that set AFFILIATE_ONHOLD_ARMED=true; until "
    "then every run, scheduled or manual, whatever the trigger form says, only decides and "
    "writes its audit: nothing is approved or rejected and nobody is asked."
)

DOC_MD = f"""
**{ARMING_LINE}**

### On-hold review

Every hour, conversions of the last days whose **current** on-hold state (the last entry of
`relationship.on_hold_snapshots`) is `on_hold` are decided by `include/onhold_rules.yaml`
(reviewed in git; check it with `affiliate-network-rules validate FILE`). Rules run top to
bottom and the **first match wins**.

**Decisions depend on the traffic, not on earlier runs.** Aggregates (`count_same`,
`ratio_to_median`, ...) count every conversion of the window whatever its on-hold state
(approved, rejected, still held, never held), plus the traffic a windowed aggregate needs before
the window. A conversion is decided only once its windowed aggregates are complete
(`within_hours` after it) and it has been on hold `AFFILIATE_ONHOLD_MIN_AGE_HOURS`. So a rerun
after a crash, the next hourly run and an overlapping run decide what one clean run decides.
Days are cut in the network's reporting timezone (`include/network.yaml`).

| action | effect |
|---|---|
| `approve` | approved on the network (`PATCH /networks/reporting/onhold`, status `approved`) |
| `reject` | rejected on the network (status `rejected`, configurable) |
| `review` | a person decides here, under **Required actions** (one request per rule) |
| `hold` | stays on hold; later rules are not tried |
| no rule matched | stays on hold |

**Guardrails**, checked on the run's whole plan **before the first write** (the task fails,
nothing is sent, the message names the top rejecting rules). The plan is every conversion of
the window that has been on hold and is old enough, whatever its state now, so a retry after a
crash mid-apply and the next run judge what one clean run judges:
- `max_reject_share`: rejections / conversions a rule decided (default 50 %; undecided ones are
  left out, the stricter reading);
- `max_reject_count`: rejections in the plan (default 1000);
- `max_approved_payout`: payout of the plan's approvals **per currency** (off unless set:
  `AFFILIATE_ONHOLD_MAX_APPROVED_PAYOUT="USD=2000,EUR=1800"`). Payouts of different currencies
  are never added; once a ceiling is set, approvals in a currency without one stop the run.

Writes go in chunks; right before each chunk the conversions are searched again and only
those **still on hold** are sent, then read back (waiting up to 10 s: the network applies
them asynchronously): one still not showing the new state is reported (`accepted_not_landed`,
or `readback_mismatches` when it shows another state) and decided again by the next run. A
rerun never approves or rejects twice. The audit calls applied only what the read-back shows.

**One writer per network**: one active run (`max_active_runs=1`), one running review and one
running apply task at a time (`max_active_tis_per_dag=1`), and a write lease beside the audit
(`<data base>/onhold_review/_leases/<conn id>.json`) that a second writer (another DAG, a
backfill) waits for, with a log line naming the holder. On a local data base it is a kernel lock
that a killed holder releases at once; on object storage it expires 10 min after its last renewal.

**Arming** (the first line above): the environment variable `AFFILIATE_ONHOLD_ARMED` (`true`
/ `false`, unset = not armed) is read when each task runs, so arming or disarming needs no
re-parse; a value other than true/false fails the task naming it. Unpausing the DAG (the
trigger form's "Unpause on trigger" is ticked by default) then starts hourly runs that only
plan. Not armed, the task log says so and the summary has `"armed": false`.

**Dry run** (on an armed deployment): the trigger form's **Mode** starts on *Dry run:
decide and report, write nothing* (it decides and writes the audit without changing
anything); choose *Write decisions to the network* to write. Scheduled runs and backfills
without conf write. Through the API, conf `{{"mode": "write"}}` or the older
`{{"dry_run": false}}` writes; `{{"dry_run": true}}` never writes; a manual run without either
is a dry run. In a dry run a guardrail
that would trip is reported (`guardrail_tripped` in the summary, a warning in the log) instead
of failing the task.

**Human review**: each request lists the conversions the rule flagged (highest payout first),
with the values that matched. Choose *Approve all*, *Reject all* or *Keep on hold*; list
conversion ids (or on-hold ids, any letter case) in `keep_on_hold` to exclude them. An id that
matches none of the request's conversions writes nothing of that request (it is asked again
next run) and fails `apply_human_decisions` naming the id. Only those exact options write. *Keep on
hold* is remembered (who, when, which rule): those conversions are not asked about again for
`AFFILIATE_ONHOLD_KEEP_DECISION_HOURS` (24) unless their own data changes (payout, sale amount,
the fields the rule tested; not aggregates over the traffic). Unanswered requests (the
timeout) or an unexpected answer keep the conversions on hold and the next run asks again.

**Audit**: `<data base>/onhold_review/affiliate_onhold_review/<run id>/decisions-attempt-N.jsonl`
(one line per decision: conversion id, on-hold id, rule, action, matched values, applied or not
and why) and `human-attempt-N.jsonl` for reviewer choices. The task log prints counts per rule.

Settings (environment): `AFFILIATE_ONHOLD_REVIEW_SCHEDULE` (default `@hourly`, `none` =
manual), `AFFILIATE_ONHOLD_LOOKBACK_DAYS` (7), `AFFILIATE_ONHOLD_MIN_AGE_HOURS` (1),
`AFFILIATE_ONHOLD_CHUNK_SIZE` (100), `AFFILIATE_ONHOLD_REJECT_STATUS`,
`AFFILIATE_ONHOLD_MAX_REJECT_SHARE`, `AFFILIATE_ONHOLD_MAX_REJECT_COUNT`,
`AFFILIATE_ONHOLD_MAX_APPROVED_PAYOUT`, `AFFILIATE_ONHOLD_REVIEW_MINUTES` (50),
`AFFILIATE_ONHOLD_KEEP_DECISION_HOURS` (24); `AFFILIATE_ONHOLD_ARMED` (unset: not armed, read
at run time). A value that is `nan`, infinite, out of its range
or not a number stops this file's import with an error naming the variable.
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
    user_defined_macros={"dry_run_choice": dry_run_choice},
    default_args={
        "owner": "affiliate-ops",
        "retries": 2,
        "retry_delay": pendulum.duration(minutes=2),
        "retry_exponential_backoff": True,
    },
    params={
        # A labelled choice, not a switch: a switch cannot show "empty", so untouched (dry run)
        # and off (write) looked alike (issue 19). Only manual runs read it (dry_run_choice).
        "mode": Param(
            MODE_DRY_RUN,
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
        dry_run="{{ dry_run_choice(dag_run.conf, params, dag_run.run_type) }}",
        lookback_days=LOOKBACK_DAYS,
        min_age_hours=MIN_AGE_HOURS,
        chunk_size=CHUNK_SIZE,
        reject_status=REJECT_STATUS,
        max_reject_share=MAX_REJECT_SHARE,
        max_reject_count=None if MAX_REJECT_COUNT is None else int(MAX_REJECT_COUNT),
        max_approved_payout=MAX_APPROVED_PAYOUT,
        keep_decision_hours=KEEP_DECISION_HOURS,
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
        response_timeout=REVIEW_TIMEOUT,
    ).expand_kwargs(requests)
    OnHoldReviewApplyOperator(
        task_id="apply_human_decisions",
        **reporting_pool(),
        affiliate_network_conn_id=CONN_ID,
        summary=review.output,
        requests=requests,
        responses=human.output,
        reject_status=REJECT_STATUS,
        chunk_size=CHUNK_SIZE,
        trigger_rule=TriggerRule.NONE_FAILED,
        max_active_tis_per_dag=1,
    )


# Notifiers and deadline checkpoints; they read include/notifications.yaml when they fire.
attach_notifications(affiliate_onhold_review())
