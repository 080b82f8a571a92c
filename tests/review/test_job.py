"""The on-hold review job library called directly with a hook on the sandbox: no operator, no
task context. The sandbox's planted truth says which on-hold ids each rule must decide, its
request log and state say what was (not) written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from affiliate_network.exceptions import GuardrailError
from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
from affiliate_network.review.audit import read_jsonl
from affiliate_network.review.guardrails import Guardrails
from affiliate_network.review.job import ReviewOptions, ReviewResult, ReviewRun, run_review
from affiliate_network.review.window import review_window
from affiliate_network.rules.engine import RuleSet
from tests.support.onhold_support import after_the_data, patches, states


def _run(
    conn: str, rules_file: Path, window: tuple[str, str], base: Path, **kwargs
) -> ReviewResult:
    dry_run = kwargs.pop("dry_run", False)
    ruleset = RuleSet.from_file(rules_file)
    review = review_window(
        timezone_id=None,
        lookback_days=14,
        to_date=window[1],
        as_of=after_the_data(window),
        horizon_hours=ruleset.horizon_hours,
    )
    hook = AffiliateNetworkHook(conn)
    try:
        return run_review(
            hook,
            ruleset,
            review,
            options=ReviewOptions(chunk_size=50, **kwargs),
            run=ReviewRun(base=str(base), conn_id=conn, dag_id="script", run_id="job-test"),
            dry_run=dry_run,
        )
    finally:
        hook.close()


def test_a_dry_run_decides_every_planted_pattern_and_writes_nothing(
    sandbox, network_conn, rules_file, window, truth, tmp_path
) -> None:
    truth_before = sandbox.truth(*window)
    result = _run(network_conn, rules_file, window, tmp_path, dry_run=True)

    assert patches(sandbox) == []
    assert sandbox.truth(*window) == truth_before
    assert result.dry_run is True
    assert result.guardrail is None
    assert result.writes.applied == {"approved": 0, "rejected": 0}
    assert result.writes.chunks == 0
    assert result.evaluation.per_rule == {
        "blocked-sub1": len(truth["blocklisted_sub"]),
        "duplicate-ip": len(truth["duplicate_ip"]),
        "ip-mismatch-approved": len(truth["ip_mismatch"]),
        "outlier-review": len(truth["outlier_sale_amount"]),
        "fast-click-hold": len(truth["fast_click"]),
    }
    assert result.per_action == {
        "approve": len(truth["ip_mismatch"]),
        "reject": len(truth["blocklisted_sub"] | truth["duplicate_ip"]),
        "review": len(truth["outlier_sale_amount"]),
        "hold": len(truth["fast_click"]),
    }
    # The audit file is the run's rows, as returned.
    assert result.audit_path.name == "decisions-attempt-1.jsonl"
    assert "script/job-test" in str(result.audit_path)
    rows = read_jsonl(result.audit_path)
    # Amounts are Decimal in memory and after reading, decimal text in the file.
    assert json.loads(json.dumps(rows, default=str)) == json.loads(
        json.dumps(result.rows, default=str)
    )
    assert {r["reason"] for r in rows if r["action"] in ("approve", "reject")} == {"dry run"}
    assert not any(r["applied"] for r in rows)


def test_a_write_run_lands_exactly_the_decided_ids_once(
    sandbox, network_conn, rules_file, window, truth, tmp_path
) -> None:
    before = states(network_conn, window)
    result = _run(network_conn, rules_file, window, tmp_path)

    approved, rejected = truth["ip_mismatch"], truth["blocklisted_sub"] | truth["duplicate_ip"]
    after = states(network_conn, window)
    assert {i for i, s in after.items() if s == "approved"} == approved
    assert {i for i, s in after.items() if s == "rejected"} == rejected
    assert {i for i, s in after.items() if s == "on_hold"} == (
        {i for i, s in before.items() if s == "on_hold"} - approved - rejected
    )
    assert result.writes.applied == {"approved": len(approved), "rejected": len(rejected)}
    assert result.writes.mismatches == result.writes.skipped == 0
    sent = [i for e in patches(sandbox) for i in e["body"]["on_hold_conversion_ids"]]
    assert sorted(sent) == sorted(approved | rejected)
    assert result.writes.chunks == len(patches(sandbox))
    rows = {r["on_hold_conversion_id"]: r for r in read_jsonl(result.audit_path)}
    assert {rows[i]["applied"] for i in approved | rejected} == {True}
    assert {rows[i]["reason"] for i in approved} == {"approved; confirmed by read-back"}
    assert {rows[i]["reason"] for i in truth["outlier_sale_amount"]} == {
        "waiting for a human decision"
    }


def test_a_guardrail_trip_writes_nothing_and_says_so_in_the_audit(
    sandbox, network_conn, rules_file, window, truth, tmp_path
) -> None:
    truth_before = sandbox.truth(*window)
    with pytest.raises(GuardrailError, match="rejections > max_reject_count 1") as info:
        _run(network_conn, rules_file, window, tmp_path, guardrails=Guardrails(max_reject_count=1))
    assert f"duplicate-ip ({len(truth['duplicate_ip'])})" in str(info.value)
    assert patches(sandbox) == []
    assert sandbox.truth(*window) == truth_before
    rows = read_jsonl(next(tmp_path.rglob("decisions-attempt-1.jsonl")))
    assert {r["reason"] for r in rows if r["action"] in ("approve", "reject")} == {
        "guardrail tripped: nothing written"
    }


def test_a_dry_run_reports_the_guardrail_a_write_run_would_trip(
    sandbox, network_conn, rules_file, window, tmp_path
) -> None:
    result = _run(
        network_conn, rules_file, window, tmp_path, dry_run=True, guardrails=Guardrails(0.01)
    )
    assert result.guardrail is not None
    assert "reject share" in result.guardrail
    assert patches(sandbox) == []
    assert {r["reason"] for r in result.rows if r["action"] == "reject"} == {"dry run; guardrail"}


_SCRIPT = """
import json, sys
from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
from affiliate_network.rules.engine import RuleSet
from affiliate_network.review.job import ReviewOptions, ReviewRun, run_review
from affiliate_network.review.window import review_window

ruleset = RuleSet.from_file({rules!r})
window = review_window(timezone_id=None, lookback_days=14, to_date={last!r}, as_of={as_of!r},
                       horizon_hours=ruleset.horizon_hours)
run = ReviewRun(base={base!r}, conn_id={conn!r}, dag_id="script", run_id="plain")
hook = AffiliateNetworkHook({conn!r})
result = run_review(hook, ruleset, window, options=ReviewOptions(), run=run, dry_run=True)
hook.close()
print(json.dumps({{
    "decided": len(result.evaluation.decisions),
    "operators_imported": any(m.startswith("affiliate_network.operators") for m in sys.modules),
}}))
"""


def test_the_job_runs_from_a_plain_script_without_the_operators(
    sandbox, network_conn, rules_file, window, tmp_path
) -> None:
    script = _SCRIPT.format(
        conn=network_conn,
        rules=str(rules_file),
        last=window[1],
        as_of=after_the_data(window),
        base=str(tmp_path),
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=240,
        check=True,
    )
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["decided"] == len(read_jsonl(next(tmp_path.rglob("script/plain/*.jsonl"))))
    assert out["decided"] > 0
    assert out["operators_imported"] is False
    assert patches(sandbox) == []
