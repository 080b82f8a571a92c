"""The on-call paths as a person clicks them in Airflow 3.3's UI: backfills from the Trigger
dialog, a failed task's log and its clear with downstream from the grid.

Days (UTC, D = today; the sandbox holds D-13..D) are chosen so that no two paths land the same
day, and so that no day of a path was landed before it by another browser test: the network
page lands D-2..D-1, and the scheduled run that unpausing the DAG starts re-pulls D-8..D-1.

* the default backfill: D-13..D-12, no trailing day;
* the backfill with "Override parameters on existing runs" and ``trailing_days`` 1: D-11..D-10
  (each run also re-pulls the day before its own);
* the failed run and its clear: D-9.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from demo.connections import sandbox_connections
from tests.e2e.checks import check_conversion_partitions, day_truth, report_days, run_day
from tests.e2e.harness import PROJECT_ROOT, wait_for
from tests.support.landed_history import land_days

from .browser import Browser
from .deployment import UiStage
from .pages import (
    clear_task_with_downstream,
    confirm_until,
    dialog_checkbox,
    failure_message,
    is_checked,
    last_log_record,
    open_trigger_dialog,
    set_datetime,
    submit_trigger,
    type_param,
)

#: Each test waits for real runs (two backfill runs and the scheduled run unpausing starts, or
#: a failed run and its rerun) and may carry the stage's start-up (pyproject's default: 300 s).
pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

DAG_ID = "affiliate_daily_reports"
CONN = "affiliate_network_default"
#: The label Airflow 3.3 gives the backfill dialog's box that sends the run parameters.
OVERRIDE = "Override parameters on existing runs"
#: The conversion pull and what a clear "with downstream" of it runs again.
PULL = "pull_conversions"
DOWNSTREAM = ["repull_trailing_window", "reconcile_conversions", "publish_conversions"]
PAGE = "/affiliate-network/"


def _day(days_ago: int) -> str:
    return (dt.datetime.now(dt.UTC).date() - dt.timedelta(days=days_ago)).isoformat()


@pytest.fixture(scope="module", autouse=True)
def _paused_afterwards(ui: UiStage) -> Iterator[None]:
    """The dialogs unpause the DAG (their default); the stage's later tests find it paused."""
    yield
    ui.cluster.api.pause(DAG_ID)


def _backfill_from_dialog(
    b: Browser, ui: UiStage, first: str, last: str, *, trailing_days: str | None
) -> dict:
    """Trigger -> Backfill, From ``first`` To ``last``, the other fields as the form has them;
    with ``trailing_days``, tick the override box and type it. Return the backfill (REST)."""
    # One running backfill per DAG: Airflow refuses the next (409, "There is already a running
    # backfill") until its scheduler's sweep, every 30 s, marks the last one complete after its
    # runs ended. A person sees the earlier backfill finished first; so does the test.
    wait_for(
        lambda: all(bf["completed_at"] for bf in ui.cluster.api.backfills(DAG_ID)),
        what="the earlier backfills marked complete",
        timeout=180,
    )
    before = {bf["id"] for bf in ui.cluster.api.backfills(DAG_ID)}
    # Made on a paused DAG, as a new deployment has it: Airflow 3.3.2's scheduler, looping over
    # the active DAG's runs, marked a backfill run the api-server was still creating successful
    # (no task instances yet) and died on the stale row (StaleDataError, seen once in the
    # full stage); a paused DAG's runs are not looked at until the dialog unpauses it.
    ui.cluster.api.pause(DAG_ID)
    open_trigger_dialog(b, DAG_ID, backfill=True)
    set_datetime(b, 0, first)
    set_datetime(b, 1, last)
    b.wait_text("2 runs will be triggered.")
    # Backfill runs of a paused DAG stay queued: the box a person leaves ticked.
    assert is_checked(dialog_checkbox(b, f"Unpause {DAG_ID} on trigger"))
    override = dialog_checkbox(b, OVERRIDE)
    assert not is_checked(override)  # the default form sends no parameters
    if trailing_days is not None:
        b.click(override)
        b.wait(lambda: is_checked(override), "the override box ticked")
        type_param(b, "trailing_days", trailing_days)
    b.shot(f"backfill {first} {last} {'override' if trailing_days else 'default form'}")

    def created() -> dict | None:
        if "already a running backfill" in b.body_text():
            raise AssertionError(f"the dialog refused the backfill: {b.shot('backfill refused')}")
        return next((bf for bf in ui.cluster.api.backfills(DAG_ID) if bf["id"] not in before), None)

    backfill = confirm_until(b, "Run Backfill", created, "the new backfill")
    b.wait(lambda: not b.visible("[role=dialog]"), "the dialog closed after the backfill")
    return backfill


