"""What the trigger form can send: every value is accepted or refused with the param's name.

The DAG params reach the operators as native objects or as rendered strings; the operators'
argument checks are the only thing between a form field and a write to the network.
"""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from affiliate_network.exceptions import ConfigValidationError
from affiliate_network.operators.base import as_bool
from affiliate_network.sync.plan import run_keys, run_resolutions

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


def _accepted_or_named(call, name: str, kept) -> None:
    """``call()`` returns a value of the expected shape (``kept(value)``) or refuses it with a
    ConfigValidationError naming ``name``; any other exception fails the test."""
    try:
        value = call()
    except ConfigValidationError as err:
        refused = str(err)
    else:
        assert kept(value), value
        return
    assert name in refused


@given(value=form_values)
def test_dry_run_flags(value) -> None:
    _accepted_or_named(lambda: as_bool(value, "dry_run"), "dry_run", lambda v: type(v) is bool)


@given(value=form_values)
def test_force_and_accept_drift_keys(value) -> None:
    _accepted_or_named(
        lambda: run_keys(value, "force"),
        "force",
        lambda v: isinstance(v, list) and all(type(k) is str and k for k in v),
    )


@given(value=form_values)
def test_resolve_unknown(value) -> None:
    _accepted_or_named(
        lambda: run_resolutions(value),
        "resolve_unknown",
        lambda v: isinstance(v, dict) and all(type(k) is str for k in v),
    )


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: run_keys(5, "force"), "force"),
        (lambda: run_keys({"a": 1}, "accept_drift"), "accept_drift"),
        (lambda: run_resolutions({"k": "²"}), "resolve_unknown"),
        (lambda: run_resolutions("[" * 100_000), "resolve_unknown"),
        (lambda: as_bool(1, "dry_run"), "dry_run"),
    ],
)
def test_found_by_reading_and_fuzzing(call, name) -> None:
    # Each raised a TypeError, a ValueError or a RecursionError before (or, for as_bool(1),
    # was read as True by one operator and refused by the other).
    with pytest.raises(ConfigValidationError, match=name):
        call()


# The on-hold review: its numeric arguments (a DAG author's values, the environment's once read)
# and the human review form's keep_on_hold field.

REVIEW_NUMBERS = {
    # argument: (smallest, largest) accepted
    "min_age_hours": (0, 87_600),
    "keep_decision_hours": (0, 87_600),
    "chunk_size": (1, 2000),
    "lease_wait_minutes": (0, 1440),
    "readback_wait_s": (0, 600),
    "page_size": (1, math.inf),
}


@given(name=st.sampled_from(sorted(REVIEW_NUMBERS)), value=form_values)
def test_review_numbers_are_finite_and_in_range_or_refused_by_name(name, value) -> None:
    from affiliate_network.review.options import ReviewOptions

    try:
        options = ReviewOptions(**{name: value})
    except ConfigValidationError as err:
        refused = str(err)
    else:
        refused = ""
    if refused:
        assert refused.startswith(f"{name} must be")
        return
    low, high = REVIEW_NUMBERS[name]
    kept = getattr(options, name)
    if name == "page_size" and kept is None:
        return  # the connection's
    assert isinstance(kept, int | float)
    assert not isinstance(kept, bool)
    assert math.isfinite(kept)
    assert low <= kept <= high


@given(
    share=st.one_of(st.none(), form_values),
    count=st.one_of(st.none(), form_values),
    payout=st.one_of(
        st.none(),
        form_values,
        st.dictionaries(st.sampled_from(["USD", "eur", "KWD", "X"]), form_values, max_size=3),
        st.text(alphabet="USDEURkwd=,; 0123456789.-naif", max_size=25),
    ),
)
def test_review_ceilings_are_finite_and_in_range_or_refused_by_name(share, count, payout) -> None:
    from decimal import Decimal

    from affiliate_network.review.guardrails import Guardrails

    try:
        rails = Guardrails(
            max_reject_share=share, max_reject_count=count, max_approved_payout=payout
        )
    except ConfigValidationError as err:
        refused = str(err)
    else:
        refused = ""
    if refused:
        named = refused.split(" ", 1)[0].rstrip(":")
        assert named in ("max_reject_share", "max_reject_count", "max_approved_payout")
        return
    assert rails.max_reject_share is None or 0 <= rails.max_reject_share <= 1
    assert rails.max_reject_count is None or (
        type(rails.max_reject_count) is int and rails.max_reject_count >= 0
    )
    for code, ceiling in (rails.max_approved_payout or {}).items():
        assert len(code) == 3
        assert code.isupper()
        assert type(ceiling) is Decimal
        assert ceiling.is_finite()
        assert ceiling >= 0


_REVIEW_ROWS = [
    {"rule_id": "r", "conversion_id": f"c{n}ab", "on_hold_conversion_id": f"OH{n}x"}
    for n in range(5)
]


@st.composite
def _keep_text(draw) -> tuple[str, set[str]]:
    """A keep_on_hold text mixing real ids (any case, conversion or on-hold id) with other
    tokens (typos), and the on-hold ids a person meant to keep."""
    meant: set[str] = set()
    tokens = []
    for _ in range(draw(st.integers(0, 4))):
        if draw(st.booleans()):
            row = draw(st.sampled_from(_REVIEW_ROWS))
            meant.add(row["on_hold_conversion_id"])
            name = row[draw(st.sampled_from(["conversion_id", "on_hold_conversion_id"]))]
            tokens.append(draw(st.sampled_from([name, name.upper(), name.lower(), f"`{name}`"])))
        else:
            tokens.append(draw(st.text(alphabet="abcxOH0123456789-", min_size=1, max_size=6)))
    separator = draw(st.sampled_from([",", ", ", " ", ";", "\n"]))
    return separator.join(tokens), meant


@given(keep=_keep_text(), choice=st.sampled_from(["Approve all", "Reject all"]))
def test_no_id_a_person_listed_is_ever_written(keep, choice) -> None:
    from affiliate_network.review.human_apply import plan_choices

    text, meant = keep
    request = {"subject": "r: 5 conversions to review"}
    response = {"chosen_options": [choice], "params_input": {"keep_on_hold": text}}
    choices = plan_choices([request], [response], _REVIEW_ROWS, "rejected")
    written = {i for ids in choices.plan.values() for i in ids}
    assert not written & meant
    named = {r["conversion_id"].casefold() for r in _REVIEW_ROWS} | {
        r["on_hold_conversion_id"].casefold() for r in _REVIEW_ROWS
    }
    typos = [t for t in re.split(r"[\s,;`]+", text) if t and t.casefold() not in named]
    if typos:  # an id matching nothing: nothing of the request is written
        assert written == set()
        assert choices.stopped == {"r": list(dict.fromkeys(typos))}
    else:
        assert written == {r["on_hold_conversion_id"] for r in _REVIEW_ROWS} - meant


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
