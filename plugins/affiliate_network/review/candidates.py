"""Which pulled conversions a review decides: in the window, old enough; written when on hold."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from affiliate_network.review.apply import ON_HOLD
from affiliate_network.rules.fields import on_hold_conversion_id, on_hold_since, on_hold_status

if TYPE_CHECKING:
    from affiliate_network.review.window import ReviewWindow


def plan_positions(
    records: Sequence[dict[str, Any]],
    window: ReviewWindow,
    *,
    min_age_hours: float,
    horizon_hours: float,
) -> tuple[list[int], list[int], int]:
    """The run's plan (every conversion of the window that has been on hold and is old enough,
    whatever its state now), the part of it still on hold, and how many are on hold.

    A conversion is decided once it has been on hold ``min_age_hours`` and its windowed
    aggregates are complete (``horizon_hours`` after its conversion time), both measured up to
    ``window.as_of_ts``. Look-back traffic before the window is counted in aggregates only.
    The plan does not depend on the on-hold states: a write (this run's, an earlier attempt's
    or a person's) moves a conversion from "still on hold" to "decided", never out of the plan,
    so the guardrails judge the same plan before and after any crash.

    :param records: the pulled traffic (:func:`.traffic.pull_review_traffic`), every on-hold
        state.
    :param window: the review's window.
    :param min_age_hours: how long a conversion must have been on hold (since its first
        on-hold snapshot).
    :param horizon_hours: the rules' widest ``within_hours``.
    :return: ``(plan, eligible, on_hold)``: positions into ``records`` of the plan and of its
        conversions still on hold (the ones to decide and write), and the count of window
        conversions currently on hold (eligible or too young).
    """
    now, lo, hi = window.as_of_ts, window.decide_from_ts, window.decide_to_ts
    min_age_s = min_age_hours * 3600
    horizon_s = horizon_hours * 3600
    plan: list[int] = []
    eligible: list[int] = []
    on_hold = 0
    for i, record in enumerate(records):
        status = on_hold_status(record)
        if status is None or not on_hold_conversion_id(record):
            continue  # never held: no decision to take
        at = record.get("conversion_unix_timestamp")
        if not isinstance(at, int | float) or not lo <= at < hi:
            continue  # look-back traffic: counted in aggregates, decided by its own window
        held = status == ON_HOLD
        on_hold += held
        if now - (on_hold_since(record) or now) < min_age_s or now - at < horizon_s:
            continue
        plan.append(i)
        if held:
            eligible.append(i)
    return plan, eligible, on_hold
