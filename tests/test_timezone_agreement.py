"""The report DAG's timezone and network.yaml's agree, checked where each is read (issue 47 item 4).

With a New York network and the DAG left on UTC, a run's window ends inside a network day that
has not finished. The DAG file refuses to load (an import error naming both values, the file and
the field), and a report task whose DAG's timetable disagrees fails before any request.
"""

from __future__ import annotations

from pathlib import Path

import pendulum
import pytest
from airflow.sdk import DAG
from airflow.sdk.execution_time.context import OutletEventAccessors

from affiliate_network.compat import CronDataIntervalTimetable, timetable_timezone
from affiliate_network.exceptions import ConfigValidationError
from affiliate_network.operators.conversion_report import ConversionReportOperator
from affiliate_network.settings.agreement import check_network_timezone
from affiliate_network.settings.paths import INCLUDE_DIR_ENV, include_dir
from tests.support.dag_files import DAGS_DIR
from tests.support.sandbox_reads import network_requests

DAG_FILE = DAGS_DIR / "affiliate_daily_reports.py"
NEW_YORK = "# the network of a New York account\ntimezone: America/New_York\ncurrency_id: USD\n"


@pytest.fixture
def include(tmp_path, monkeypatch) -> Path:
    """A copy of include/ as the include folder, its network.yaml for the test to rewrite."""
    folder = tmp_path / "include"
    folder.mkdir()
    for src in include_dir().glob("*.yaml"):
        (folder / src.name).write_bytes(src.read_bytes())
    monkeypatch.setenv(INCLUDE_DIR_ENV, str(folder))
    return folder


def test_the_shipped_dag_and_network_yaml_agree() -> None:
    check_network_timezone("UTC", setting="NETWORK_TIMEZONE", where=str(DAG_FILE))


def test_another_name_of_the_same_zone_agrees(include) -> None:
    (include / "network.yaml").write_text("timezone: Etc/UTC\n")
    check_network_timezone("UTC", setting="NETWORK_TIMEZONE", where=str(DAG_FILE))


def test_a_timezone_id_alone_is_compared_by_its_zone(include) -> None:
    (include / "network.yaml").write_text("currency_id: USD\ntimezone_id: 80\n")
    with pytest.raises(
        ConfigValidationError, match="line 2, field timezone_id, is 'America/New_York'"
    ):
        check_network_timezone("UTC", setting="NETWORK_TIMEZONE", where="x.py")
    check_network_timezone("America/New_York", setting="NETWORK_TIMEZONE", where="x.py")


def test_dag_file_with_another_timezone_than_network_yaml_fails_to_import(include) -> None:
    from airflow.dag_processing.dagbag import DagBag

    (include / "network.yaml").write_text(NEW_YORK)
    bag = DagBag(dag_folder=str(DAG_FILE))
    assert bag.dags == {}
    [(path, error)] = bag.import_errors.items()
    assert Path(path) == DAG_FILE
    assert "ConfigValidationError" in error
    # Both values, the DAG file's setting, network.yaml with its line and field.
    assert "NETWORK_TIMEZONE is 'UTC'" in error
    assert f"{include / 'network.yaml'} line 2, field timezone, is 'America/New_York'" in error
    assert "set NETWORK_TIMEZONE to 'America/New_York'" in error
    assert str(DAG_FILE) in error


def test_the_verdict_follows_an_edit_of_network_yaml(include) -> None:
    network = include / "network.yaml"
    network.write_text(NEW_YORK)
    with pytest.raises(ConfigValidationError):
        check_network_timezone("UTC", setting="NETWORK_TIMEZONE", where="x.py")
    network.write_text("timezone: UTC   # fixed\n")
    check_network_timezone("UTC", setting="NETWORK_TIMEZONE", where="x.py")


def test_an_unreadable_network_yaml_is_left_to_the_loader(include) -> None:
    (include / "network.yaml").write_text("timezone: [unclosed\n")
    check_network_timezone("UTC", setting="NETWORK_TIMEZONE", where="x.py")
    (include / "network.yaml").unlink()
    check_network_timezone("UTC", setting="NETWORK_TIMEZONE", where="x.py")


def test_timetable_timezone_reads_the_sdk_and_the_core_timetables() -> None:
    from airflow.timetables.interval import CronDataIntervalTimetable as CoreTimetable

    assert timetable_timezone(CronDataIntervalTimetable("0 0 * * *", timezone="Asia/Tokyo")) == (
        "Asia/Tokyo"
    )
    assert timetable_timezone(CoreTimetable("0 0 * * *", timezone="Asia/Tokyo")) == "Asia/Tokyo"
    assert timetable_timezone(None) is None


def _report_task(tmp_path: Path, conn_id: str, **kwargs) -> ConversionReportOperator:
    """A report task in a DAG of one's own, its days cut at midnight UTC."""
    with DAG(
        "my_reports",
        schedule=CronDataIntervalTimetable("0 0 * * *", timezone="UTC"),
        start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    ):
        return ConversionReportOperator(
            task_id="pull",
            affiliate_network_conn_id=conn_id,
            base_path=str(tmp_path / "data"),
            **kwargs,
        )


def _context(day: str) -> dict:
    start = pendulum.parse(day, tz="UTC")
    return {
        "data_interval_start": start,
        "data_interval_end": start.add(days=1),
        "outlet_events": OutletEventAccessors(),
    }


def test_a_run_whose_dag_disagrees_with_network_yaml_fails_before_any_request(
    sandbox, network_conn, include, tmp_path
) -> None:
    (include / "network.yaml").write_text(NEW_YORK)
    day = sandbox.catalog()["first_date"]
    before = len(network_requests(sandbox))
    op = _report_task(tmp_path, network_conn)
    with pytest.raises(ConfigValidationError) as err:
        op.execute(_context(day))
    assert "the timezone of DAG my_reports's timetable is 'UTC'" in str(err.value)
    assert "field timezone, is 'America/New_York'" in str(err.value)
    assert len(network_requests(sandbox)) == before
    assert not (tmp_path / "data").exists()


def test_explicit_operator_timezone_must_agree_with_the_timetable_too(
    sandbox, network_conn, tmp_path
) -> None:
    before = len(network_requests(sandbox))
    op = _report_task(tmp_path, network_conn, network_timezone="America/Chicago")
    with pytest.raises(ConfigValidationError, match="arguments say 'America/Chicago'"):
        op.execute(_context(sandbox.catalog()["first_date"]))
    assert len(network_requests(sandbox)) == before


def test_a_network_yaml_too_big_to_read_at_parse_is_left_to_the_loader(include) -> None:
    from affiliate_network.settings.agreement import MAX_READ_BYTES

    text = NEW_YORK + "#" * MAX_READ_BYTES + "\n"
    (include / "network.yaml").write_text(text)
    check_network_timezone("UTC", setting="NETWORK_TIMEZONE", where="x.py")
