"""The network page's figures per run, its access per DAG and its cost (issue 45), on files
written here the way the writers write them (no network, no browser)."""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from affiliate_network.helpers.run_records import write_run_record
from affiliate_network.partitions.manifest import MANIFEST_NAME, read_manifest
from affiliate_network.partitions.summary import partition_summary
from affiliate_network.partitions.write import PartitionWriter
from affiliate_network.reports.schema import conversion_schema
from affiliate_network.ui.network_data import (
    AirflowRun,
    HumanRequest,
    QuotaSource,
    quota_headroom,
    read_page,
)
from tests.support.fabricated_days import expected_summary, fabricated_table, publish_day

DAY = dt.date(2026, 11, 20)
REVIEW = "affiliate_onhold_review"
OTHER_REVIEW = "affiliate_onhold_review_eu"


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _review_run(
    base: Path,
    dag_id: str,
    run_id: str,
    outcome: str | None,
    rows: list[dict],
    *,
    detail: str | None = None,
    conn_id: str = "net",
    folder: str | None = None,
) -> Path:
    run_dir = base / "onhold_review" / (folder or dag_id) / run_id
    _jsonl(run_dir / "decisions-attempt-1.jsonl", rows)
    if outcome is not None:
        from upath import UPath

        write_run_record(
            UPath(str(run_dir)), dag_id=dag_id, run_id=run_id, task_id="review", attempt=1,
            conn_id=conn_id, outcome=outcome, detail=detail,
        )  # fmt: skip
    return run_dir


def _row(action: str, payout: str, currency: str, *, applied: bool, reason: str = "") -> dict:
    return {"rule_id": "r", "action": action, "payout": payout, "currency_id": currency,
            "on_hold_conversion_id": f"{action}{payout}{currency}", "applied": applied,
            "reason": reason}  # fmt: skip


def test_each_review_run_shows_what_it_was_and_only_writes_count_in_the_days_total(
    tmp_path: Path,
) -> None:
    wrote = [
        _row("approve", "10.50", "USD", applied=True),
        _row("approve", "7", "EUR", applied=True),
        _row("reject", "3", "USD", applied=True),
        _row("review", "99", "USD", applied=False),
    ]
    planned = [_row("approve", "1000", "USD", applied=False, reason="dry run")]
    stopped = [
        _row("reject", "500", "USD", applied=False, reason="guardrail tripped: nothing written")
    ]
    _review_run(tmp_path, REVIEW, "scheduled__2026-11-20T06", "wrote", wrote)
    _review_run(tmp_path, REVIEW, "manual__2026-11-20T07", "dry_run", planned)
    _review_run(tmp_path, REVIEW, "manual__2026-11-20T08", "stopped", stopped,
                detail="rejections 40% of decided > ceiling 20%")  # fmt: skip
    _review_run(tmp_path, REVIEW, "manual__2026-11-20T09", "failed", [],
                detail="ValueError: bad rules file")  # fmt: skip
    runs = [AirflowRun(REVIEW, "manual__2026-11-20T08", "failed", "2026-11-20")]
    review = read_page(tmp_path, last=DAY, today=DAY, runs=runs, waiting=[]).review
    by_run = {r["run_id"]: r for r in review["runs"]}
    assert {k: (v["outcome"], v["detail"]) for k, v in by_run.items()} == {
        "scheduled__2026-11-20T06": ("wrote", None),
        "manual__2026-11-20T07": ("dry_run", None),
        "manual__2026-11-20T08": ("stopped", "rejections 40% of decided > ceiling 20%"),
        "manual__2026-11-20T09": ("failed", "ValueError: bad rules file"),
    }
    assert by_run["manual__2026-11-20T07"]["written"] == {}
    assert by_run["manual__2026-11-20T07"]["decided_money"] == {"approve": {"USD": "1000"}}
    (day,) = review["days"]
    # Per currency, only what was written: the dry run's 1000 and the stop's 500 are not in it.
    assert day["written"] == {
        "approve": {"count": 2, "money": {"EUR": "7", "USD": "10.5"}},
        "reject": {"count": 1, "money": {"USD": "3"}},
    }


