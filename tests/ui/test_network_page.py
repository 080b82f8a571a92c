"""The network page in the browser: its figures against the landed files and the sandbox's
truth, its place in Airflow's navigation, and nothing shown to a browser without a user or to a
user granted no DAG."""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import requests

from affiliate_network.helpers.run_records import write_run_record
from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
from affiliate_network.partitions.summary import StatusSummary
from affiliate_network.reports.reconcile import reconcile_day
from affiliate_network.review.identity import ReviewRun
from affiliate_network.review.job import run_review
from affiliate_network.review.options import ReviewOptions
from affiliate_network.review.window import review_window
from affiliate_network.rules.engine import RuleSet
from affiliate_network.sync.ledger import Ledger, default_ledger_path
from affiliate_network.sync.loader import load_desired_state
from affiliate_network.sync.plan import build_plan
from demo import SANDBOX_OFFER_STATE
from demo.connections import sandbox_connections
from tests.e2e.harness import PROJECT_ROOT
from tests.support.fabricated_days import fabricated_table, publish_day
from tests.support.landed_history import land_days

from .browser import Browser
from .deployment import EU_READER, OTHER_REVIEW_DAG, OUTSIDER, UiStage, new_driver

pytestmark = pytest.mark.browser

PAGE = "/affiliate-network/"


#: The review run the page's review section is checked against (a dry run: writes nothing).
REVIEW_DAG = "affiliate_onhold_review"
CONN = "affiliate_network_default"


@dataclass
class Stage:
    """What the fixture made through the job libraries, for the page to be compared with."""

    days: list[dt.date]
    review_audit: Path
    ledger: Path
    plan_counts: dict[str, int]
    big_day: dt.date
    runs: dict[str, tuple[str, str, str | None]]  # run id -> (dag id, outcome, detail)


@pytest.fixture(scope="module")
def landed(ui: UiStage) -> Stage:
    """What the three DAGs write, made through their job libraries into the stage's base.

    Two days landed with their events and reconciled (as the report DAG does), one review dry
    run (the review DAG's default for a manual run) and the offer sync's ledger with the plan
    the next sync would run. Self-contained: the other browser files sort after this one.
    """
    env = sandbox_connections(ui.sandbox, PROJECT_ROOT / "include")
    log = logging.getLogger("network_page")
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        last = dt.datetime.now(dt.UTC).date() - dt.timedelta(days=1)
        first = last - dt.timedelta(days=1)
        land_days(CONN, ui.data_base, first, last, show_events=True)
        hook = AffiliateNetworkHook(CONN)
        try:
            for day in (first, last):
                reconcile_day(hook, str(ui.data_base), day, on_mismatch="fail", log=log)
            ruleset = RuleSet.from_file(PROJECT_ROOT / "include" / "onhold_rules.yaml")
            window = review_window(
                timezone_id=None,
                lookback_days=14,
                to_date=None,
                as_of=None,
                horizon_hours=ruleset.horizon_hours,
            )
            now = dt.datetime.now(dt.UTC)
            # Its own state folder (conn_id), so the review DAG's traffic snapshot stays its own.
            run = ReviewRun(
                base=str(ui.data_base),
                conn_id="network_page_check",
                dag_id=REVIEW_DAG,
                run_id=f"manual__{now:%Y-%m-%dT%H:%M:%S}+00:00",
            )
            review = run_review(
                hook, ruleset, window, options=ReviewOptions(), run=run, dry_run=True, log=log
            )
            ledger = Ledger.load(default_ledger_path(CONN, str(ui.data_base)), target=hook.base_url)
        finally:
            hook.close()
    ledger.save()  # as a sync that has sent nothing yet leaves it
    plan = build_plan(load_desired_state(SANDBOX_OFFER_STATE), ledger)
    runs = _recorded_runs(ui.data_base, now)
    # A 1,000,000-row day written straight through partitions/ (about a second with pyarrow),
    # far from the days the other browser files land.
    big_day = dt.datetime.now(dt.UTC).date() - dt.timedelta(days=20)
    publish_day(ui.data_base, big_day, fabricated_table(1_000_000), run_id="scheduled__big_day")
    return Stage(
        [first, last],
        Path(str(review.audit_path)),
        Path(str(ledger.path)),
        plan.counts(),
        big_day,
        runs,
    )


