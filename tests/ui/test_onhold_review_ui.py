"""The on-hold review from the browser: trigger form, human-review requests, run durations.

A manual trigger is a dry run unless the person chooses to write (issue 19); a writing run asks
a person per rule under "Required Actions". The requests are answered in the browser as a
person does (``keep_on_hold`` empty, one id, several ids) and each answer's outcome is read
back from the sandbox's API. The stage sets the rules file's ``review.keep_decision_hours: 0``
so the second writing run asks again about what the first kept on hold.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from affiliate_network.review.human_requests import rule_of_subject
from tests.e2e.onhold_checks import _current_states

from .browser import Browser
from .deployment import REVIEWER, UiStage
from .pages import (
    answer_review,
    dropdown_text,
    open_review_request,
    parse_duration,
    trigger_from_form,
)

pytestmark = pytest.mark.browser

DAG_ID = "affiliate_onhold_review"
OUTLIER, MISMATCH = "outlier-sale-amount", "ip-mismatch"
#: The trigger form's Mode choices, as a person reads them.
MODE_LABELS = {
    "dry_run": "Dry run: decide and report, write nothing",
    "write": "Write decisions to the network",
}


def _audit(path: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def _wait_run(ui: UiStage, run_id: str, timeout: float = 240) -> dict:
    run = ui.cluster.assert_run_succeeded(DAG_ID, run_id, timeout=timeout)
    return run


def _review_ids(ui: UiStage, run_id: str) -> dict[str, dict[str, str]]:
    """rule -> {conversion id: on-hold id} of the run's ``review`` decisions."""
    summary = ui.cluster.api.xcom(DAG_ID, run_id, "review")
    out: dict[str, dict[str, str]] = {}
    for row in _audit(summary["audit_path"]):
        if row["action"] == "review":
            out.setdefault(row["rule_id"], {})[row["conversion_id"]] = str(
                row["on_hold_conversion_id"]
            )
    return out


def test_a_manual_trigger_defaults_to_a_dry_run(browser: Browser, ui: UiStage) -> None:
    ui.sandbox.clear_requests()
    started = time.monotonic()
    browser.open(f"/dags/{DAG_ID}")
    browser.click(browser.button("Trigger Dag"))
    browser.wait_text("Run Parameters")
    # The form says what an untouched trigger does, in words (issue 19: a switch showed nothing).
    assert dropdown_text(browser, "mode") == MODE_LABELS["dry_run"]
    browser.shot("trigger form mode default")
    run_id = trigger_from_form(browser, DAG_ID)
    browser.shot("dry run started")
    run = _wait_run(ui, run_id)
    wall = time.monotonic() - started
    assert run["conf"].get("mode", "dry_run") == "dry_run", run["conf"]
    assert "dry_run" not in run["conf"], run["conf"]
    summary = ui.cluster.api.xcom(DAG_ID, run_id, "review")
    assert summary["dry_run"] is True, summary
    decided = [r for r in _audit(summary["audit_path"]) if r["action"] != "none"]
    assert decided, "the dry run decided nothing: the sandbox plants conversions to decide"
    writes = [
        r
        for r in ui.sandbox.requests_log()
        if r["method"] == "PATCH" and r["path"].endswith("/networks/reporting/onhold")
    ]
    assert writes == []
    ids = sorted({str(r["on_hold_conversion_id"]) for r in decided})
    states = _current_states(ui.sandbox, ids)
    assert set(states.values()) == {"on_hold"}, states
    _check_duration_shown(browser, run_id, run, wall)


def _check_duration_shown(b: Browser, run_id: str, run: dict, wall: float) -> None:
    """The Runs tab shows the run's duration as it was (issue 19: 53 min shown for 38 s)."""
    b.open(f"/dags/{DAG_ID}/runs")
    row = b.wait(
        lambda: next(
            (r for r in b.visible("tbody tr") if run_id in r.text.replace("\n", "")), None
        ),
        f"the row of {run_id}",
    )
    b.shot("runs list with durations")
    shown = [
        d
        for d in (parse_duration(c.text) for c in row.find_elements("css selector", "td"))
        if d is not None
    ]
    assert shown, row.text
    assert shown[0] <= wall, (shown, wall)
    assert abs(shown[0] - float(run["duration"])) < 1, (shown, run["duration"])


