"""What the trigger form can send: every value is accepted or refused with the param's name.

The DAG params reach the operators as native objects or as rendered strings; the operators'
argument checks are the only thing between a form field and a write to the network.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from affiliate_network.exceptions import ConfigValidationError
from affiliate_network.operators.base import as_bool
from affiliate_network.operators.offer_state_sync import OfferStateSyncOperator

form_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(),
        st.text(max_size=30),
        st.sampled_from(["true", "False", " yes ", "0", "", "{}", '{"k": 3}', "[", "²", "a,b"]),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


def _accepted_or_named(call, name: str) -> None:
    message = name
    try:
        call()
    except ConfigValidationError as err:
        message = str(err)
    assert name in message


@given(value=form_values)
def test_dry_run_flags(value) -> None:
    _accepted_or_named(lambda: as_bool(value, "dry_run"), "dry_run")


@given(value=form_values)
def test_force_and_accept_drift_keys(value) -> None:
    _accepted_or_named(lambda: OfferStateSyncOperator._keys(value, "force"), "force")


@given(value=form_values)
def test_resolve_unknown(value) -> None:
    _accepted_or_named(lambda: OfferStateSyncOperator._resolutions(value), "resolve_unknown")


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: OfferStateSyncOperator._keys(5, "force"), "force"),
        (lambda: OfferStateSyncOperator._keys({"a": 1}, "accept_drift"), "accept_drift"),
        (lambda: OfferStateSyncOperator._resolutions({"k": "²"}), "resolve_unknown"),
        (lambda: OfferStateSyncOperator._resolutions("[" * 100_000), "resolve_unknown"),
        (lambda: as_bool(1, "dry_run"), "dry_run"),
    ],
)
def test_found_by_reading_and_fuzzing(call, name) -> None:
    # Each raised a TypeError, a ValueError or a RecursionError before (or, for as_bool(1),
    # was read as True by one operator and refused by the other).
    with pytest.raises(ConfigValidationError, match=name):
        call()


# -- the daily DAG: what a backfill dialog can send ------------------------------------------


@given(
    conf=st.one_of(
        st.none(), st.dictionaries(st.sampled_from(["on_mismatch", "x", ""]), form_values)
    ),
    run_type=st.sampled_from(["backfill", "scheduled", "manual", "asset_triggered"]),
)
def test_a_backfill_run_re_pulls_trailing_days_only_when_asked(conf, run_type) -> None:
    """Whatever conf a backfill run got (none, when the dialog's override box is unticked),
    it re-pulls no trailing day unless the conf names ``trailing_days``; other runs keep
    the rendered value (the param's default, 7)."""
    import pendulum
    from airflow.sdk.api.datamodels._generated import DagRun

    from affiliate_network.operators.conversion_report import ConversionReportOperator

    start = pendulum.datetime(2026, 11, 19, tz="UTC")
    dag_run = DagRun(
        dag_id="affiliate_daily_reports", run_id="r", logical_date=start,
        data_interval_start=start, data_interval_end=start.add(days=1), run_after=start,
        start_date=start, end_date=None, partition_key=None, clear_number=0,
        run_type=run_type, state="running", conf=conf, consumed_asset_events=[],
    )  # fmt: skip
    op = ConversionReportOperator(
        task_id="repull_trailing_window", lookback_days="7",
        backfill_lookback_param="trailing_days", timezone_id=67, network_timezone="UTC",
        outlets=[],
    )  # fmt: skip
    context = {
        "dag_run": dag_run,
        "data_interval_start": start,
        "data_interval_end": start.add(days=1),
    }
    days = op.days(context)  # type: ignore[arg-type]
    assert len(days) == (0 if run_type == "backfill" else 7)
    asked = {**(conf or {}), "trailing_days": 3}
    dag_run.conf = asked
    assert len(op.days(context)) == 7  # type: ignore[arg-type]
