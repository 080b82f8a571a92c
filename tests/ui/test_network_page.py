"""The network page in the browser: its figures against the landed files and the sandbox's
truth, its place in Airflow's navigation, and nothing shown to a browser without a user."""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import requests

from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
from affiliate_network.reports.reconcile import reconcile_day
from affiliate_network_sandbox.demo_connections import sandbox_connections
from tests.support.landed_history import land_days

from .browser import Browser
from .deployment import PROJECT_ROOT, UiStage, new_driver

pytestmark = pytest.mark.browser

PAGE = "/affiliate-network/"


@pytest.fixture(scope="module")
def landed(ui: UiStage) -> list[dt.date]:
    """Two days landed and reconciled into the stage's output base, as the report DAG does."""
    env = sandbox_connections(ui.sandbox, PROJECT_ROOT / "include")
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        last = dt.datetime.now(dt.UTC).date() - dt.timedelta(days=1)
        first = last - dt.timedelta(days=1)
        land_days("affiliate_network_default", ui.data_base, first, last)
        hook = AffiliateNetworkHook("affiliate_network_default")
        try:
            for day in (first, last):
                reconcile_day(
                    hook,
                    str(ui.data_base),
                    day,
                    on_mismatch="warn",
                    log=logging.getLogger("network_page"),
                )
        finally:
            hook.close()
    return [first, last]


def _conversions_by_status(partition: Path) -> dict[str, int]:
    """Base conversions per status, read from the manifest's files (not through the page)."""
    manifest = json.loads((partition / "_manifest.json").read_text())
    counts: Counter[str] = Counter()
    for entry in manifest["files"]:
        table = pq.read_table(partition / entry["name"], columns=["status", "is_event"])
        for status, is_event in zip(
            table.column("status").to_pylist(), table.column("is_event").to_pylist(), strict=True
        ):
            if not is_event:
                counts[status] += 1
    return dict(counts)


def _loaded(b: Browser) -> None:
    b.wait(
        lambda: b.driver.find_element("id", "status").get_attribute("data-loaded") == "true",
        "the network page's data",
    )


def test_network_page_figures_match_the_files(
    browser: Browser, ui: UiStage, landed: list[dt.date]
) -> None:
    browser.open(PAGE)
    _loaded(browser)
    browser.shot("network page")
    for day in landed:
        partition = ui.data_base / "conversions" / f"date={day}"
        manifest = json.loads((partition / "_manifest.json").read_text())
        row = browser.driver.find_element("css selector", f"#days-table tr[data-date='{day}']")
        rows = row.find_element("css selector", "[data-rows]").get_attribute("data-rows")
        assert int(rows) == manifest["row_count"]
        shown = json.loads(
            row.find_element("css selector", "[data-conversions]").get_attribute("data-conversions")
        )
        expected = _conversions_by_status(partition)
        assert shown == expected, (day, shown, expected)
        truth = ui.sandbox.truth_money(day.isoformat(), cells=False)
        for money in truth["currencies"].values():
            for status, cell in money["conversions"].items():
                assert shown.get(status, 0) == cell["count"], (day, status)
        # The chart's bars are the same numbers, each linking to the day's manifest.
        bars = browser.driver.find_elements(
            "css selector", f"#chart-conversions rect[data-date='{day}']"
        )
        assert {
            b.get_attribute("data-series"): int(b.get_attribute("data-value")) for b in bars
        } == {s: n for s, n in expected.items() if n}
        link = bars[0].find_element("xpath", "..").get_dom_attribute("href")
        assert "_manifest.json" in requests.utils.unquote(link)
        comparison = json.loads((partition / "_reconciliation.json").read_text())
        verdict = row.find_element("css selector", "[data-reconciled]")
        assert verdict.get_attribute("data-reconciled") == str(comparison["reconciled"]).lower()
        if not comparison["reconciled"]:
            assert f"{len(comparison['differing'])} of {len(comparison['cells'])}" in verdict.text
            table = browser.driver.find_element("css selector", f"[data-differing='{day}']")
            assert str(comparison["differing"][0]["affiliate"]) in table.text
    currencies = {
        c
        for day in landed
        for c in ui.sandbox.truth_money(day.isoformat(), cells=False)["currencies"]
    }
    for currency in currencies:  # one payout chart per currency, never a sum of two
        assert browser.driver.find_elements("id", f"chart-payout-{currency}")
    differing = browser.driver.find_elements("css selector", "#differing table")
    if differing:
        browser.driver.execute_script("arguments[0].scrollIntoView();", differing[0])
        browser.shot("differing cells")


def test_network_page_in_airflow_navigation(browser: Browser, landed: list[dt.date]) -> None:
    browser.open("/plugin/affiliate-network")
    frame = browser.find_visible("iframe", "the network page's frame")
    browser.driver.switch_to.frame(frame)
    try:
        _loaded(browser)
        assert landed[-1].isoformat() in browser.body_text()
    finally:
        browser.driver.switch_to.default_content()
    browser.shot("network page in Airflow")


def test_a_browser_without_a_user_sees_nothing(ui: UiStage, landed: list[dt.date]) -> None:
    answer = requests.get(ui.url + PAGE + "api/overview", timeout=30)
    assert answer.status_code == 401, answer.text
    assert str(landed[-1]) not in answer.text
    stranger = requests.get(
        ui.url + PAGE + "api/file",
        params={
            "path": str(ui.data_base / "conversions" / f"date={landed[-1]}" / "_manifest.json")
        },
        timeout=30,
    )
    assert stranger.status_code == 401
    driver = new_driver()
    try:
        b = Browser(driver, ui.url, "network page signed out")
        b.open(PAGE)
        b.wait(
            lambda: driver.find_element("id", "status").get_attribute("data-denied") == "401",
            "the page refusing",
        )
        b.shot("signed out")
        assert driver.find_element("id", "content").is_displayed() is False
        assert landed[-1].isoformat() not in b.body_text()
    finally:
        driver.quit()
