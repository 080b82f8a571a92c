"""Signing in, each DAG's documentation, and the Assets view (issue 15 item 1, issue 19)."""

from __future__ import annotations

import json
import time

import pytest

from demo.run import default_logical_date

from .browser import Browser
from .deployment import DAG_IDS, REVIEWER, UiStage
from .pages import close_dialog, open_dag_docs, parse_duration

pytestmark = pytest.mark.browser

#: Every dataset the DAGs write, as an Asset, with the tasks that produce it.
ASSETS = {
    "affiliate_network_conversions": {"publish_conversions"},
    "affiliate_network_affiliate_reports": {"affiliate_report"},
}


def test_sign_in_names_the_user(browser: Browser) -> None:
    browser.open("/")
    browser.wait_text("Dags")
    browser.shot("home after sign-in")
    browser.click(browser.button("User"))
    browser.wait_text(REVIEWER)
    browser.shot("user menu names the reviewer")


@pytest.mark.parametrize("dag_id", DAG_IDS)
def test_each_dag_shows_its_docs(browser: Browser, dag_id: str) -> None:
    text = open_dag_docs(browser, dag_id)
    browser.shot(f"docs {dag_id}")
    for table in browser.visible("[role=dialog] table")[:1]:  # the rendered table, in view
        browser.driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", table)
        browser.shot(f"docs {dag_id} table")
    assert len(text) > 500, text
    # Markdown rendered, not shown raw: a table's separator row or a heading's hashes would
    # mean the doc_md is broken (a blank line inside a table breaks it).
    assert "|---" not in text, text
    assert "###" not in text, text
    close_dialog(browser)


def test_assets_view_lists_every_dataset_with_its_producing_tasks(
    browser: Browser, ui: UiStage
) -> None:
    browser.open("/assets")
    for name in ASSETS:
        browser.wait_text(name)
    browser.shot("assets view")
    text = browser.body_text()
    rows = {line.split()[0] for line in text.splitlines() if line.startswith("affiliate_network_")}
    assert set(ASSETS) <= rows, text
    listed = ui.cluster.api.call("GET", "/assets", params={"limit": 100})["assets"]
    producers = {a["name"]: {t["task_id"] for t in a.get("producing_tasks", [])} for a in listed}
    for name, tasks in ASSETS.items():
        assert producers.get(name) == tasks, producers
        count = f"{len(tasks)} Task{'s' if len(tasks) > 1 else ''}"
        assert count in text, (name, count, text)
    # The producing task by name, as the row's "1 Task" button lists it.
    row = next(
        r for r in browser.visible("tbody tr") if "affiliate_network_affiliate_reports" in r.text
    )
    browser.click(
        next(e for e in row.find_elements("css selector", "button") if e.text == "1 Task")
    )
    browser.wait(
        lambda: any(e.text.strip().endswith("affiliate_report") for e in browser.visible("a")),
        "the producing task affiliate_report listed",
    )
    browser.shot("per-affiliate report asset with its producing task")


def test_a_run_made_like_the_demo_shows_its_real_duration(browser: Browser, ui: UiStage) -> None:
    """The demo runs ``airflow dags test`` with its default logical date; Airflow makes that the
    run's start date, so the UI showed 53 min for a 38 s run when it was today's midnight."""
    dag_id = "affiliate_offer_sync"
    started = time.monotonic()
    ui.cluster.airflow(
        "dags", "test", dag_id, default_logical_date(), "-c", json.dumps({"dry_run": True})
    )
    wall = time.monotonic() - started
    browser.open(f"/dags/{dag_id}/runs")
    row = browser.wait(lambda: (browser.visible("tbody tr") or [None])[0], "the run's row")
    browser.shot("runs list of a dags-test run")
    shown = [
        d for d in (parse_duration(c.text) for c in row.find_elements("css selector", "td")) if d
    ]
    assert shown, row.text
    assert shown[0] <= wall, f"the UI shows {shown[0]:.0f}s for a run that took {wall:.0f}s"
