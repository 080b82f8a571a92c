"""``affiliate_onhold_review`` end to end: answer its human reviews, check the network's state.

The DAG asks a person (Airflow human-in-the-loop, "Required actions" in the UI) about the
conversions its rules flag for review. The stage answers like a reviewer would, through the
REST API (``PATCH .../hitlDetails``), choosing "Approve all". Then, from the outside:

- every run succeeded and wrote its audit file;
- each conversion an audit says was approved/rejected shows that state in the network now;
- no on-hold id was sent in a PATCH twice, across all runs (no decision applied twice).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from typing import Any

from .harness import AirflowCluster, E2EError, wait_all_runs

ONHOLD = "affiliate_onhold_review"
#: The reviewer's choice (one of the DAG's HITL options) and the state it leads to.
REVIEW_CHOICE = "Approve all"
REVIEW_STATE = "approved"
_STATE_OF_ACTION = {"approve": "approved", "reject": "rejected", "review": REVIEW_STATE}


def onhold_conf() -> dict[str, Any]:
    """Conf of a manual run that applies its decisions (what the UI form sends, unticked)."""
    return {"dry_run": False}


def answer_pending_reviews(cluster: AirflowCluster) -> int:
    """Answer every open review request of the DAG as a reviewer; return how many."""
    pending = cluster.api.call(
        "GET",
        f"/dags/{ONHOLD}/dagRuns/~/hitlDetails",
        params={"response_received": False, "limit": 100},
    )["hitl_details"]
    for detail in pending:
        ti = detail["task_instance"]
        if REVIEW_CHOICE not in detail["options"]:
            raise E2EError(f"review request offers {detail['options']}, not {REVIEW_CHOICE!r}")
        cluster.wait_pause_taken(ti)
        cluster.api.call(
            "PATCH",
            f"/dags/{ONHOLD}/dagRuns/{ti['dag_run_id']}/taskInstances/{ti['task_id']}"
            f"/{ti['map_index']}/hitlDetails",
            json={"chosen_options": [REVIEW_CHOICE], "params_input": {"keep_on_hold": ""}},
        )
    return len(pending)


def wait_onhold_runs(cluster: AirflowCluster, timeout: float = 400) -> tuple[list[dict], int]:
    """Wait for every run to finish, answering review requests as they appear."""
    answered = 0

    def _answer() -> None:
        nonlocal answered
        answered += answer_pending_reviews(cluster)

    runs = wait_all_runs(cluster, ONHOLD, timeout, interval=3, on_poll=_answer)
    return runs, answered


def _read_audit(path: str) -> list[dict]:
    from affiliate_network.reports.storage import as_storage_path

    text = as_storage_path(path).read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _current_states(sandbox: Any, on_hold_ids: list[str]) -> dict[str, str]:
    """The network's current on-hold state per id (last snapshot), read through the hook."""
    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
    from affiliate_network.rules.fields import on_hold_conversion_id

    conn_id = "afn_e2e_check_network"
    env_name = f"AIRFLOW_CONN_{conn_id.upper()}"
    os.environ[env_name] = json.dumps(
        {
            "conn_type": "affiliate_network",
            "host": sandbox.base_url,
            "password": sandbox.keys["network"],
            "extra": {"portal": "network"},
        }
    )
    try:
        catalog = sandbox.catalog()
        hook = AffiliateNetworkHook(conn_id)
        states: dict[str, str] = {}
        for start in range(0, len(on_hold_ids), 50):
            terms = [
                {"search_type": "on_hold_conversion_id", "value": i}
                for i in on_hold_ids[start : start + 50]
            ]
            for record in hook.iter_conversions(
                from_date=catalog["first_date"],
                to_date=catalog["last_date"],
                timezone_id=67,
                search_terms=terms,
            ):
                snapshots = (record.get("relationship") or {}).get("on_hold_snapshots") or []
                ident = on_hold_conversion_id(record)
                if ident and snapshots:
                    states[ident] = snapshots[-1].get("status")
        return states
    finally:
        os.environ.pop(env_name, None)


def check_onhold_applied(cluster: AirflowCluster, sandbox: Any) -> None:
    """Runs succeeded, audits exist, applied decisions show in the network, none sent twice."""
    runs, answered = wait_onhold_runs(cluster)
    problems: list[str] = []
    expected: dict[str, str] = {}
    for run in runs:
        summary = cluster.api.xcom(ONHOLD, run["dag_run_id"], "review") or {}
        if summary.get("dry_run"):
            problems.append(f"run {run['dag_run_id']} was a dry run")
        if "audit_path" not in summary:
            problems.append(f"run {run['dag_run_id']}: no review summary: {summary}")
            continue
        for row in _read_audit(summary["audit_path"]):
            if row["action"] in ("approve", "reject") and row["applied"]:
                expected[str(row["on_hold_conversion_id"])] = _STATE_OF_ACTION[row["action"]]
        human = cluster.api.xcom(ONHOLD, run["dag_run_id"], "apply_human_decisions") or {}
        if human.get("audit_path"):
            for row in _read_audit(human["audit_path"]):
                if row.get("applied"):
                    expected[str(row["on_hold_conversion_id"])] = REVIEW_STATE
    if not expected:
        problems.append("no run applied any decision (the sandbox plants conversions to decide)")
    states = _current_states(sandbox, sorted(expected))
    wrong = {i: (want, states.get(i)) for i, want in expected.items() if states.get(i) != want}
    if wrong:
        sample = dict(list(wrong.items())[:10])
        problems.append(f"{len(wrong)} decisions not in the network (id: (want, got)): {sample}")
    sent = Counter(
        str(i)
        for r in sandbox.requests_log()
        if r["method"] == "PATCH" and r["path"].endswith("/networks/reporting/onhold")
        for i in (_body(r).get("on_hold_conversion_ids") or [])
    )
    twice = {i: n for i, n in sent.items() if n > 1}
    if twice:
        problems.append(f"on-hold ids sent more than once: {dict(list(twice.items())[:10])}")
    if problems:
        raise E2EError(f"{ONHOLD} ({answered} reviews answered):\n" + "\n".join(problems))


def _body(entry: dict) -> dict:
    body = entry.get("body")
    if isinstance(body, str):
        try:
            return json.loads(body)
        except ValueError:
            return {}
    return body or {}