def _backfill_runs(ui: UiStage, days: list[str]) -> dict[str, str]:
    """day -> run id of the backfill runs landing ``days``, each waited for until it succeeded."""
    runs = {
        run_day(r): r["dag_run_id"]
        for r in ui.cluster.api.dag_runs(DAG_ID)
        if r["run_type"] == "backfill" and run_day(r) in days
    }
    assert sorted(runs) == days, runs
    for run_id in runs.values():
        ui.cluster.assert_run_succeeded(DAG_ID, run_id, timeout=300)
    return runs


def _check_network_page_rows(b: Browser, ui: UiStage, days: list[str]) -> None:
    """The network page's row of each day: the manifest's rows, the truth's, reconciled."""
    b.open(PAGE)
    b.wait(
        lambda: b.driver.find_element("id", "status").get_attribute("data-loaded") == "true",
        "the network page's data",
    )
    for day in days:
        manifest = json.loads(
            (ui.data_base / "conversions" / f"date={day}" / "_manifest.json").read_text()
        )
        row = b.driver.find_element("css selector", f"#days-table tr[data-date='{day}']")
        shown = int(row.find_element("css selector", "[data-rows]").get_attribute("data-rows"))
        assert shown == manifest["row_count"] == day_truth(ui.sandbox, day), (day, shown)
        verdict = row.find_element("css selector", "[data-reconciled]")
        assert verdict.get_attribute("data-reconciled") == "true", (day, verdict.text)
    row = b.driver.find_element("css selector", f"#days-table tr[data-date='{days[0]}']")
    b.driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", row)
    b.shot(f"network page rows {days[0]} {days[-1]}")


def test_backfill_from_the_dialog_with_the_default_form_repulls_no_trailing_day(
    browser: Browser, ui: UiStage
) -> None:
    days = [_day(13), _day(12)]
    backfill = _backfill_from_dialog(browser, ui, days[0], days[-1], trailing_days=None)
    assert backfill["dag_run_conf"] in (None, {}), backfill  # what the default form sends
    runs = _backfill_runs(ui, days)
    for day, run_id in runs.items():
        # Its own day, and no trailing day although the DAG's default is 7.
        assert report_days(ui.cluster, run_id) == [day], (run_id, report_days(ui.cluster, run_id))
    check_conversion_partitions(ui.data_base, ui.sandbox, days)
    browser.open(f"/dags/{DAG_ID}/runs")
    browser.wait_text(f"backfill__{days[-1]}")
    browser.shot("runs list after the default backfill")
    _check_network_page_rows(browser, ui, days)


def test_backfill_from_the_dialog_with_the_override_box_sends_its_parameters(
    browser: Browser, ui: UiStage
) -> None:
    days = [_day(11), _day(10)]
    backfill = _backfill_from_dialog(browser, ui, days[0], days[-1], trailing_days="1")
    assert (backfill["dag_run_conf"] or {}).get("trailing_days") == 1, backfill
    runs = _backfill_runs(ui, days)
    for day, run_id in runs.items():
        before = (dt.date.fromisoformat(day) - dt.timedelta(days=1)).isoformat()
        assert report_days(ui.cluster, run_id) == [day, before], run_id  # the one asked for
    check_conversion_partitions(ui.data_base, ui.sandbox, [_day(12), *days])
    _check_network_page_rows(browser, ui, days)