def test_review_requests_answered_in_the_browser(browser: Browser, ui: UiStage) -> None:
    # First writing run: approve the outliers but one; keep every mismatch (field empty).
    run_id = trigger_from_form(browser, DAG_ID, choose={"mode": MODE_LABELS["write"]})
    assert ui.cluster.api.dag_run(DAG_ID, run_id)["conf"]["mode"] == "write"  # the choice
    table = open_review_request(browser, OUTLIER, run_id)
    _check_table(table)
    browser.shot(f"review request {OUTLIER}")
    kept_one = table[0][0]
    _answer(browser, ui, run_id, OUTLIER, "Approve all", [kept_one])
    open_review_request(browser, MISMATCH, run_id)
    _answer(browser, ui, run_id, MISMATCH, "Keep on hold", [])
    _wait_run(ui, run_id)
    first = _review_ids(ui, run_id)
    states = _current_states(ui.sandbox, [*first[OUTLIER].values(), *first[MISMATCH].values()])
    for conversion, on_hold in first[OUTLIER].items():
        assert states[on_hold] == ("on_hold" if conversion == kept_one else "approved")
    assert {states[i] for i in first[MISMATCH].values()} == {"on_hold"}

    # Second writing run asks again: reject the mismatches but three; approve the kept one.
    run_id = trigger_from_form(browser, DAG_ID, choose={"mode": MODE_LABELS["write"]})
    table = open_review_request(browser, MISMATCH, run_id)
    kept_three = [row[0] for row in table[:3]]
    _answer(browser, ui, run_id, MISMATCH, "Reject all", kept_three)
    open_review_request(browser, OUTLIER, run_id)
    _answer(browser, ui, run_id, OUTLIER, "Approve all", [])
    _wait_run(ui, run_id)
    states = _current_states(ui.sandbox, [*first[OUTLIER].values(), *first[MISMATCH].values()])
    assert {states[i] for i in first[OUTLIER].values()} == {"approved"}
    for conversion, on_hold in first[MISMATCH].items():
        assert states[on_hold] == ("on_hold" if conversion in kept_three else "rejected")
    _check_reviewer_recorded(ui, run_id)


def _check_table(rows: list[list[str]]) -> None:
    """Money to the cent with its currency, names beside ids, matched values readable."""
    assert rows
    for conversion, affiliate, offer, payout, sale, matched in rows:
        assert len(conversion) == 32, conversion
        for name in (affiliate, offer):
            assert name.endswith(")"), name  # "Name (id)"
            assert not name.startswith("("), name
        for money in (payout, sale):
            amount, currency = money.rsplit(" ", 1)
            assert len(currency) == 3, money
            assert currency.isalpha(), money
            assert len(amount.split(".")[-1]) == 2, money  # to the cent
        assert "sale_amount=" in matched or "ratio_to_median" in matched, matched
        assert "e+" not in matched, matched  # no 1.3e+04 for 12,996.41


def _hitl_details(ui: UiStage, run_id: str) -> list[dict]:
    details = ui.cluster.api.call(
        "GET", f"/dags/{DAG_ID}/dagRuns/~/hitlDetails", params={"limit": 100}
    )["hitl_details"]
    return [d for d in details if d["task_instance"]["dag_run_id"] == run_id]


def _answer(b: Browser, ui: UiStage, run_id: str, rule: str, option: str, keep: list[str]) -> None:
    """Answer the open request of ``rule`` once the scheduler took its pause (as a person
    would, seconds later: :meth:`~tests.e2e.harness.AirflowCluster.wait_pause_taken`)."""
    [detail] = [d for d in _hitl_details(ui, run_id) if rule_of_subject(d["subject"]) == rule]
    ui.cluster.wait_pause_taken(detail["task_instance"])
    answer_review(b, option, keep)
    _wait_answered(b, ui, run_id, rule)


def _wait_answered(b: Browser, ui: UiStage, run_id: str, rule: str) -> None:
    def _answered() -> bool:
        details = _hitl_details(ui, run_id)
        return any(
            rule_of_subject(d["subject"]) == rule and d.get("response_received") for d in details
        )

    b.wait(_answered, f"the answer to {rule} recorded", timeout=60)
    b.driver.refresh()  # the page shows the recorded answer after a reload
    b.wait_text("keep_on_hold")
    b.wait(lambda: not b.visible("#element_keep_on_hold:enabled"), "the answer shown", 20)
    b.shot(f"answered {rule}")


def _check_reviewer_recorded(ui: UiStage, run_id: str) -> None:
    details = _hitl_details(ui, run_id)
    users = {(d.get("responded_by_user") or {}).get("name") for d in details}
    assert users == {REVIEWER}, details


#: Clamped (cut with an ellipsis) when the text needs more lines than the cell shows.
_CLAMPED_JS = """
const cell = arguments[0].closest('td') || arguments[0];
return [cell, ...cell.querySelectorAll('*')].some(
    (e) => e.scrollHeight > e.clientHeight + 1 || e.scrollWidth > e.clientWidth + 1);
"""


class SubjectCutError(AssertionError):
    """A review subject is cut in the Required Actions list."""


def test_review_subjects_are_readable_in_the_required_actions_list(
    browser: Browser, ui: UiStage
) -> None:
    """The rule id leads the subject and no subject is cut (issue 19).

    Reads the requests the writing runs above made (run it with them: ``-k "browser or subjects"``).
    """
    browser.open("/required_actions")
    links = browser.wait(
        lambda: [a for a in browser.visible("a") if rule_of_subject(a.text) in (OUTLIER, MISMATCH)],
        "the review requests",
    )
    browser.shot("required actions subjects")
    for a in links:
        assert a.text.startswith(f"{rule_of_subject(a.text)}: "), a.text
        assert re.fullmatch(r"\S+: (1 conversion|\d+ conversions) to review", a.text), a.text
    cut = [a.text for a in links if browser.driver.execute_script(_CLAMPED_JS, a)]
    if cut:
        raise SubjectCutError(f"subjects cut in the list: {cut}")
