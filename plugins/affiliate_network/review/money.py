"""Money of the on-hold review: exact amounts, totals per currency, ceilings per currency.

Raw conversion records carry amounts in their offer's currency (``currency_id``), so a review
over several offers holds several currencies at once: every total here is kept per currency
and never added across currencies (900 USD + 900 KWD is not 1,800 of anything). Amounts are
:class:`~decimal.Decimal`.

A record's amount is read from what the API sent: the hook parses the JSON into Python
objects, and a JSON number becomes a ``float`` whose shortest text (``repr``) is the number as
it was printed for the up to 15 significant digits a float keeps (``12.50`` reads as
``Decimal("12.5")``, never ``12.4999999999999982236431605997495353221893310546875``). Text
(the audit file writes amounts as text) and ``Decimal`` are taken as they are.

Light on purpose (no Airflow, no storage): the review operator checks its ceilings with it at
DAG parse time.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation
from itertools import chain, zip_longest
from typing import Any, TypeVar

from affiliate_network.exceptions import ConfigValidationError, SchemaMismatchError

__all__ = [
    "CEILINGS_EXAMPLE",
    "NO_CURRENCY",
    "amount_of",
    "currency_of",
    "highest_first",
    "money_text",
    "paid_out_by_currency",
    "payout_ceilings",
    "totals_by_currency",
    "totals_text",
]

T = TypeVar("T", bound=Mapping[str, Any])

#: The currency a total is kept under for records without a ``currency_id``.
NO_CURRENCY = "(no currency)"
#: The per-currency form of ``max_approved_payout`` (and its environment variable).
CEILINGS_EXAMPLE = "USD=2000,EUR=1800"
#: Four decimals: the finest minor unit of ISO 4217 (what :func:`money_text` shows at most).
_FINEST_MINOR_UNIT = Decimal("0.0001")
#: Amounts this large are shown as they are (quantizing them would exceed the context's digits).
_QUANTIZE_LIMIT = Decimal(10) ** 20
#: A currency code of a ceiling: ISO 4217's three letters.
_CODE = re.compile(r"[A-Z]{3}")


def amount_of(value: object, *, what: str) -> Decimal | None:
    """One amount of a record or an audit row, exactly; ``None`` when there is none.

    :param value: a JSON number as parsed (``int``, ``float``), decimal text, a ``Decimal``,
        or ``None``/``""`` (no amount).
    :param what: names the amount in an error (``conversion 1a2b: payout``).
    :raises SchemaMismatchError: not a finite number (the API's record is not what the spec
        says: a guardrail must not count it as 0).
    """
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise SchemaMismatchError(f"{what}: {value!r} is not an amount")
    try:
        if isinstance(value, float):
            exact = Decimal(repr(value))
        elif isinstance(value, int | Decimal):
            exact = Decimal(value)
        elif isinstance(value, str):
            exact = Decimal(value.strip())
        else:
            raise SchemaMismatchError(f"{what}: {value!r} is not an amount")
    except InvalidOperation:
        raise SchemaMismatchError(f"{what}: {value!r} is not an amount") from None
    if not exact.is_finite():
        raise SchemaMismatchError(f"{what}: {value!r} is not a finite amount")
    return exact


def currency_of(row: Mapping[str, Any]) -> str:
    """The currency code a record's (or audit row's) amounts are in; :data:`NO_CURRENCY`."""
    code = str(row.get("currency_id") or "").strip().upper()
    return code or NO_CURRENCY


def totals_by_currency(rows: Iterable[Mapping[str, Any]], field: str) -> dict[str, Decimal]:
    """Currency -> the sum of ``field`` over ``rows`` of that currency (sorted by code).

    A row without the amount adds nothing (and its currency still appears, with 0 when it has
    no other row): a total of 0 says "these conversions carry no payout", not "no conversions".

    :param rows: records or audit rows (``currency_id`` and the amount).
    :param field: the amount (``payout``, ``sale_amount``).
    :raises SchemaMismatchError: an amount that is not a finite number.
    """
    totals: dict[str, Decimal] = {}
    for row in rows:
        amount = amount_of(row.get(field), what=f"conversion {row.get('conversion_id')}: {field}")
        currency = currency_of(row)
        totals[currency] = totals.get(currency, Decimal(0)) + (amount or 0)
    return dict(sorted(totals.items()))


def paid_out_by_currency(rows: Iterable[Mapping[str, Any]], field: str) -> dict[str, Decimal]:
    """Currency -> the sum of the amounts of ``rows`` that are not negative (sorted by code):
    what approving them pays out.

    A negative amount (a reversal, an adjustment, a charge-back) is left out, its currency too
    when it has no other row: it never nets against the others, so a ceiling held against this
    total holds whatever negative rows a plan carries (one row of -29,500 USD must not let
    30,000 USD through a ceiling of 1,000 USD). Rows without the amount count as in
    :func:`totals_by_currency` (0, their currency listed).

    :param rows: records or audit rows (``currency_id`` and the amount).
    :param field: the amount (``payout``).
    :raises SchemaMismatchError: an amount that is not a finite number.
    """
    return totals_by_currency(
        (
            row
            for row in rows
            if (
                amount_of(row.get(field), what=f"conversion {row.get('conversion_id')}: {field}")
                or 0
            )
            >= 0
        ),
        field,
    )


def highest_first(rows: Iterable[T], field: str = "payout") -> list[T]:
    """``rows`` by amount, highest first within each currency, the currencies taking turns
    (in code order): amounts of different currencies are not compared with each other.

    :param rows: records or audit rows (``currency_id`` and the amount; none counts as 0).
    :param field: the amount.
    :raises SchemaMismatchError: an amount that is not a finite number.
    """
    by_currency: dict[str, list[tuple[Decimal, int, T]]] = {}
    for position, row in enumerate(rows):
        what = f"conversion {row.get('conversion_id')}: {field}"
        amount = amount_of(row.get(field), what=what) or Decimal(0)
        by_currency.setdefault(currency_of(row), []).append((-amount, position, row))
    ranked = [sorted(items) for _, items in sorted(by_currency.items())]
    return [item[2] for item in chain.from_iterable(zip_longest(*ranked)) if item is not None]


def money_text(amount: Decimal, currency: str | None = None) -> str:
    """An amount for people: thousands separated, at least two decimals, and every decimal it
    has up to four (``1,234.50 USD``, ``900.125 KWD``): four is the finest minor unit of ISO
    4217, so only noise below every currency's minor unit is cut (an amount once computed in
    binary floating point, ``12384.810000000001``, shows as ``12,384.81``). Display only: the
    checks compare the exact amounts.

    :param amount: the amount.
    :param currency: its code, appended when given (:data:`NO_CURRENCY` too: it says so).
    """
    shown = amount.quantize(_FINEST_MINOR_UNIT) if abs(amount) < _QUANTIZE_LIMIT else amount
    exponent = shown.normalize().as_tuple().exponent
    places = max(2, -exponent if isinstance(exponent, int) else 0)
    text = f"{shown:,.{places}f}"
    return f"{text} {currency}" if currency else text


def totals_text(totals: Mapping[str, Decimal]) -> str:
    """Per-currency totals for people: ``1,234.50 USD + 900.125 KWD`` (``0.00`` when empty)."""
    return " + ".join(money_text(a, c) for c, a in totals.items()) or money_text(Decimal(0))


def payout_ceilings(value: object, setting: str) -> dict[str, Decimal] | None:
    """Ceilings per currency of ``max_approved_payout``, checked; ``None`` when there are none.

    The text form (an environment variable, a templated argument) is ``CODE=AMOUNT`` items
    separated by commas or spaces: ``USD=2000,EUR=1800`` (codes of three letters, any case;
    amounts finite, 0 or more). ``""`` and ``none`` mean no ceiling. A mapping
    (``{"USD": 2000}``) is taken as well. A plain number is refused: the ceiling it gave used
    to be compared with the sum of every currency's payout.

    :param value: the text, a mapping, or ``None``.
    :param setting: names the setting in an error (``max_approved_payout``, or the
        environment variable).
    :raises ConfigValidationError: naming ``setting``, what is wrong and the expected form.
    """
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        if text == "" or text.lower() == "none":
            return None
        items: list[tuple[str, object]] = []
        for item in re.split(r"[\s,;]+", text):
            if not item:
                continue
            code, sep, amount = item.partition("=")
            if not sep:
                raise _ceiling_error(setting, value, _no_currency(item))
            items.append((code, amount))
    elif isinstance(value, Mapping):
        items = list(value.items())
    else:
        raise _ceiling_error(setting, value, _no_currency(value))
    ceilings: dict[str, Decimal] = {}
    for code, amount in items:
        currency = str(code).strip().upper()
        if not _CODE.fullmatch(currency):
            raise _ceiling_error(setting, value, f"{code!r} is not a 3-letter currency code")
        if currency in ceilings:
            raise _ceiling_error(setting, value, f"{currency} is given twice")
        try:
            ceiling = amount_of(amount, what=f"{setting} {currency}")
        except SchemaMismatchError:
            ceiling = None
        if ceiling is None or ceiling < 0:
            raise _ceiling_error(
                setting, value, f"{currency}: {amount!r} is not a finite amount >= 0"
            )
        ceilings[currency] = ceiling
    return dict(sorted(ceilings.items())) or None


def _no_currency(item: object) -> str:
    """Why an item without a currency is refused (a plain number: the old form)."""
    try:
        amount_of(item, what="")
    except SchemaMismatchError:
        return f"{item!r} names no currency"
    return "a plain number is no ceiling: payouts come in several currencies"


def _ceiling_error(setting: str, value: object, why: str) -> ConfigValidationError:
    return ConfigValidationError(
        f"{setting}: {why} (got {value!r}). Give a ceiling per currency, e.g. "
        f'{setting}="{CEILINGS_EXAMPLE}": approvals in a currency without one stop the run; '
        "amounts of different currencies are never added"
    )
