"""Which pulled conversions a review decides: on hold now, in the window, old enough."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from affiliate_network.review.apply import ON_HOLD
from affiliate_network.review.fields import on_hold_conversion_id, on_hold_since, on_hold_status

if TYPE_CHECKING:
    from affiliate_network.review.window import ReviewWindow


def eligible_positions(
    records: Sequence[dict[str, Any]],
    window: ReviewWindow,
    *,
    min_age_hours: float,
    horizon_hours: float,
) -> tuple[list[int], int]:
    """Positions to decide (on hold, in the window, old enough) and how many are on hold.

    A conversion is decided once it has been on hold ``min_age_hours`` and its windowed
    aggregates are complete (``horizon_hours`` after its conversion time), both measured up to
    ``window.as_of_ts``. Look-back traffic before the window is counted in aggregates only.

    :param records: the pulled traffic (:func:`.traffic.pull_review_traffic`).
    :param window: the review's window.
    :param min_age_hours: how long a conversion must have been on hold.
    :param horizon_hours: the rules' widest ``within_hours``.
    :return: ``(positions, on_hold)``: positions into ``records``, and the count of window
        conversions currently on hold (eligible or too young).
    """
    now = window.as_of_ts
    min_age_s = min_age_hours * 3600
    horizon_s = horizon_hours * 3600
    eligible: list[int] = []
    on_hold = 0
    for i, record in enumerate(records):
        if on_hold_status(record) != ON_HOLD or not on_hold_conversion_id(record):
            continue
        at = record.get("conversion_unix_timestamp")
        if not isinstance(at, int | float) or not window.decide_from_ts <= at < window.decide_to_ts:
            continue  # look-back traffic: counted in aggregates, decided by its own window
        on_hold += 1
        if now - (on_hold_since(record) or now) < min_age_s or now - at < horizon_s:
            continue
        eligible.append(i)
    return eligible, on_hold
