"""The on-hold review's numeric settings, checked where they are read.

A number a person sets (an operator or library argument) is finite and inside its range, or
refused with a :class:`ConfigValidationError` naming the
setting. ``nan`` compares false with everything, so an unchecked ``nan`` ceiling or minimum
age silently switched its check off; ``inf`` overflowed later, far from the setting.

Light on purpose (no Airflow, no storage): the review operator calls it at parse time.
"""

from __future__ import annotations

import math
from typing import Final

from affiliate_network.exceptions import ConfigValidationError

__all__ = ["MAX_HOURS", "check_number"]

#: Longest span, in hours, of the review's hour settings (ten years: more is a typo, and the
#: times computed from it must stay within what ``datetime`` holds).
MAX_HOURS: Final = 87_600.0


def check_number(
    value: object,
    name: str,
    *,
    low: float,
    high: float | None = None,
    whole: bool = False,
    unit: str = "",
) -> float:
    """``value`` when it is a finite number in ``low..high`` (a whole one if ``whole``).

    :param value: the setting's value (``bool`` and text are refused: not numbers).
    :param name: the setting, as the error names it (an argument or an environment variable).
    :param low: smallest value allowed.
    :param high: largest value allowed (``None``: no upper bound but finiteness).
    :param whole: only whole numbers (``7`` and ``7.0``; not ``7.5``).
    :param unit: what the number counts, for the error (``hours``).
    :raises ConfigValidationError: naming ``name``, the range and the value.
    """
    number = _as_float(value)
    if number is None or not _in_range(number, low, high, whole):
        raise _refusal(name, value, low=low, high=high, whole=whole, unit=unit)
    return number


def _as_float(value: object) -> float | None:
    """A number as a float (an int too large for one is infinite); ``None``: not a number."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    try:
        return float(value)
    except OverflowError:
        return math.inf


def _in_range(number: float, low: float, high: float | None, whole: bool) -> bool:
    return (
        math.isfinite(number)
        and number >= low
        and (high is None or number <= high)
        and (not whole or number == int(number))
    )


def _refusal(
    name: str, value: object, *, low: float, high: float | None, whole: bool, unit: str
) -> ConfigValidationError:
    kind = "a whole number" if whole else "a finite number"
    span = f"from {low:g} to {high:g}" if high is not None else f">= {low:g}"
    return ConfigValidationError(
        f"{name} must be {kind}{f' of {unit}' if unit else ''} {span}, got {_shown(value)}"
    )


def _shown(value: object) -> str:
    """The value as the error quotes it, cut short (a 400-digit integer is not read)."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."