def _clean_checksum(ui: UiStage, day: str) -> str:
    """The checksum a clean landing of ``day`` gives (the report DAG's landing, another base)."""
    env = sandbox_connections(ui.sandbox, PROJECT_ROOT / "include")
    date = dt.date.fromisoformat(day)
    with tempfile.TemporaryDirectory(prefix="afn-") as tmp, pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        land_days(CONN, Path(tmp), date, date, show_events=True)
        manifest = json.loads(Path(tmp, "conversions", f"date={day}", "_manifest.json").read_text())
    return str(manifest["content_checksum"])


def test_a_failed_pull_names_its_next_step_and_a_clear_with_downstream_relands_the_day(
    browser: Browser, ui: UiStage
) -> None:
    day = _day(9)
    partition = ui.data_base / "conversions" / f"date={day}"
    assert not partition.exists(), "another test landed the day this one must land first"
    ui.sandbox.set_faults(fail_hard=503, paths=["/networks/reporting/conversions"])
    try:
        # A single run for logical date D lands D-1; trailing days 0: this day only.
        open_trigger_dialog(browser, DAG_ID)
        logical = (dt.date.fromisoformat(day) + dt.timedelta(days=1)).isoformat()
        set_datetime(browser, 0, logical)
        type_param(browser, "trailing_days", "0")
        browser.shot("trigger one day")
        run_id = submit_trigger(browser)
        ui.cluster.wait_task_state(DAG_ID, run_id, PULL, {"failed"}, timeout=240)
    finally:
        ui.sandbox.clear_faults()  # the API answers again
    assert not partition.exists()  # nothing partial landed

    # The grid: the failed square of the pull, its log.
    browser.open(f"/dags/{DAG_ID}")
    cell = browser.wait(
        lambda: browser.driver.find_element("id", f"grid-{run_id}-{PULL}"), "the failed task"
    )
    browser.click(cell)
    message = failure_message(browser)
    browser.shot("failed task log with its next step")
    last_line = message.splitlines()[-1]
    assert last_line.startswith("Untouched: "), message
    assert "Next step: Wait until the network's API answers again" in last_line, message
    anchor = "the-api-answers-5xx"
    assert last_line.endswith(f"docs/runbook.md#{anchor}"), message
    headings = [
        re.sub(r"[^a-z0-9 -]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        for line in (PROJECT_ROOT / "docs" / "runbook.md").read_text().splitlines()
        if line.startswith("#")
    ]
    assert anchor in headings, "the runbook has no entry the message links to"
    # The error is the log's last record: nothing after it says otherwise ("0 retries").
    record = last_log_record(browser)
    assert message.splitlines()[0] in record, record
    assert "0 retries" not in browser.body_text()

    def cleared() -> bool:
        tis = {ti["task_id"]: ti for ti in ui.cluster.api.task_instances(DAG_ID, run_id)}
        return tis[PULL]["try_number"] >= 2 or tis[PULL]["state"] != "failed"

    affected = clear_task_with_downstream(browser, DOWNSTREAM, cleared)
    assert affected == [PULL, *DOWNSTREAM], affected
    ui.cluster.assert_run_succeeded(DAG_ID, run_id, timeout=240)
    tis = {ti["task_id"]: ti for ti in ui.cluster.api.task_instances(DAG_ID, run_id)}
    assert tis[PULL]["try_number"] == 2, tis[PULL]
    assert report_days(ui.cluster, run_id) == [day]
    check_conversion_partitions(ui.data_base, ui.sandbox, [day])
    landed = json.loads((partition / "_manifest.json").read_text())
    assert landed["content_checksum"] == _clean_checksum(ui, day)
    browser.open(f"/dags/{DAG_ID}")
    browser.wait(
        lambda: browser.driver.find_element("id", f"grid-{run_id}-{PULL}"), "the cleared task"
    )
    browser.shot("grid after the clear")