def test_an_audit_without_a_record_is_read_from_its_reasons() -> None:
    from affiliate_network.ui.network_data import _outcome

    dry = [_row("reject", "1", "USD", applied=False, reason="dry run; guardrail")]
    assert _outcome(None, dry, None)["outcome"] == "dry_run"
    stop = [_row("reject", "1", "USD", applied=False, reason="guardrail tripped: nothing written")]
    assert _outcome(None, stop, None)["outcome"] == "stopped"
    assert _outcome(None, [], AirflowRun("d", "r", "failed"))["outcome"] == "failed"


def test_waiting_is_what_airflow_holds_not_the_audits_review_rows(tmp_path: Path) -> None:
    rows = [_row("review", str(i), "USD", applied=False) for i in range(126)]
    _review_run(tmp_path, REVIEW, "manual__2026-11-20T07", "dry_run", rows)
    none_held = read_page(tmp_path, last=DAY, today=DAY, waiting=[]).review
    assert none_held["waiting_count"] == 0
    held = [HumanRequest(REVIEW, "scheduled__2026-11-20T06", "ask_reviewer", subject="3 to decide"),
            HumanRequest("some_other_dag", "r", "approve")]  # fmt: skip
    review = read_page(tmp_path, last=DAY, today=DAY, waiting=held).review
    assert review["waiting_count"] == 1
    assert review["waiting"][0]["task_id"] == "ask_reviewer"


def test_each_day_has_a_state_from_the_partition_and_airflows_run(tmp_path: Path) -> None:
    publish_day(tmp_path, DAY - dt.timedelta(days=3), fabricated_table(10), run_id="r3")
    reports = "affiliate_daily_reports"
    runs = [
        AirflowRun(reports, "r2", "failed", (DAY - dt.timedelta(days=2)).isoformat()),
        AirflowRun(reports, "r1", "running", (DAY - dt.timedelta(days=1)).isoformat()),
    ]
    days = read_page(tmp_path, last=DAY, days=5, today=DAY, runs=runs).days
    assert [d["state"] for d in days] == ["missing", "landed", "failed", "running", "not yet due"]
    assert days[1]["run_id"] == "r3"


def test_each_connections_quota_is_read_from_its_own_store_and_a_broken_one_says_why(
    tmp_path: Path,
) -> None:
    from affiliate_network.hooks._budget import FileStore

    one, two = tmp_path / "one", tmp_path / "two"
    for folder, used in ((one, 1), (two, 3)):
        store = FileStore(folder, "scope", clock=time.monotonic)
        for _ in range(used):
            assert store.granular(1, 60, 3600.0)[0]
    rows = quota_headroom([
        QuotaSource("a", "scope", 60, 3600.0, one),
        QuotaSource("b", "scope", 60, 3600.0, two),
        QuotaSource("c", note="cannot be read: KeyError: 'api_key'"),
    ])  # fmt: skip
    assert [(r["network"], r["used"], r["note"]) for r in rows] == [
        ("a", 1, None), ("b", 3, None), ("c", None, "cannot be read: KeyError: 'api_key'"),
    ]  # fmt: skip


def test_the_syncs_last_plan_shows_after_a_dry_run_without_a_ledger(tmp_path: Path) -> None:
    from upath import UPath

    summary = {"dry_run": True, "network": "demo", "counts": {"create": 2}, "blocked": []}
    write_run_record(
        UPath(str(tmp_path / "sync_runs/affiliate_offer_sync/manual__1")),
        dag_id="affiliate_offer_sync", run_id="manual__1", task_id="plan", attempt=1,
        conn_id="net", outcome="dry_run", summary=summary,
    )  # fmt: skip
    sync = read_page(tmp_path, last=DAY, today=DAY).sync
    (run,) = sync["runs"]
    assert (run["outcome"], run["conn_id"], run["plan"]) == (
        "dry_run", "net", {"counts": {"create": 2}, "blocked": []},
    )  # fmt: skip
    assert sync["ledgers"] == []


