"""``affiliate-network-rules backtest`` on large-world days holding reversals and adjustments
(negative payouts in six currencies, some held): the backtest reports them per currency, apart
from the payouts, and never lets a rule approve one (a person decides it, as in the review).

The days are landed from the session sandbox (real HTTP) as the report DAG lands them; which
held conversions are reversals is the sandbox's truth.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

from affiliate_network.backtest.cli import main
from affiliate_network.settings.paths import PROJECT_ROOT
from tests.support.landed_history import land_days

RULES = PROJECT_ROOT / "include" / "onhold_rules.yaml"
#: The large world's shape and reversal share, at small days.
WORLD = {"world": "large", "days": 3, "conversions_per_day": 3000}


def _amounts(text: str) -> tuple[dict[str, Decimal], Counter[str]]:
    """``12.50 EUR, 300.00 JPY (2)`` -> amounts and counts (``(n)``) per currency."""
    amounts: dict[str, Decimal] = {}
    counts: Counter[str] = Counter()
    for item in filter(None, text.split(", ")):
        amount, currency, *count = item.split(" ")
        amounts[currency] = Decimal(amount)
        if count:
            counts[currency] = int(count[0].strip("()"))
    return amounts, counts


def _totals(out: str) -> dict[str, tuple[dict[str, Decimal], dict[str, Decimal], Counter[str]]]:
    """Per rule of the ``total`` lines: payout, negative payout and negative count per currency."""
    found = {}
    for line in out.splitlines():
        if not line.startswith("total "):
            continue
        head, _, money = line.partition("  payout ")
        rule = head.split()[1]
        paid, _, negative = money.partition("; negative ")
        negative_amounts, negative_counts = _amounts(negative)
        found[rule] = (_amounts(paid if paid != "0" else "")[0], negative_amounts, negative_counts)
    return found


def test_reversals_are_reported_per_currency_apart_and_never_approved(
    sandbox: Any, make_connection: Any, tmp_path: Path, capsys: Any
) -> None:
    sandbox.reset(**WORLD)
    conn = make_connection("afn_bt_rev", host=sandbox.base_url, key=sandbox.keys["network"])
    first = dt.date.fromisoformat(sandbox.catalog()["first_date"])
    last = first + dt.timedelta(days=WORLD["days"] - 1)
    land_days(conn, tmp_path, first, last)
    held = sandbox.planted(first, first)["reversal_on_hold_conversion_ids"]
    held_ids = {i for ids in held.values() for i in ids}

    out = tmp_path / "decisions.jsonl"
    # The run deciding the first day 72 hours after it ends: its held conversions are old
    # enough for the shipped rules' clean-after-72h approval.
    code = main(
        ["backtest", str(RULES), "--records", str(tmp_path / "conversions"),
         "--from", str(first), "--to", str(first), "--decide-after-hours", "72",
         "--decisions", str(out)]
    )  # fmt: skip
    printed = capsys.readouterr()
    assert code == 0, printed.err
    rows = [json.loads(line) for line in out.read_text().splitlines()]

    negative = [r for r in rows if Decimal(r["payout"]) < 0]
    assert {r["on_hold_conversion_id"] for r in negative} == held_ids
    assert not [r for r in negative if r["action"] == "approve"]
    assert {r["action"] for r in negative if r["rule"] == "clean-after-72h"} == {"review"}
    assert len({r["currency_id"] for r in negative}) >= 3, negative

    # The totals: per rule and currency, the payouts and (apart) the negative ones, exactly
    # what the decisions hold; never a sum of two currencies.
    totals = _totals(printed.out)
    for rule, (paid, negatives, counts) in totals.items():
        mine = [r for r in rows if r["rule"] == rule]
        want_paid: dict[str, Decimal] = {}
        want_negative: dict[str, Decimal] = {}
        for r in mine:
            side = want_negative if Decimal(r["payout"]) < 0 else want_paid
            side[r["currency_id"]] = side.get(r["currency_id"], Decimal(0)) + Decimal(r["payout"])
        assert paid == want_paid, rule
        assert negatives == want_negative, rule
        assert counts == Counter(r["currency_id"] for r in mine if Decimal(r["payout"]) < 0)
    assert totals["clean-after-72h"][1], "the approving rule met reversals"
