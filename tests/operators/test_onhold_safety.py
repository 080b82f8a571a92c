"""On-hold review safety: only exact answers write, "keep on hold" sticks, the guardrail share,
the read-back decides what the audit calls applied, one writer per network (the lease)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from affiliate_network.exceptions import GuardrailError
from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
from affiliate_network.operators.onhold_review import OnHoldReviewApplyOperator
from affiliate_network.review.apply import ON_HOLD, OnHoldWriter
from affiliate_network.review.audit import read_jsonl
from affiliate_network.review.human_requests import (
    OPTION_APPROVE,
    OPTION_KEEP,
    UNANSWERED,
    build_review_requests,
)
from tests.support.onhold_support import context, patches, review_op, states


def _apply(summary: dict, requests: list, responses: list) -> dict:
    return OnHoldReviewApplyOperator(
        task_id="apply_human_decisions", summary=summary, requests=requests, responses=responses
    ).execute(context())


@pytest.mark.parametrize(
    "response",
    [
        {"chosen_options": ["Approve All"], "responded_by_user": {"id": "1", "name": "ana"}},
        {"chosen_options": [""], "responded_by_user": {"id": "1", "name": "ana"}},
        {"chosen_options": [], "responded_by_user": {"id": "1", "name": "ana"}},
        {"chosen_options": [OPTION_APPROVE, "Reject all"]},
        None,
    ],
    ids=["renamed-option", "empty-answer", "no-option", "two-options", "no-response"],
)
def test_an_unexpected_answer_keeps_conversions_on_hold(
    sandbox, network_conn, rules_file, window, tmp_path, response
) -> None:
    summary = review_op(rules_file, window, tmp_path).execute(context())
    requests = build_review_requests(summary)
    assert requests
    sandbox.clear_requests()
    result = _apply(summary, requests, [response])
    assert patches(sandbox) == []
    assert result["applied"] == {}
    assert result["unanswered"] == summary["review_pending"]
    rows = read_jsonl(result["audit_path"])
    assert {r["human_choice"] for r in rows} == {UNANSWERED}
    assert not any(r["applied"] for r in rows)
    # Not remembered: the next run asks again.
    again = review_op(rules_file, window, tmp_path).execute(context("next"))
    assert again["review_pending"] == summary["review_pending"]


def test_keep_on_hold_is_not_asked_again_until_it_expires(
    sandbox, network_conn, rules_file, window, tmp_path
) -> None:
    summary = review_op(rules_file, window, tmp_path).execute(context())
    requests = build_review_requests(summary)
    pending = summary["review_pending"]
    keep = {"chosen_options": [OPTION_KEEP], "responded_by_user": {"id": "7", "name": "ana"}}
    result = _apply(summary, requests, [keep])
    assert result["kept_on_hold"] == pending
    stored = read_jsonl(Path(summary["state_dir"]) / "human_decisions.jsonl")
    assert {r["responded_by"] for r in stored} == {"ana"}
    assert {r["choice"] for r in stored} == {OPTION_KEEP}

    nxt = review_op(rules_file, window, tmp_path).execute(context("next-hour"))
    assert nxt["review_pending"] == 0
    assert nxt["kept_on_hold_by_reviewer"] == pending
    assert build_review_requests(nxt) == []
    held = [r for r in read_jsonl(nxt["audit_path"]) if r["rule_id"] == "outlier-review"]
    assert {r["action"] for r in held} == {"hold"}
    assert all("kept on hold by ana" in r["reason"] for r in held)

    # Past the keep period the question comes back.
    later = review_op(rules_file, window, tmp_path, keep_decision_hours=0).execute(context("x"))
    assert later["review_pending"] == pending


def test_a_timeout_keeps_on_hold_but_is_not_remembered(
    sandbox, network_conn, rules_file, window, tmp_path
) -> None:
    summary = review_op(rules_file, window, tmp_path).execute(context())
    requests = build_review_requests(summary)
    # A timed-out HITL request: the defaults, and no person.
    _apply(summary, requests, [{"chosen_options": [OPTION_KEEP], "responded_by_user": None}])
    nxt = review_op(rules_file, window, tmp_path).execute(context("next-hour"))
    assert nxt["review_pending"] == summary["review_pending"]


REJECT_FEW = """\
rules:
  - id: blocked-sub1
    description: Blocklisted sub ID
    action: reject
    when: {field: sub1, in: [blk-botnet-01, blk-botnet-02]}