def _recorded_runs(base: Path, now: dt.datetime) -> dict[str, tuple[str, str, str | None]]:
    """Review runs as the review operator records them: a guardrail stop and a failure of the
    review DAG, and a run of a second review DAG that only its own reader may see."""
    from upath import UPath

    day = f"{now:%Y-%m-%d}"
    runs = {
        f"manual__{day}T01:00:00+00:00": (REVIEW_DAG, "stopped", "rejections > max_reject_count 1"),
        f"manual__{day}T02:00:00+00:00": (REVIEW_DAG, "failed", "ValueError: no rules file"),
        f"manual__{day}T03:00:00+00:00": (OTHER_REVIEW_DAG, "wrote", None),
    }
    for run_id, (dag_id, outcome, detail) in runs.items():
        folder = base / "onhold_review" / dag_id / run_id.replace(":", "_").replace("+", "_")
        reason = "approved" if outcome == "wrote" else "guardrail tripped: nothing written"
        row = {
            "rule_id": "r",
            "action": "approve",
            "payout": "12.5",
            "currency_id": "USD",
            "on_hold_conversion_id": run_id,
            "applied": outcome == "wrote",
            "reason": reason,
        }
        folder.mkdir(parents=True, exist_ok=True)
        if outcome != "failed":
            (folder / "decisions-attempt-1.jsonl").write_text(json.dumps(row) + "\n")
        write_run_record(
            UPath(str(folder)), dag_id=dag_id, run_id=run_id, task_id="review", attempt=1,
            conn_id=CONN, outcome=outcome, detail=detail,
        )  # fmt: skip
    return runs


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


def _money(element) -> dict[str, Decimal]:
    """An amount cell's exact money per currency (its ``data-money``: the shown text rounds)."""
    return {c: Decimal(v) for c, v in json.loads(element.get_attribute("data-money")).items()}


def _payout_cell(cell) -> dict[str, list[dict[str, Decimal]]]:
    """The days table's payout cell: each status's conversions' money, and its events' apart."""
    out: dict[str, list[dict[str, Decimal]]] = {"conversions": [], "events": []}
    for line in cell.find_elements("css selector", ":scope > div"):
        amounts = line.find_elements("css selector", ":scope > [data-money]")
        if amounts:
            out["conversions"].append(_money(amounts[0]))
        out["events"] += [
            _money(e) for e in line.find_elements("css selector", ".muted [data-money]")
        ]
    return out


