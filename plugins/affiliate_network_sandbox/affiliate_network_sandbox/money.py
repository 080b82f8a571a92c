"""Currencies of the sandbox: minor units, fixed conversion rates, exact conversion of sums.

Sandbox choices (the public documentation says the aggregated report converts to the request's
``currency_id`` but publishes no rates and no rounding): rates are fixed, expressed as units of
the currency per 1 USD (:data:`choices.CURRENCY_RATES`), and applied with :func:`convert_sums`.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

from affiliate_network_sandbox import choices


def minor_digits(currency: str) -> int:
    """Digits after the decimal point of ``currency``'s minor unit (JPY 0, KWD 3, else 2)."""
    return choices.CURRENCY_MINOR_DIGITS[currency]


def quantum(currency: str) -> Decimal:
    """The smallest amount of ``currency``: ``Decimal("1")``, ``"0.01"`` or ``"0.001"``."""
    return Decimal(1).scaleb(-minor_digits(currency))


def json_amount(value: Decimal, currency: str) -> float | int:
    """An amount (already at ``currency``'s minor unit) as the JSON number the sandbox prints.

    Zero-digit currencies print as integers (JPY ``1500``, never ``1500.0``); the others as the
    shortest float text, which is the exact decimal for every amount the sandbox makes (at most
    15 significant digits).
    """
    if minor_digits(currency) == 0:
        return int(value)
    return float(value)


def to_minor(value: Decimal, currency: str) -> Decimal:
    """``value`` rounded half-up to ``currency``'s minor unit."""
    return value.quantize(quantum(currency), rounding=ROUND_HALF_UP)


def from_usd(usd: float, currency: str) -> float | int:
    """A generated USD amount expressed in ``currency`` at its minor unit (catalog amounts).

    USD amounts pass through unchanged, so the one-currency default world stays bit-for-bit
    what it was.
    """
    if currency == "USD":
        return usd
    value = Decimal(repr(usd)) * choices.CURRENCY_RATES[currency]
    return json_amount(to_minor(value, currency), currency)


def convert_sums(sums: dict[str, Decimal], target: str) -> Decimal:
    """Per-currency exact sums converted to ``target`` and added, rounded once.

    A sum already in ``target`` is taken as it is (no conversion, exact). Each other sum is
    ``sum * rate[target] / rate[source]`` in Python's default decimal context (28 significant
    digits, half-even); the total is rounded half-up to ``target``'s minor unit.
    """
    rates = choices.CURRENCY_RATES
    total = Decimal(0)
    for currency, value in sums.items():
        if currency == target:
            total += value
        else:
            total += value * rates[target] / rates[currency]
    return to_minor(total, target)
