"""Each failure of the runbook's table that the on-hold review can meet, made for real against
the sandbox, ends with its next step: the last line of the traceback Airflow logs.

The runbook (docs/runbook.md, "When a task fails") lists the failures; each test here makes one
happen (a sandbox fault, a wrong key, a closed port, a tripped guardrail) and reads the line a
person sees last in the task log.
"""

from __future__ import annotations

import re
import traceback
from pathlib import Path
from typing import Any

import pytest

from affiliate_network.exceptions import (
    RUNBOOK,
    AffiliateNetworkError,
    AuthenticationError,
    ConnectionConfigError,
    GuardrailError,
    LeaseBusyError,
    PermissionDeniedError,
    RateLimitError,
    ServerError,
    TransportError,
)
from affiliate_network.settings.paths import PROJECT_ROOT
from tests.support.onhold_support import context, patches, review_op

#: Fast retries: the hook's attempts and backoff are the connection's business, not these tests'.
QUICK = {"max_attempts": 2, "base_delay": 0.0, "jitter": 0.0}


def runbook_anchors() -> set[str]:
    """GitHub's anchors of the runbook's headings."""
    text = (PROJECT_ROOT / RUNBOOK).read_text(encoding="utf-8")
    heads = re.findall(r"^#{2,4} (.+)$", text, flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


def fail(op: Any) -> BaseException:
    op.hook_kwargs = QUICK
    with pytest.raises(AffiliateNetworkError) as info:
        op.execute(context())
    return info.value


def last_lines(error: BaseException) -> tuple[str, str]:
    """(the line before, the last line) of the traceback as Python (and Airflow) prints it."""
    lines = "".join(traceback.format_exception(error)).rstrip().splitlines()
    return lines[-2], lines[-1]


def check(error: BaseException, cls: type, happened: str, step: str, anchor: str) -> None:
    assert isinstance(error, cls), repr(error)
    before, last = last_lines(error)
    assert happened in before, before  # what happened, on the line before
    assert last.startswith("Untouched: "), last
    assert f"Next step: {step}" in last, last
    assert last.endswith(f"Runbook: {RUNBOOK}#{anchor}"), last
    assert anchor in runbook_anchors()


def test_5xx_says_to_clear_the_task_when_the_api_answers(
    sandbox, network_conn, rules_file, window, tmp_path
) -> None:
    sandbox.set_faults(fail_hard=503)  # PUT /_sandbox/faults
    error = fail(review_op(rules_file, window, tmp_path, dry_run=False))
    check(error, ServerError, "503", "Wait until the network's API answers", "the-api-answers-5xx")
    _, last = last_lines(error)
    assert "then clear the task" in last
    assert "Nothing partial was kept" in last
    assert patches(sandbox) == []


def test_a_wrong_key_says_to_fix_the_connection(
    sandbox, make_connection, rules_file, window, tmp_path
) -> None:
    conn = make_connection("affiliate_network_default", host=sandbox.base_url, key="sbx_net_no")
    assert conn
    error = fail(review_op(rules_file, window, tmp_path, dry_run=False))
    check(
        error,
        AuthenticationError,
        "401",
        "Fix the connection's API key",
        "the-key-is-refused-401-or-403",
    )
    assert "sbx_net_no" not in "".join(traceback.format_exception(error))


def test_no_answer_says_to_check_the_host(make_connection, rules_file, window, tmp_path) -> None:
    make_connection("affiliate_network_default", host="http://127.0.0.1:9/v1", key="sbx_net_x")
    error = fail(review_op(rules_file, window, tmp_path, dry_run=False))
    check(
        error,
        TransportError,
        "connection error",
        "Check that the connection's host is right",
        "the-api-does-not-answer",
    )


def test_a_tripped_guardrail_names_the_audit_file(
    sandbox, network_conn, rules_file, window, tmp_path
) -> None:
    error = fail(review_op(rules_file, window, tmp_path, dry_run=False, max_reject_count=1))
    check(
        error,
        GuardrailError,
        "max_reject_count",
        "Check the top rejecting rules against the audit file (every decision: ",
        "guardrail-failures-what-they-mean-what-to-do",
    )
    _, last = last_lines(error)
    audit = Path(re.search(r"every decision: (\S+)\)", last)[1])  # type: ignore[index]
    assert audit.is_file()
    assert patches(sandbox) == []


def test_one_traceback_not_two(sandbox, network_conn, rules_file, window, tmp_path) -> None:
    # A non-retryable error became its Airflow twin: printed once, with the original frames.
    error = fail(review_op(rules_file, window, tmp_path, dry_run=False, max_reject_count=1))
    text = "".join(traceback.format_exception(error))
    assert text.count("Traceback (most recent call last)") == 1, text
    assert "guardrails.py" in text  # where it was raised


def test_429_says_to_lower_the_parallel_tasks(
    sandbox, network_conn, rules_file, window, tmp_path
) -> None:
    sandbox.set_faults(fail_hard=429)
    error = fail(review_op(rules_file, window, tmp_path, dry_run=False))
    check(
        error,
        RateLimitError,
        "gave up after 2 attempts",
        "The network's rate limit held for every attempt",
        "the-api-is-rate-limited-429",
    )


def test_a_key_of_the_other_portal_says_to_fix_the_connection(
    sandbox, make_connection, rules_file, window, tmp_path
) -> None:
    affiliate_key = next(iter(sandbox.keys["affiliate"].values()))
    make_connection("affiliate_network_default", host=sandbox.base_url, key=affiliate_key)
    error = fail(review_op(rules_file, window, tmp_path, dry_run=False))
    check(
        error,
        PermissionDeniedError,
        "403",
        "Give the connection a key of the right portal",
        "the-key-is-refused-401-or-403",
    )


def test_a_bad_connection_field_says_to_fix_it(
    sandbox, make_connection, rules_file, window, tmp_path
) -> None:
    host = sandbox.base_url.removesuffix("/v1") + "/v2"
    make_connection("affiliate_network_default", host=host, key=sandbox.keys["network"])
    sandbox.clear_requests()
    error = fail(review_op(rules_file, window, tmp_path, dry_run=False))
    check(
        error,
        ConnectionConfigError,
        "host must end in /v1",
        "Fix the connection field the message names",
        "the-key-is-refused-401-or-403",
    )
    assert sandbox.requests_log() == []


def test_another_writer_says_to_let_it_finish(
    sandbox, network_conn, rules_file, window, tmp_path
) -> None:
    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
    from affiliate_network.review.lease import WriteLease, lease_path

    network = AffiliateNetworkHook(network_conn).network.slug  # one lease per network
    holder = WriteLease(lease_path(str(tmp_path / "data"), network), "other_dag/run-7")
    holder.acquire(wait_s=0)
    try:
        error = fail(review_op(rules_file, window, tmp_path, dry_run=False, lease_wait_minutes=0))
    finally:
        holder.release()
    check(
        error,
        LeaseBusyError,
        "other_dag/run-7",
        "Let the run named in the message finish",
        "another-run-is-writing",
    )
    assert patches(sandbox) == []
