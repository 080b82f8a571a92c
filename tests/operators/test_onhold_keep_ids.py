"""The ids a reviewer lists in ``keep_on_hold``, through the real human-apply path on the sandbox:
matched without regard to case, an on-hold id naming its conversion, and an id that matches
nothing stopping its request, so nothing a person tried to hold is ever approved.

Two rules ask a person (two requests): big sales and IP mismatches.
"""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any

import pytest

from affiliate_network.exceptions import RUNBOOK, InvalidRequestError
from affiliate_network.operators.onhold_review import OnHoldReviewApplyOperator
from affiliate_network.review.audit import read_jsonl
from affiliate_network.review.human_apply import STOPPED
from affiliate_network.review.human_requests import (
    KEEP_PARAM,
    OPTION_APPROVE,
    OPTION_KEEP,
    OPTION_REJECT,
    build_review_requests,
    rule_of_subject,
)
from tests.support.onhold_support import context, patches, review_op, states

RULES = """\
rules:
  - id: outlier-review
    description: Big sale, ask a person
    action: review
    when: {field: sale_amount, ge: 5000}
  - id: mismatch-review
    description: IP mismatch, ask a person
    action: review
    when: {field: ip_mismatch, eq: true}
"""
OUTLIER, MISMATCH = "outlier-review", "mismatch-review"


@pytest.fixture
def review_rules(rules_include: Path) -> Path:
    path = rules_include / "onhold_rules_keep_ids.yaml"
    path.write_text(RULES)
    return path


def _answer(choice: str, keep: str | None = None) -> dict[str, Any]:
    """An answer as ``HITLOperator.execute_complete`` returns it."""
    return {
        "chosen_options": [choice],
        "params_input": {KEEP_PARAM: keep},
        "responded_by_user": {"id": "7", "name": "ana"},
    }


def _review(rules: Path, window, tmp_path) -> tuple[dict, list, dict[str, list[dict]]]:
    """The review's summary, its requests and its ``review`` rows per rule (by payout order)."""
    summary = review_op(rules, window, tmp_path).execute(context())
    requests = build_review_requests(summary)
    rows: dict[str, list[dict]] = {}
    for row in read_jsonl(summary["audit_path"]):
        rows.setdefault(row["rule_id"], []).append(row)
    assert {rule_of_subject(r["subject"]) for r in requests} == {OUTLIER, MISMATCH}
    assert len(rows[OUTLIER]) >= 3
    assert len(rows[MISMATCH]) >= 2
    return summary, requests, rows


def _apply(summary: dict, requests: list, answers: dict[str, dict]) -> dict:
    responses = [answers[rule_of_subject(r["subject"])] for r in requests]
    return OnHoldReviewApplyOperator(
        task_id="apply_human_decisions", summary=summary, requests=requests, responses=responses
    ).execute(context())


def test_keep_ids_in_another_case_or_as_on_hold_ids_keep_their_conversions(
    sandbox, network_conn, review_rules, window, tmp_path, capsys
) -> None:
    summary, requests, rows = _review(review_rules, window, tmp_path)
    outliers = rows[OUTLIER]
    by_case, by_on_hold = outliers[0], outliers[1]
    assert by_case["conversion_id"].upper() != by_case["conversion_id"]  # the case differs
    keep = f"{by_case['conversion_id'].upper()};  `{by_on_hold['on_hold_conversion_id']}`"
    sandbox.clear_requests()

    capsys.readouterr()
    result = _apply(
        summary, requests, {OUTLIER: _answer(OPTION_APPROVE, keep), MISMATCH: _answer(OPTION_KEEP)}
    )
    task_log = capsys.readouterr().out  # the operator's log (Airflow's structured logger)

    kept = {by_case["on_hold_conversion_id"], by_on_hold["on_hold_conversion_id"]}
    after = states(network_conn, window)
    assert {after[i] for i in kept} == {"on_hold"}
    approved = {r["on_hold_conversion_id"] for r in outliers} - kept
    assert {after[i] for i in approved} == {"approved"}
    assert {after[r["on_hold_conversion_id"]] for r in rows[MISMATCH]} == {"on_hold"}
    sent = {i for e in patches(sandbox) for i in e["body"]["on_hold_conversion_ids"]}
    assert sent == approved
    assert result["applied"] == {"approved": len(approved)}
    assert result["kept_on_hold"] == 2 + len(rows[MISMATCH])
    # The log counts what was really kept.
    assert f"{len(outliers)} conversions, 2 kept on hold (keep_on_hold listed 2)" in task_log
    human = {r["on_hold_conversion_id"]: r for r in read_jsonl(result["audit_path"])}
    assert {human[i]["human_choice"] for i in kept} == {OPTION_KEEP}
    assert {human[i]["reason"] for i in kept} == {"kept on hold by reviewer"}


def test_an_id_matching_nothing_writes_nothing_of_its_request_and_fails_naming_it(
    sandbox, network_conn, review_rules, window, tmp_path
) -> None:
    summary, requests, rows = _review(review_rules, window, tmp_path)
    held = rows[OUTLIER][0]["conversion_id"]
    typo = held[:-1] + ("0" if held[-1] != "0" else "1")
    elsewhere = rows[MISMATCH][0]["conversion_id"]  # an id of the other request
    sandbox.clear_requests()

    with pytest.raises(InvalidRequestError) as info:
        _apply(
            summary,
            requests,
            {
                OUTLIER: _answer(OPTION_APPROVE, f"{typo}, {elsewhere}"),
                MISMATCH: _answer(OPTION_REJECT),
            },
        )

    message = str(info.value)
    # The last line a person sees in the task log: answer the review, not "clear the task".
    last = "".join(traceback.format_exception(info.value)).rstrip().splitlines()[-1]
    assert "Next step: Tell the reviewer which id was wrong; the next run asks again" in last
    assert last.endswith(f"{RUNBOOK}#a-review-answer-names-an-unknown-id")
    assert (
        f"rule {OUTLIER}: keep_on_hold ids '{typo}', '{elsewhere}' (a conversion of rule "
        f"{MISMATCH}'s request) match none of its conversions"
    ) in message
    assert "Nothing of those requests was written" in message
    assert f"{len(rows[MISMATCH])} rejected" in message
    # Nothing of the stopped request was sent; the other request was applied.
    after = states(network_conn, window)
    assert {after[r["on_hold_conversion_id"]] for r in rows[OUTLIER]} == {"on_hold"}
    assert {after[r["on_hold_conversion_id"]] for r in rows[MISMATCH]} == {"rejected"}
    sent = {i for e in patches(sandbox) for i in e["body"]["on_hold_conversion_ids"]}
    assert sent == {r["on_hold_conversion_id"] for r in rows[MISMATCH]}
    # The audit says why; the answer is not remembered, so the next run asks again.
    [audit] = (tmp_path / "data").rglob("human-attempt-1.jsonl")
    human = [r for r in read_jsonl(audit) if r["rule_id"] == OUTLIER]
    assert {r["human_choice"] for r in human} == {STOPPED}
    assert not any(r["applied"] for r in human)
    assert all(typo in r["reason"] and "asked again next run" in r["reason"] for r in human)
    again = review_op(review_rules, window, tmp_path).execute(context("next"))
    asked = [r for r in read_jsonl(again["audit_path"]) if r["action"] == "review"]
    assert sorted(r["conversion_id"] for r in asked) == sorted(
        r["conversion_id"] for r in rows[OUTLIER]
    )
