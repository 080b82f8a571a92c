"""OnHoldReviewOperator and the human-decision operator against the real sandbox.

The rules file below maps each planted pattern to one action, so the sandbox's ground truth
(``/_sandbox/truth/planted``) says exactly which on-hold ids must end approved, rejected or
still on hold. The sandbox's request log and state are the proof of what was (not) written.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from affiliate_network.exceptions import ConfigValidationError, GuardrailError
from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
from affiliate_network.operators.onhold_review import (
    OnHoldReviewApplyOperator,
)
from affiliate_network.review.audit import read_jsonl
from affiliate_network.review.human_requests import (
    KEEP_PARAM,
    OPTION_KEEP,
    OPTION_REJECT,
    build_review_requests,
    rule_of_subject,
)
from tests.support.onhold_support import (
    after_the_data,
    context,
    in_include,
    patches,
    review_op,
    states,
    with_review,
)
from tests.support.processes import kill_when


def test_applies_exactly_the_expected_decisions_per_rule(
    sandbox, network_conn, rules_file, window, truth, tmp_path
) -> None:
    before = states(network_conn, window)
    summary = review_op(rules_file, window, tmp_path).execute(context())

    rejected = truth["blocklisted_sub"] | truth["duplicate_ip"]
    approved = truth["ip_mismatch"]
    after = states(network_conn, window)
    assert {i for i, s in after.items() if s == "rejected"} == rejected
    assert {i for i, s in after.items() if s == "approved"} == approved
    still = {i for i, s in after.items() if s == "on_hold"}
    assert still == {i for i, s in before.items() if s == "on_hold"} - rejected - approved
    assert truth["outlier_sale_amount"] <= still
    assert truth["fast_click"] <= still

    assert summary["per_rule"] == {
        "blocked-sub1": len(truth["blocklisted_sub"]),
        "duplicate-ip": len(truth["duplicate_ip"]),
        "ip-mismatch-approved": len(approved),
        "outlier-review": len(truth["outlier_sale_amount"]),
        "fast-click-hold": len(truth["fast_click"]),
    }
    assert summary["applied"] == {"approved": len(approved), "rejected": len(rejected)}
    assert summary["readback_mismatches"] == 0
    assert summary["dry_run"] is False

    # Each id sent once, in chunks of at most 50, with the right status.
    sent = Counter()
    for entry in patches(sandbox):
        ids = entry["body"]["on_hold_conversion_ids"]
        assert len(ids) <= 50
        expected = approved if entry["body"]["status"] == "approved" else rejected
        assert set(ids) <= expected
        sent.update(ids)
    assert set(sent) == approved | rejected
    assert max(sent.values()) == 1

    # The audit: one line per decision, with the matched values and the outcome.
    rows = {r["on_hold_conversion_id"]: r for r in read_jsonl(summary["audit_path"])}
    assert len(rows) == sum(summary["per_rule"].values())
    some_reject = rows[next(iter(truth["blocklisted_sub"]))]
    assert some_reject["rule_id"] == "blocked-sub1"
    assert some_reject["action"] == "reject"
    assert some_reject["matched"]["sub1"].startswith("blk-")
    assert some_reject["applied"] is True
    assert "confirmed" in some_reject["reason"]
    outlier = rows[next(iter(truth["outlier_sale_amount"]))]
    assert outlier["applied"] is False
    assert outlier["reason"] == "waiting for a human decision"
    assert rows[next(iter(truth["fast_click"]))]["reason"] == "rule says keep on hold"


def test_summary_holds_counts_and_the_audit_path_only(
    sandbox, network_conn, rules_file, window, tmp_path
) -> None:
    summary = review_op(rules_file, window, tmp_path, dry_run=True).execute(context())
    text = json.dumps(summary)
    assert sandbox.keys["network"] not in text
    assert len(text) < 2000
    assert Path(summary["audit_path"]).name == "decisions-attempt-1.jsonl"
    assert "test_run" in summary["audit_path"]
    for key, value in summary.items():
        if key == "guardrail":  # on a dry run, the message a real run would have stopped with
            assert value is None or len(value) < 300
        elif key not in ("audit_path", "window", "dry_run", "as_of", "state_dir"):
            assert isinstance(value, int | float | dict), key


def test_dry_run_writes_nothing(sandbox, network_conn, rules_file, window, tmp_path) -> None:
    truth_before = sandbox.truth(*window)
    summary = review_op(rules_file, window, tmp_path, dry_run="True").execute(context())
    assert patches(sandbox) == []
    assert sandbox.truth(*window) == truth_before
    assert summary["dry_run"] is True
    assert summary["applied"] == {"approved": 0, "rejected": 0}
    rows = read_jsonl(summary["audit_path"])
    assert rows
    assert not any(r["applied"] for r in rows)
    assert {r["reason"] for r in rows if r["action"] in ("approve", "reject")} == {"dry run"}


def test_rerun_sends_nothing_twice(sandbox, network_conn, rules_file, window, tmp_path) -> None:
    review_op(rules_file, window, tmp_path).execute(context())
    sandbox.clear_requests()
    summary = review_op(rules_file, window, tmp_path).execute(context("rerun"))
    assert patches(sandbox) == []
    assert summary["decisions"]["approve"] == summary["decisions"]["reject"] == 0


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"max_reject_share": 0.2}, "reject share"),
        ({"max_reject_count": 40}, "rejections > max_reject_count 40"),
        ({"max_approved_payout": {"USD": 100}}, "approved payout"),
        # The sandbox's offers pay in USD: a ceiling in EUR only is no ceiling for them.
        ({"max_approved_payout": {"EUR": 10**6}}, "USD has no ceiling in max_approved_payout"),
    ],
)
def test_guardrail_trips_before_any_write(
    sandbox, network_conn, rules_file, window, truth, tmp_path, kwargs, words
) -> None:
    truth_before = sandbox.truth(*window)
    with pytest.raises(GuardrailError) as info:
        review_op(rules_file, window, tmp_path, **kwargs).execute(context())
    message = str(info.value)
    assert words in message
    assert "stopped before any write" in message
    # The top rejecting rules are named with their counts.
    assert f"duplicate-ip ({len(truth['duplicate_ip'])})" in message
    assert f"blocked-sub1 ({len(truth['blocklisted_sub'])})" in message
    assert patches(sandbox) == []
    assert sandbox.truth(*window) == truth_before
    audit = tmp_path / "data" / "onhold_review"
    rows = read_jsonl(next(audit.rglob("decisions-attempt-1.jsonl")))
    assert {r["reason"] for r in rows if r["action"] == "reject"} == {
        "guardrail tripped: nothing written"
    }


def test_an_ignored_write_is_reported_as_accepted_not_landed(
    sandbox, network_conn, rules_file, window, truth, tmp_path
) -> None:
    ignored = sorted(truth["ip_mismatch"])[:5]
    sandbox.set_faults(onhold_ignore_ids=ignored)
    summary = review_op(rules_file, window, tmp_path, readback_wait_s=0.5).execute(context())
    assert summary["accepted_not_landed"] == 5
    assert summary["readback_mismatches"] == 0
    rows = {r["on_hold_conversion_id"]: r for r in read_jsonl(summary["audit_path"])}
    for oh_id in ignored:
        # The audit tells the truth: what the read-back does not show is not applied (yet).
        assert rows[oh_id]["applied"] is False
        assert rows[oh_id]["reason"] == (
            "accepted by the API (approved), not visible after 0.5 s: the next run decides it "
            "again from the traffic"
        )
    after = states(network_conn, window)
    assert {after[i] for i in ignored} == {"on_hold"}
    # The next run picks them up again (they are still on hold) and, fault cleared, lands them.
    sandbox.clear_faults()
    rerun = review_op(rules_file, window, tmp_path).execute(context("next"))
    assert rerun["applied"]["approved"] == 5
    assert rerun["readback_mismatches"] == rerun["accepted_not_landed"] == 0


def test_min_age_leaves_young_conversions_alone(
    sandbox, network_conn, rules_file, window, tmp_path
) -> None:
    summary = review_op(rules_file, window, tmp_path, min_age_hours=24 * 400).execute(context())
    assert summary["eligible"] == 0
    assert summary["too_young"] == summary["on_hold"] > 0
    assert patches(sandbox) == []


def test_invalid_rules_fail_before_any_request(sandbox, network_conn, window, tmp_path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "rules:\n  - id: a\n    description: d\n    action: reject\n"
        "    when: {field: sub1, gt: 1}\n"
    )
    sandbox.clear_requests()
    with pytest.raises(ConfigValidationError, match=r"bad.yaml:5: rule 'a': when.gt"):
        review_op(bad, window, tmp_path).execute(context())
    assert [e for e in sandbox.requests_log() if e["path"].startswith("/v1")] == []


_KILL_SCRIPT = """
from affiliate_network.operators.onhold_review import OnHoldReviewOperator
OnHoldReviewOperator(
    task_id="review", rules_file={rules!r}, to_date={to!r}, base_path={base!r}, as_of={as_of!r},
).execute({{"run_id": "killed"}})
"""


def test_killed_mid_apply_then_rerun_applies_each_id_once(
    sandbox, network_conn, rules_file, window, truth, tmp_path
) -> None:
    # The first PATCH is applied, then its response hangs: the process dies right there.
    sandbox.set_faults(apply_then_delay_paths=["/networks/reporting/onhold"], apply_then_delay_s=30)
    review = {"lookback_days": 14, "chunk_size": 20, "min_age_hours": 0}
    script = _KILL_SCRIPT.format(
        rules=in_include(with_review(rules_file, review)),
        to=window[1],
        base=str(tmp_path / "data"),
        as_of=after_the_data(window),
    )
    proc = subprocess.Popen([sys.executable, "-c", script], env=os.environ.copy())
    kill_when(
        proc,
        lambda: bool(patches(sandbox)),
        within=120,
        early_exit="the review finished before it could be killed",
    )
    first = patches(sandbox)
    assert len(first) == 1
    assert len(first[0]["body"]["on_hold_conversion_ids"]) == 20
    sandbox.clear_faults()

    summary = review_op(rules_file, window, tmp_path).execute(context("rerun"))

    approved, rejected = truth["ip_mismatch"], truth["blocklisted_sub"] | truth["duplicate_ip"]
    sent = Counter(i for e in patches(sandbox) for i in e["body"]["on_hold_conversion_ids"])
    assert set(sent) == approved | rejected
    assert max(sent.values()) == 1, "an on-hold id was sent twice"
    # The killed attempt's 20 are no longer on hold, so the rerun only decides the rest.
    assert summary["applied"]["approved"] + summary["applied"]["rejected"] == len(sent) - 20
    after = states(network_conn, window)
    assert {i for i, s in after.items() if s == "approved"} == approved
    assert {i for i, s in after.items() if s == "rejected"} == rejected
    # The killed attempt left its intentions in its audit file (written before the first PATCH).
    killed = read_jsonl(next((tmp_path / "data").rglob("killed/decisions-attempt-1.jsonl")))
    assert {r["reason"] for r in killed if r["action"] == "approve"} == {"pending: not yet applied"}


def test_human_choices_are_applied_once(
    sandbox, network_conn, rules_file, window, truth, tmp_path
) -> None:
    summary = review_op(rules_file, window, tmp_path).execute(context())
    requests = build_review_requests(summary)
    assert len(requests) == 1
    outliers = sorted(truth["outlier_sale_amount"])
    # The rule first, short (the Required Actions list cuts a subject after two lines).
    assert requests[0]["subject"] == f"outlier-review: {len(outliers)} conversions to review"
    assert rule_of_subject(requests[0]["subject"]) == "outlier-review"
    audit = {r["on_hold_conversion_id"]: r for r in read_jsonl(summary["audit_path"])}
    keep = audit[outliers[0]]["conversion_id"]
    assert keep in requests[0]["body"] or len(outliers) > 50
    # What a reviewer reads: names with ids, money to the cent with its currency.
    row = audit[outliers[0]]
    body = requests[0]["body"]
    assert f"{row['affiliate_name']} ({row['affiliate_id']})" in body
    assert f"{row['offer_name']} ({row['offer_id']})" in body
    assert f"{row['payout']:,.2f} {row['currency_id']}" in body
    assert row["currency_id"]
    for line in body.splitlines():
        if line.startswith("| `"):
            amounts = line.split(" | ")[3:5]  # payout, sale
            assert all(re.fullmatch(r"[\d,]+\.\d\d [A-Z]{3}", a) for a in amounts), line
    # The shape HITLOperator.execute_complete returns (HITLTriggerEventSuccessPayload).
    responses = [
        {
            "chosen_options": [OPTION_REJECT],
            "params_input": {KEEP_PARAM: keep},
            "responded_by_user": {"id": "7", "name": "ana"},
            "responded_at": "2026-11-22T08:00:00+00:00",
        }
    ]
    sandbox.clear_requests()
    apply = OnHoldReviewApplyOperator(
        task_id="apply_human_decisions", summary=summary, requests=requests, responses=responses
    )
    result = apply.execute(context())
    assert result["applied"] == {"rejected": len(outliers) - 1}
    assert result["kept_on_hold"] == 1
    after = states(network_conn, window)
    assert after[outliers[0]] == "on_hold"
    assert {after[i] for i in outliers[1:]} == {"rejected"}
    human = {r["on_hold_conversion_id"]: r for r in read_jsonl(result["audit_path"])}
    assert human[outliers[1]]["human_choice"] == OPTION_REJECT
    assert human[outliers[1]]["responded_by"] == "ana"
    assert human[outliers[1]]["applied"] is True
    assert human[outliers[0]]["applied"] is False

    # Rerunning the apply task (a retry) sends nothing.
    sandbox.clear_requests()
    again = apply.execute(context())
    assert patches(sandbox) == []
    assert again["applied"] == {"rejected": 0}


def test_keep_on_hold_choice_and_dry_run_requests(
    sandbox, network_conn, rules_file, window, tmp_path
) -> None:
    dry = review_op(rules_file, window, tmp_path, dry_run=True).execute(context("dry"))
    assert build_review_requests(dry) == []
    summary = review_op(rules_file, window, tmp_path).execute(context())
    requests = build_review_requests(summary)
    sandbox.clear_requests()
    result = OnHoldReviewApplyOperator(
        task_id="apply",
        summary=summary,
        requests=requests,
        responses=[{"chosen_options": [OPTION_KEEP], "params_input": {}}],
    ).execute(context())
    assert patches(sandbox) == []
    assert result["kept_on_hold"] == summary["review_pending"]


def test_ids_decided_elsewhere_mid_run_are_not_sent(
    sandbox, network_conn, rules_file, window, truth, tmp_path
) -> None:
    # Each PATCH response hangs 1 s: while the operator sends its approvals, a person approves
    # three conversions the rules want to reject. The re-check before the reject chunk sees it.
    sandbox.set_faults(apply_then_delay_paths=["/networks/reporting/onhold"], apply_then_delay_s=1)
    taken = sorted(truth["blocklisted_sub"])[:3]
    result: dict[str, Any] = {}

    def run() -> None:
        result["summary"] = review_op(rules_file, window, tmp_path, chunk_size=100).execute(
            context()
        )

    import threading

    worker = threading.Thread(target=run)
    worker.start()
    deadline = time.monotonic() + 60
    while not patches(sandbox):
        assert worker.is_alive()
        assert time.monotonic() < deadline
        time.sleep(0.02)
    AffiliateNetworkHook(affiliate_network_conn_id=network_conn).set_on_hold_status(
        taken, "approved"
    )
    worker.join(timeout=120)
    summary = result["summary"]

    operator_sent = {
        i
        for e in patches(sandbox)
        if e["body"]["status"] == "rejected"
        for i in e["body"]["on_hold_conversion_ids"]
    }
    assert not operator_sent & set(taken)
    assert summary["skipped_not_on_hold"] == 3
    rows = {r["on_hold_conversion_id"]: r for r in read_jsonl(summary["audit_path"])}
    assert {rows[i]["reason"] for i in taken} == {"no longer on hold: approved"}
    after = states(network_conn, window)
    assert {after[i] for i in taken} == {"approved"}


def test_unsupported_reject_status_fails_before_any_request(
    sandbox, network_conn, rules_file, window, tmp_path
) -> None:
    sandbox.clear_requests()
    with pytest.raises(ConfigValidationError, match=r"review.reject_status: .*'Declined!'"):
        review_op(rules_file, window, tmp_path, reject_status="Declined!").execute(context())
    assert [e for e in sandbox.requests_log() if e["path"].startswith("/v1")] == []


def test_failed_write_leaves_an_audit_and_the_retry_finishes(
    sandbox, network_conn, rules_file, window, truth, tmp_path
) -> None:
    from affiliate_network.exceptions import InvalidRequestError

    sandbox.set_faults(fail_hard=400, paths=["/networks/reporting/onhold"])
    with pytest.raises(InvalidRequestError):
        review_op(rules_file, window, tmp_path).execute(context())
    rows = read_jsonl(next((tmp_path / "data").rglob("decisions-attempt-1.jsonl")))
    assert {r["reason"] for r in rows if r["action"] == "approve"} == {
        "not applied: failed (InvalidRequestError)"
    }
    sandbox.clear_faults()
    summary = review_op(rules_file, window, tmp_path).execute(context("retry"))
    assert summary["applied"]["approved"] == len(truth["ip_mismatch"])


def test_dry_run_reports_a_guardrail_instead_of_failing(
    sandbox, network_conn, rules_file, window, tmp_path
) -> None:
    op = review_op(rules_file, window, tmp_path, dry_run=True, max_reject_count=1)
    summary = op.execute(context())
    assert summary["guardrail_tripped"] is True
    assert patches(sandbox) == []
    rows = read_jsonl(summary["audit_path"])
    assert {r["reason"] for r in rows if r["action"] == "reject"} == {"dry run; guardrail"}


def test_a_manual_dry_run_beside_a_writing_scheduled_run_neither_waits_nor_writes(
    sandbox, network_conn, rules_file, window, tmp_path
) -> None:
    # "Unpause on trigger" starts the hourly run beside the manual one (issue 19). While the
    # scheduled run holds the network's write lease, the manual dry run decides at once (it
    # takes no lease), sends nothing and leaves the lease to its holder; a second writer waits
    # for the lease and gives up without sending anything.
    from types import SimpleNamespace

    from affiliate_network.exceptions import LeaseBusyError
    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
    from affiliate_network.review.lease import WriteLease, lease_path

    network = AffiliateNetworkHook(network_conn).network.slug  # the lease is the network's
    path = lease_path(str(tmp_path / "data"), network)
    scheduled = WriteLease(path, "affiliate_onhold_review/scheduled__2026-11-25T10:00:00+00:00")
    scheduled.acquire(wait_s=0)
    sandbox.clear_requests()
    manual = {**context("manual__dry"), "dag_run": SimpleNamespace(run_type="manual")}
    op = review_op(rules_file, window, tmp_path, dry_run=None, lease_wait_minutes=0)
    summary = op.execute(manual)
    assert summary["dry_run"] is True
    assert any(r["action"] != "none" for r in read_jsonl(summary["audit_path"]))
    assert patches(sandbox) == []
    assert scheduled.read()["owner"] == scheduled.owner
    other = {**context("manual__write"), "dag_run": SimpleNamespace(run_type="manual")}
    writer = review_op(rules_file, window, tmp_path, dry_run=False, lease_wait_minutes=0)
    with pytest.raises(LeaseBusyError, match="scheduled__"):
        writer.execute(other)
    assert patches(sandbox) == []
    scheduled.release()
