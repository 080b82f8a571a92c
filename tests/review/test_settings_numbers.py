"""The review's numeric settings: ``nan``, infinities and out-of-range values are refused where
they are read, naming the setting (the environment variable in the DAG file, the argument of
the operator). An unchecked ``nan`` compares false with everything: it switched the
reject-count and payout guardrails and the minimum age off without a word.
"""

from __future__ import annotations

import math
import runpy
from decimal import Decimal
from typing import Any

import pytest

from affiliate_network.exceptions import ConfigValidationError
from affiliate_network.operators.onhold_review import OnHoldReviewOperator
from affiliate_network.review.guardrails import Guardrails
from affiliate_network.review.options import ReviewOptions
from tests.support.dag_files import DAGS_DIR

DAG_FILE = DAGS_DIR / "affiliate_onhold_review.py"
SETTINGS = (
    "AFFILIATE_ONHOLD_LOOKBACK_DAYS",
    "AFFILIATE_ONHOLD_MIN_AGE_HOURS",
    "AFFILIATE_ONHOLD_CHUNK_SIZE",
    "AFFILIATE_ONHOLD_MAX_REJECT_SHARE",
    "AFFILIATE_ONHOLD_MAX_REJECT_COUNT",
    "AFFILIATE_ONHOLD_MAX_APPROVED_PAYOUT",
    "AFFILIATE_ONHOLD_KEEP_DECISION_HOURS",
    "AFFILIATE_ONHOLD_REVIEW_MINUTES",
)
#: Values out of each setting's range, beyond nan, inf and -inf (refused for every setting).
OUT_OF_RANGE = {
    "AFFILIATE_ONHOLD_LOOKBACK_DAYS": ["0", "-1", "7.5", "100000", "seven"],
    "AFFILIATE_ONHOLD_MIN_AGE_HOURS": ["-1", "1e9"],
    "AFFILIATE_ONHOLD_CHUNK_SIZE": ["0", "2001", "2.5"],
    "AFFILIATE_ONHOLD_MAX_REJECT_SHARE": ["-0.1", "1.5", "50%"],
    "AFFILIATE_ONHOLD_MAX_REJECT_COUNT": ["-1", "1.5", "1e400"],
    "AFFILIATE_ONHOLD_MAX_APPROVED_PAYOUT": ["2000", "USD=nan", "USD=-5", "USD=inf"],
    "AFFILIATE_ONHOLD_KEEP_DECISION_HOURS": ["-1", "1e30"],
    "AFFILIATE_ONHOLD_REVIEW_MINUTES": ["0", "-5", "1e12"],
}
CASES = [
    (name, value)
    for name in SETTINGS
    for value in ["nan", "NaN", "inf", "-inf", *OUT_OF_RANGE[name]]
]


def _parse(monkeypatch, **env: str) -> dict[str, Any]:
    """The DAG file's module globals, run with ``env`` (the other settings unset)."""
    for name in SETTINGS:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return runpy.run_path(str(DAG_FILE))


@pytest.mark.parametrize(("name", "value"), CASES, ids=[f"{n[17:]}={v}" for n, v in CASES])
def test_the_dag_file_refuses_a_bad_number_naming_the_variable(monkeypatch, name, value) -> None:
    with pytest.raises(ConfigValidationError) as info:
        _parse(monkeypatch, **{name: value})
    message = str(info.value)
    assert name in message
    assert repr(value) in message


def test_the_import_error_of_the_dag_file_names_the_variable(monkeypatch) -> None:
    from airflow.dag_processing.dagbag import DagBag

    monkeypatch.setenv("AFFILIATE_ONHOLD_MIN_AGE_HOURS", "nan")
    bag = DagBag(dag_folder=str(DAG_FILE))
    [error] = bag.import_errors.values()
    assert (
        "ConfigValidationError: environment variable AFFILIATE_ONHOLD_MIN_AGE_HOURS must be a "
        "finite number of hours from 0 to 87600, got 'nan'"
    ) in error
    assert "affiliate_onhold_review" not in bag.dag_ids


def test_good_values_and_none_are_read(monkeypatch) -> None:
    dag = _parse(
        monkeypatch,
        AFFILIATE_ONHOLD_LOOKBACK_DAYS=" 14 ",
        AFFILIATE_ONHOLD_MIN_AGE_HOURS="none",
        AFFILIATE_ONHOLD_CHUNK_SIZE="2000",
        AFFILIATE_ONHOLD_MAX_REJECT_SHARE="none",
        AFFILIATE_ONHOLD_MAX_REJECT_COUNT="1e3",
        AFFILIATE_ONHOLD_MAX_APPROVED_PAYOUT="usd=2000, EUR=1800.50",
        AFFILIATE_ONHOLD_KEEP_DECISION_HOURS="0.5",
        AFFILIATE_ONHOLD_REVIEW_MINUTES="90",
    )
    assert dag["LOOKBACK_DAYS"] == 14
    assert dag["MIN_AGE_HOURS"] == 0.0
    assert dag["CHUNK_SIZE"] == 2000
    assert dag["MAX_REJECT_SHARE"] is None
    assert dag["MAX_REJECT_COUNT"] == 1000
    assert dag["MAX_APPROVED_PAYOUT"] == {"EUR": Decimal("1800.50"), "USD": Decimal(2000)}
    assert dag["KEEP_DECISION_HOURS"] == 0.5
    assert dag["REVIEW_TIMEOUT"].total_seconds() == 90 * 60
    defaults = _parse(monkeypatch)
    assert defaults["MIN_AGE_HOURS"] == 1.0
    assert defaults["MAX_REJECT_SHARE"] == 0.5
    assert defaults["MAX_REJECT_COUNT"] == 1000
    assert defaults["MAX_APPROVED_PAYOUT"] is None


ARGUMENTS = (
    "lookback_days",
    "min_age_hours",
    "keep_decision_hours",
    "chunk_size",
    "max_reject_share",
    "max_reject_count",
    "lease_wait_minutes",
    "page_size",
    "readback_wait_s",
)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, -1, True, "3"])
@pytest.mark.parametrize("name", ARGUMENTS)
def test_the_operator_refuses_a_bad_number_naming_the_argument(name, value) -> None:
    with pytest.raises(ConfigValidationError, match=f"^{name} must be"):
        OnHoldReviewOperator(task_id="review", **{name: value})


@pytest.mark.parametrize(
    ("options", "name"),
    [
        (lambda: ReviewOptions(min_age_hours=math.nan), "min_age_hours"),
        (lambda: ReviewOptions(keep_decision_hours=1e30), "keep_decision_hours"),
        (lambda: ReviewOptions(chunk_size=2.5), "chunk_size"),  # type: ignore[arg-type]
        (lambda: Guardrails(max_reject_count=math.nan), "max_reject_count"),  # type: ignore[arg-type]
        (lambda: Guardrails(max_reject_share=math.inf), "max_reject_share"),
    ],
)
def test_the_library_refuses_them_too(options, name) -> None:
    """A plain script builds the options without the operator."""
    with pytest.raises(ConfigValidationError, match=f"^{name} must be"):
        options()


def test_whole_numbers_given_as_floats_are_stored_as_integers() -> None:
    options = ReviewOptions(chunk_size=50.0, page_size=500.0)  # type: ignore[arg-type]
    assert (options.chunk_size, options.page_size) == (50, 500)
    assert type(options.chunk_size) is int
    assert type(options.page_size) is int
    assert Guardrails(max_reject_count=10.0).max_reject_count == 10  # type: ignore[arg-type]