def test_network_page_figures_match_the_files(browser: Browser, ui: UiStage, landed: Stage) -> None:
    started = time.monotonic()
    browser.open(PAGE)
    _loaded(browser)
    assert browser.driver.find_element("id", "problems").text == ""
    for day in landed.days:
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
        truth = ui.sandbox.truth_money(day.isoformat(), timezone_id=67, cells=False)
        for money in truth["currencies"].values():
            for status, cell in money["conversions"].items():
                assert shown.get(status, 0) == cell["count"], (day, status)
        # Money per currency: the conversions' payout and the events' apart, each equal to the
        # truth's, currency by currency (the exact text is each amount's data-money).
        payout = _payout_cell(row.find_elements("css selector", "td")[4])
        for currency, money in truth["currencies"].items():
            conv = sum((p.get(currency, Decimal(0)) for p in payout["conversions"]), Decimal(0))
            events = sum((p.get(currency, Decimal(0)) for p in payout["events"]), Decimal(0))
            want = sum((Decimal(c["payout"]) for c in money["conversions"].values()), Decimal(0))
            assert conv == want, (day, currency, conv, want)
            assert events == Decimal(money["events"]["payout"]), (day, currency, events)
        # Rows = conversions + events, labelled so.
        totals = row.find_element("css selector", "[data-rows]").get_attribute("title")
        assert sum(int(n.replace(",", "")) for n in totals.split()[::3]) == manifest["row_count"]
        assert row.get_attribute("data-state") == "landed"
        # The chart's bars are the same numbers, each linking to the run that landed the day.
        bars = browser.driver.find_elements(
            "css selector", f"#chart-conversions rect[data-date='{day}']"
        )
        assert {
            b.get_attribute("data-series"): int(b.get_attribute("data-value")) for b in bars
        } == {s: n for s, n in expected.items() if n}
        link = requests.utils.unquote(bars[0].find_element("xpath", "..").get_dom_attribute("href"))
        assert "/dags/affiliate_daily_reports/runs" in link, link
        comparison = json.loads((partition / "_reconciliation.json").read_text())
        assert comparison["reconciled"] is True, comparison["differing"][:3]
        verdict = row.find_element("css selector", "[data-reconciled]")
        assert verdict.get_attribute("data-reconciled") == "true"
        assert f"reconciles ({len(comparison['cells'])} cells)" in verdict.text
    assert not browser.driver.find_elements("css selector", "#differing table")
    for currency in {
        c
        for day in landed.days
        for c in ui.sandbox.truth_money(day.isoformat(), cells=False)["currencies"]
    }:  # one payout chart per currency, never a sum of two
        assert browser.driver.find_elements("id", f"chart-payout-{currency}")
    browser.shot("network page")

    # The review's dry run: its decisions and money per action as its audit file holds them.
    audit = [json.loads(line) for line in landed.review_audit.read_text().splitlines() if line]
    assert audit, "the review decided nothing: the page's review section would be empty"
    run_row = browser.driver.find_element(
        "css selector", f"#runs-table tr[data-run='{landed.review_audit.parent.name}']"
    )
    assert (
        run_row.find_element("css selector", "[data-outcome]").get_attribute("data-outcome")
        == "dry_run"
    )
    actions = Counter(d["action"] for d in audit)
    shown_actions = run_row.find_element("css selector", "[data-actions]")
    assert json.loads(shown_actions.get_attribute("data-actions")) == dict(actions)
    stake: dict[str, dict[str, Decimal]] = {}
    for d in audit:
        per = stake.setdefault(d["action"], {})
        per[d["currency_id"]] = per.get(d["currency_id"], Decimal(0)) + Decimal(str(d["payout"]))
    money_cell = run_row.find_elements("css selector", "td")[3]
    shown_stake = [_money(m) for m in money_cell.find_elements("css selector", "[data-money]")]
    assert shown_stake == [stake[a] for a in sorted(stake)]
    # Waiting: what Airflow holds (its own API), never the audit's review rows.
    held = ui.cluster.api.call(
        "GET",
        "/dags/~/dagRuns/~/hitlDetails",
        params={"response_received": "false", "ti_state": "deferred", "limit": 1000},
    )
    review_held = [h for h in held["hitl_details"]
                   if h["task_instance"]["dag_id"] in (REVIEW_DAG, OTHER_REVIEW_DAG)]  # fmt: skip
    assert int(browser.driver.find_element("id", "waiting-count").text) == len(review_held)
    review = browser.driver.find_element("id", "review-section")
    browser.driver.execute_script("arguments[0].scrollIntoView();", review)
    browser.shot("review section")

    # The offer sync: the ledger's objects and the plan the next sync would send.
    network = landed.ledger.name[len("ledger-") : -len(".json")]
    sync_row = browser.driver.find_element(
        "css selector", f"#sync-table tr[data-network='{network}']"
    )
    cells = sync_row.find_elements("css selector", "td")
    ledger = json.loads(landed.ledger.read_text())
    assert int(cells[2].text) == len(ledger["objects"])
    planned = {a: n for a, n in landed.plan_counts.items() if n}
    assert planned, "the desired state plans nothing"
    assert cells[4].text == ", ".join(f"{a} {n:,}" for a, n in planned.items())
    assert cells[5].get_attribute("data-blocked") == "false"
    # The README's picture: the whole page in one tall window (docs/images/network-page.png).
    size = browser.driver.get_window_size()
    browser.driver.set_window_size(1440, 2400)
    try:
        browser.driver.execute_script("window.scrollTo(0, 0);")
        browser.shot("whole page")
    finally:
        browser.driver.set_window_size(size["width"], size["height"])
    print(f"\nnetwork page checked in the browser in {time.monotonic() - started:.1f}s")