"""


def test_reject_share_counts_decided_conversions_only(
    sandbox, network_conn, window, tmp_path
) -> None:
    """Rejections / conversions a rule decided: with one rejecting rule that is 100 %, however
    many conversions match no rule (the old denominator, every eligible one, hid it)."""
    path = tmp_path / "rules.yaml"
    path.write_text(REJECT_FEW)
    with pytest.raises(GuardrailError, match=r"reject share 100.0% \(\d+/\d+ decided\)"):
        review_op(path, window, tmp_path, max_reject_share=0.5).execute(context())
    assert patches(sandbox) == []


def test_a_failed_patch_that_landed_is_recorded_as_applied(
    sandbox, network_conn, window, truth
) -> None:
    """The PATCH lands, its answer never arrives: the read-back decides, not the exception."""
    ids = sorted(truth["ip_mismatch"])[:5]
    sandbox.set_faults(
        apply_then_delay_paths=["/networks/reporting/onhold"], apply_then_delay_s=3
    )  # fmt: skip
    hook = AffiliateNetworkHook(network_conn, max_attempts=1, timeout=0.5)
    writer = OnHoldWriter(
        hook,
        from_date=window[0],
        to_date=window[1],
        timezone_id=67,
        chunk_size=10,
        log=__import__("logging").getLogger("test"),
    )
    from affiliate_network.review.apply import ApplyOutcome

    outcome = ApplyOutcome()
    with pytest.raises(Exception):  # noqa: B017, PT011 - any transport error from the hook
        writer.apply(ids, "approved", outcome)
    hook.close()
    assert set(outcome.applied) == set(ids)
    assert outcome.mismatches == {}
    after = states(network_conn, window)
    assert {after[i] for i in ids} == {"approved"}


RUNS = ("scheduled", "manual")


def test_overlapping_reviews_never_send_an_id_twice(
    sandbox, network_conn, rules_file, window, tmp_path
) -> None:
    sandbox.set_faults(
        apply_then_delay_paths=["/networks/reporting/onhold"], apply_then_delay_s=0.3
    )
    results: dict[str, Any] = {}
    # Built before the threads: building one writes its rules file into include/, and a run
    # reading it while the other rewrites it would fail on an empty file, not overlap.
    ops = {name: review_op(rules_file, window, tmp_path, chunk_size=20) for name in RUNS}

    def run(name: str) -> None:
        results[name] = ops[name].execute(context(name))

    threads = [threading.Thread(target=run, args=(n,)) for n in RUNS]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert set(results) == set(RUNS)  # both runs ended (a run that failed proves no overlap)
    sent: dict[str, int] = {}
    for entry in patches(sandbox):
        for i in entry["body"]["on_hold_conversion_ids"]:
            sent[i] = sent.get(i, 0) + 1
    assert sent
    assert max(sent.values()) == 1
    total = sum(sum(r["applied"].values()) for r in results.values())
    assert total == len(sent)
    after = states(network_conn, window)  # read once: one full pull per id took minutes
    assert all(after[i] != ON_HOLD for i in sent)


@pytest.mark.parametrize(
    ("run_type", "writes"),
    [("manual", False), ("scheduled", True), ("backfill", True), (None, False)],
)
def test_an_unset_dry_run_depends_on_how_the_run_started(
    sandbox, network_conn, rules_file, window, tmp_path, run_type, writes
) -> None:
    # The trigger form's default: a manual trigger only decides and audits; scheduled and
    # backfill runs write. (Before, a manual trigger from the UI wrote by default.)
    from types import SimpleNamespace

    sandbox.clear_requests()
    ctx = {**context(), "dag_run": SimpleNamespace(run_type=run_type)}
    summary = review_op(rules_file, window, tmp_path, dry_run=None).execute(ctx)
    assert summary["dry_run"] is (not writes)
    assert bool(patches(sandbox)) is writes