# --- access --------------------------------------------------------------------------------------


def test_a_reader_of_one_review_dag_sees_only_its_runs_and_not_the_shared_state(
    tmp_path: Path,
) -> None:
    _review_run(tmp_path, REVIEW, "manual__2026-11-20T01", "wrote", [])
    _review_run(tmp_path, OTHER_REVIEW, "manual__2026-11-20T02", "wrote", [])
    # A run folder named like another section's: the record decides, not the name.
    _review_run(tmp_path, OTHER_REVIEW, "sync", "wrote", [], folder=OTHER_REVIEW)
    _jsonl(tmp_path / "onhold_review/_state/net/human_decisions.jsonl", [{"x": 1}])
    mine = read_page(tmp_path, last=DAY, today=DAY, may_read=lambda d: d == REVIEW)
    assert {r["dag_id"] for r in mine.review["runs"]} == {REVIEW}
    assert mine.review["state"] == []
    assert mine.shown == ["review"]
    both = read_page(tmp_path, last=DAY, today=DAY, may_read=lambda d: d in (REVIEW, OTHER_REVIEW))
    assert both.review["state"] == [
        {"conn_id": "net", "file": "onhold_review/_state/net/human_decisions.jsonl"}
    ]


def test_files_are_served_per_dag_from_the_path_relative_to_the_base(tmp_path: Path) -> None:
    from upath import UPath

    from affiliate_network.ui.app import file_dags

    run = _review_run(tmp_path, OTHER_REVIEW, "sync", "wrote", [])  # a review run named "sync"
    _review_run(tmp_path, REVIEW, "manual__1", "wrote", [])
    _jsonl(tmp_path / "onhold_review/_state/net/human_decisions.jsonl", [{"x": 1}])
    part = publish_day(tmp_path, DAY, fabricated_table(3))
    assert file_dags(tmp_path, run / "decisions-attempt-1.jsonl") == [OTHER_REVIEW]
    assert file_dags(tmp_path, tmp_path / "onhold_review/_state/net/human_decisions.jsonl") == [
        REVIEW, OTHER_REVIEW,
    ]  # fmt: skip
    assert file_dags(tmp_path, part / MANIFEST_NAME) == ["affiliate_daily_reports"]
    record = write_run_record(
        UPath(str(tmp_path / "sync_runs/affiliate_offer_sync_eu/manual__1")),
        dag_id="affiliate_offer_sync_eu", run_id="manual__1", task_id="plan", attempt=1,
        conn_id="net", outcome="dry_run",
    )  # fmt: skip
    assert file_dags(tmp_path, Path(record.path)) == ["affiliate_offer_sync_eu"]
    assert file_dags(tmp_path, part / "part-00000.parquet") is None
    assert file_dags(tmp_path, tmp_path / "onhold_review/_leases/net.json") is None
    assert file_dags(tmp_path, tmp_path.parent / "elsewhere.jsonl") is None


def test_a_file_url_base_reads_like_its_folder(tmp_path: Path) -> None:
    publish_day(tmp_path, DAY, fabricated_table(30))
    page = read_page(f"file://{tmp_path}", last=DAY, days=1, today=DAY).to_json()
    assert page["days"][0]["rows"] == 30
    assert page["problems"] == []
    assert page["days"][0]["files"]["manifest"] == f"conversions/date={DAY}/_manifest.json"
    assert str(tmp_path) not in json.dumps(page)  # no server path on the page


# --- cost ----------------------------------------------------------------------------------------