def test_each_run_shows_what_it_was_and_a_million_row_day_shows_its_manifest(
    browser: Browser, ui: UiStage, landed: Stage
) -> None:
    """A guardrail stop and a failure as their records say, the day's written total without
    them; the 1,000,000-row day's figures equal its files'; light and dark screenshots."""
    browser.open(PAGE)
    _loaded(browser)
    for run_id, (dag_id, outcome, detail) in landed.runs.items():
        rows = browser.driver.find_elements("css selector", f"#runs-table tr[data-run='{run_id}']")
        if dag_id == OTHER_REVIEW_DAG:  # the admin reads every DAG
            assert rows, run_id
        cell = rows[0].find_element("css selector", "[data-outcome]")
        assert cell.get_attribute("data-outcome") == outcome, run_id
        if detail:
            assert detail in cell.text
        link = rows[0].find_element("css selector", "[data-run-link]").get_dom_attribute("href")
        assert requests.utils.unquote(link).endswith(f"/dags/{dag_id}/runs/{run_id}/tasks/review")
    # The 1,000,000-row day: its figures equal what its files hold (counted here with pyarrow).
    partition = ui.data_base / "conversions" / f"date={landed.big_day}"
    manifest = json.loads((partition / "_manifest.json").read_text())
    files = (
        StatusSummary()
        .add_tables(
            pq.read_table(
                partition / f["name"], columns=["status", "is_event", "currency_id", "payout"]
            )
            for f in manifest["files"]
        )
        .to_json()["by_status"]
    )
    row = browser.driver.find_element(
        "css selector", f"#days-table tr[data-date='{landed.big_day}']"
    )
    assert (
        int(row.find_element("css selector", "[data-rows]").get_attribute("data-rows")) == 1_000_000
    )
    shown = json.loads(
        row.find_element("css selector", "[data-conversions]").get_attribute("data-conversions")
    )
    assert shown == {s: c["conversions"] for s, c in files.items()}
    events = json.loads(
        row.find_element("css selector", "[data-events]").get_attribute("data-events")
    )
    assert events == {s: c["events"] for s, c in files.items() if c["events"]}
    # On the offer sync's Network tab its section comes first; the day range reloads the data.
    browser.open(f"{PAGE}?dag_id=affiliate_offer_sync")
    _loaded(browser)
    first = browser.driver.find_element("css selector", "#sections > section")
    assert first.get_attribute("id") == "sync-section"
    from selenium.webdriver.support.ui import Select

    Select(browser.driver.find_element("id", "days")).select_by_visible_text("7")
    _loaded(browser)
    browser.wait(
        lambda: len(browser.driver.find_elements("css selector", "#days-table tbody tr")) == 7,
        "seven days after choosing 7",
    )
    for theme in ("light", "dark"):
        browser.open(f"{PAGE}?theme={theme}")
        _loaded(browser)
        size = browser.driver.get_window_size()
        browser.driver.set_window_size(1440, 2400)
        try:
            browser.shot(f"theme {theme}")
        finally:
            browser.driver.set_window_size(size["width"], size["height"])


