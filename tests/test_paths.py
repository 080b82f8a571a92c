"""The one data-base resolver: a failed Variable lookup in a task never means "use the default"."""

from __future__ import annotations

import pytest
from airflow.sdk.exceptions import AirflowFailException, ErrorType
from airflow.sdk.execution_time.comms import ErrorResponse, GetVariable, VariableResult

from affiliate_network.exceptions import DataBaseUnavailableError
from affiliate_network.settings.paths import (
    DATA_BASE_VARIABLE,
    _variable_in_task,
    resolve_data_base,
)


class Channel:
    """Stands in for the task's supervisor channel (Airflow's side, not ours): records the
    request and answers what the API server would."""

    def __init__(self, answer: object) -> None:
        self.answer = answer
        self.asked: list[object] = []

    def send(self, message: object) -> object:
        self.asked.append(message)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def test_explicit_base_wins(monkeypatch) -> None:
    monkeypatch.setenv("AFFILIATE_NETWORK_DATA_BASE", "/env/base")
    assert resolve_data_base("s3://bucket/x") == "s3://bucket/x"


def test_outside_a_task_the_fallback_order_applies(monkeypatch, tmp_path) -> None:
    monkeypatch.delenv(f"AIRFLOW_VAR_{DATA_BASE_VARIABLE.upper()}", raising=False)
    monkeypatch.setenv("AFFILIATE_NETWORK_DATA_BASE", str(tmp_path))
    assert resolve_data_base(outside_task=True) == str(tmp_path)
    # No task is running here: the in-task check has no channel and changes nothing.
    assert resolve_data_base() == str(tmp_path)


def test_the_variable_wins_over_the_environment(monkeypatch) -> None:
    monkeypatch.setenv(f"AIRFLOW_VAR_{DATA_BASE_VARIABLE.upper()}", "s3://from-variable/data")
    monkeypatch.setenv("AFFILIATE_NETWORK_DATA_BASE", "/env/base")
    assert resolve_data_base() == "s3://from-variable/data"


def test_not_found_falls_back() -> None:
    channel = Channel(ErrorResponse(error=ErrorType.VARIABLE_NOT_FOUND))
    assert _variable_in_task(DATA_BASE_VARIABLE, channel.send) is None
    assert channel.asked == [GetVariable(key=DATA_BASE_VARIABLE)]


def test_a_value_is_used() -> None:
    channel = Channel(VariableResult(key=DATA_BASE_VARIABLE, value="s3://b/d"))
    assert _variable_in_task(DATA_BASE_VARIABLE, channel.send) == "s3://b/d"


@pytest.mark.parametrize(
    "answer",
    [
        ErrorResponse(error=ErrorType.API_SERVER_ERROR, detail={"status_code": 503}),
        ErrorResponse(error=ErrorType.GENERIC_ERROR),
        ConnectionResetError("api server restarting"),
    ],
)
def test_a_failed_lookup_fails_the_task_instead_of_moving_the_outputs(answer) -> None:
    with pytest.raises(DataBaseUnavailableError, match="could not read the Airflow Variable"):
        _variable_in_task(DATA_BASE_VARIABLE, Channel(answer).send)


def test_an_unavailable_data_base_is_retryable() -> None:
    assert not issubclass(DataBaseUnavailableError, AirflowFailException)