def test_the_writer_puts_the_status_summary_in_the_manifest(tmp_path: Path) -> None:
    records = [
        {"conversion_id": str(i), "status": ("approved", "rejected")[i % 2], "is_event": i % 5 == 0,
         "currency_id": ("USD", "JPY")[i % 3 == 0], "payout": "1.10"}
        for i in range(1, 61)
    ]  # fmt: skip
    with PartitionWriter(tmp_path, "conversions", {"date": "2026-11-20"}, conversion_schema()) as w:
        w.write(records)
        result = w.commit(request={}, run_id="scheduled__x")
    manifest = result.manifest
    assert manifest.manifest_version == 2
    assert manifest.run_id == "scheduled__x"
    approved = manifest.summary["by_status"]["approved"]
    assert approved["rows"] == 30 == approved["conversions"] + approved["events"]
    assert approved["events"] == sum(
        1 for r in records if r["status"] == "approved" and r["is_event"]
    )
    assert manifest.summary == partition_summary(tmp_path / "conversions/date=2026-11-20")


def test_a_version_1_manifest_reads_with_its_summary_computed(tmp_path: Path) -> None:
    table = fabricated_table(1000)
    part = publish_day(tmp_path, DAY, table)
    with_summary = partition_summary(part)
    doc = json.loads((part / MANIFEST_NAME).read_text())
    for key in ("summary", "run_id"):
        doc.pop(key)
    doc["manifest_version"] = 1
    (part / MANIFEST_NAME).write_text(json.dumps(doc))
    assert read_manifest(part).summary is None
    assert partition_summary(part) == with_summary


def test_a_million_row_day_is_shown_from_its_manifest_without_reading_a_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = fabricated_table(1_000_000)
    publish_day(tmp_path, DAY, table)

    def no_rows(*args: object, **kwargs: object) -> None:
        raise AssertionError("the page read row data")

    monkeypatch.setattr(pq, "ParquetFile", no_rows)
    monkeypatch.setattr(pq, "read_table", no_rows)
    started = time.process_time()
    day = read_page(tmp_path, last=DAY, days=30, today=DAY).days[-1]
    assert time.process_time() - started < 1.0
    assert day["rows"] == 1_000_000 == day["totals"]["conversions"] + day["totals"]["events"]
    monkeypatch.undo()
    truth = expected_summary(table.slice(0, 60_000))  # the pattern repeats: checked on a slice
    small = publish_day(tmp_path / "small", DAY, table.slice(0, 60_000))
    shown = read_page(small.parents[1], last=DAY, days=1, today=DAY).days[0]["by_status"]
    for status, cell in truth.items():
        assert shown[status]["conversions"] == cell["conversions"]
        assert shown[status]["events"] == cell["events"]
        assert shown[status]["payout"] == {
            c: format(v.normalize(), "f") for c, v in cell["conversions_money"].items()
        }
        assert shown[status]["events_payout"] == {
            c: format(v.normalize(), "f") for c, v in cell["events_money"].items()
        }


def test_the_file_route_serves_a_readers_own_files_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi.testclient import TestClient

    import affiliate_network.ui.app as app_module

    mine = _review_run(tmp_path, OTHER_REVIEW, "sync", "wrote", [])
    theirs = _review_run(tmp_path, REVIEW, "manual__1", "wrote", [])
    publish_day(tmp_path, DAY, fabricated_table(3))
    monkeypatch.setattr(app_module, "data_base", lambda: f"file://{tmp_path}")
    readable: set[str] = {OTHER_REVIEW}
    monkeypatch.setattr(app_module, "dag_reader", lambda user: lambda dag_id: dag_id in readable)
    app = app_module.create_app()
    app.dependency_overrides[get_user] = lambda: object()
    client = TestClient(app)

    def status(path: Path | str) -> int:
        rel = path.relative_to(tmp_path).as_posix() if isinstance(path, Path) else path
        return client.get("/api/file", params={"path": rel}).status_code

    assert status(mine / "decisions-attempt-1.jsonl") == 200
    assert status(theirs / "decisions-attempt-1.jsonl") == 404
    assert status(f"conversions/date={DAY}/_manifest.json") == 404
    assert status("../etc/passwd") == 404
    readable.clear()  # a user who may read none of the DAGs: refused
    assert status(mine / "decisions-attempt-1.jsonl") == 403