def test_a_reader_of_one_review_dag_sees_only_its_runs(ui: UiStage, landed: Stage) -> None:
    """The second review DAG's reader: its run only; no landed day, no other review run, no
    ledger, no reviewers' state; the other DAGs' files answer 404."""
    token = requests.post(
        ui.url + "/auth/token",
        json={"username": EU_READER, "password": ui.reviewer_password},
        timeout=30,
    )
    token.raise_for_status()
    auth = {"Authorization": f"Bearer {token.json()['access_token']}"}
    page = requests.get(ui.url + PAGE + "api/overview", headers=auth, timeout=60)
    assert page.status_code == 200, page.text
    data = page.json()
    assert data["shown"] == ["review"]
    assert {r["dag_id"] for r in data["review"]["runs"]} == {OTHER_REVIEW_DAG}
    assert data["days"] == []
    assert data["sync"]["ledgers"] == []
    assert data["review"]["state"] == []
    mine = data["review"]["runs"][0]["files"]["decisions"]
    theirs = landed.review_audit.relative_to(ui.data_base).as_posix()
    manifest = f"conversions/date={landed.days[-1]}/_manifest.json"
    for path, status in ((mine, 200), (theirs, 404), (manifest, 404)):
        answer = requests.get(
            ui.url + PAGE + "api/file", params={"path": path}, headers=auth, timeout=30
        )
        assert answer.status_code == status, (path, answer.status_code)


def test_network_page_in_airflow_navigation(browser: Browser, landed: Stage) -> None:
    browser.open("/plugin/affiliate-network")
    frame = browser.find_visible("iframe", "the network page's frame")
    browser.driver.switch_to.frame(frame)
    try:
        _loaded(browser)
        assert landed.days[-1].isoformat() in browser.body_text()
    finally:
        browser.driver.switch_to.default_content()
    browser.shot("network page in Airflow")


def test_a_browser_without_a_user_sees_nothing(ui: UiStage, landed: Stage) -> None:
    answer = requests.get(ui.url + PAGE + "api/overview", timeout=30)
    assert answer.status_code == 401, answer.text
    assert str(landed.days[-1]) not in answer.text
    stranger = requests.get(
        ui.url + PAGE + "api/file",
        params={"path": f"conversions/date={landed.days[-1]}/_manifest.json"},
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
        assert landed.days[-1].isoformat() not in b.body_text()
    finally:
        driver.quit()


def test_a_user_without_access_to_the_dags_sees_nothing(ui: UiStage, landed: Stage) -> None:
    """Signed in, but granted no DAG by the auth manager: Airflow lists none of the DAGs, and
    the page and its data routes give nothing (403), though the files are there."""
    manifest = ui.data_base / "conversions" / f"date={landed.days[-1]}" / "_manifest.json"
    assert manifest.is_file()
    token = requests.post(
        ui.url + "/auth/token",
        json={"username": OUTSIDER, "password": ui.reviewer_password},
        timeout=30,
    )
    token.raise_for_status()
    auth = {"Authorization": f"Bearer {token.json()['access_token']}"}
    dags = requests.get(ui.url + "/api/v2/dags", headers=auth, timeout=30)
    assert dags.status_code == 403, dags.text  # Airflow's own DAG list: the same no
    rel = manifest.relative_to(ui.data_base).as_posix()
    for route, params in (("api/overview", {}), ("api/file", {"path": rel})):
        answer = requests.get(ui.url + PAGE + route, params=params, headers=auth, timeout=30)
        assert answer.status_code == 403, (route, answer.status_code, answer.text)
        assert str(landed.days[-1]) not in answer.text
    driver = new_driver()
    try:
        b = Browser(driver, ui.url, "network page without dag access")
        b.login(OUTSIDER, ui.reviewer_password)
        b.open(PAGE)
        b.wait(
            lambda: driver.find_element("id", "status").get_attribute("data-denied") == "403",
            "the page refusing the outsider",
        )
        b.shot("signed in without dag access")
        assert driver.find_element("id", "content").is_displayed() is False
        assert landed.days[-1].isoformat() not in b.body_text()
    finally:
        driver.quit()
