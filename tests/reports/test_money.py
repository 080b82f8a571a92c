"""Exact money (issue 28): amounts land as ``decimal128(18, 6)`` parsed from the number's text.

A landed day summed by DuckDB (``SUM``, no ``round``) equals, per affiliate, the sandbox's own
amounts summed exactly; a value no float64 holds comes back digit for digit; a value with more
decimals than the scale, or too large, is refused naming the field and the conversion; a
version-3 partition (``float64`` money) reads in the current layout; the rules decide landed
money as they decide the API's numbers.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections import defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pyarrow as pa
import pytest
import yaml

from affiliate_network.backtest.records import load_records
from affiliate_network.exceptions import SchemaMismatchError
from affiliate_network.hooks._paging import Page
from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
from affiliate_network.partitions.read import read_partition
from affiliate_network.partitions.write import PartitionWriter
from affiliate_network.reports.landing import land_conversion_day
from affiliate_network.reports.pull import ConversionPull
from affiliate_network.reports.schema import (
    MONEY_FIELDS,
    AffiliateReportSchema,
    conversion_schema,
    money_type,
)
from affiliate_network.rules.engine import RuleSet

SCHEMA = conversion_schema()
DAY = "2026-01-15"


def _record(i: int, **money: Any) -> dict[str, Any]:
    return {
        "conversion_id": f"m{i:07d}",
        "status": "approved",
        "conversion_unix_timestamp": 1768435200 + i,
        "payout": 1.5,
        "revenue": 3,
        "sale_amount": 10.25,
        "relationship": {"affiliate": {"network_affiliate_id": 7}},
        **money,
    }


def _page(records: list[dict[str, Any]], numbers: dict[str, str] | None = None) -> bytes:
    """A conversions page; ``numbers`` replaces placeholder strings by raw number text."""
    body = orjson.dumps({"conversions": records, "paging": {"total_count": len(records)}})
    for placeholder, text in (numbers or {}).items():
        body = body.replace(f'"{placeholder}"'.encode(), text.encode())
    return body


def _land_page(base: Path, body: bytes, rows: int) -> Path:
    with PartitionWriter(base, "conversions", {"date": DAY}, SCHEMA) as writer:
        writer.write_pages([Page(1, body, "conversions", rows)])
        return Path(writer.commit(request={}).path)


def _land_dicts(base: Path, records: list[dict[str, Any]]) -> Path:
    with PartitionWriter(base, "conversions", {"date": DAY}, SCHEMA) as writer:
        writer.write(records)
        return Path(writer.commit(request={}).path)


def test_the_money_columns_are_decimal128(tmp_path: Path) -> None:
    assert money_type() == pa.decimal128(18, 6)
    for name in MONEY_FIELDS:
        assert SCHEMA.arrow_schema.field(name).type == money_type()
    report = AffiliateReportSchema(["offer"])
    assert report.version == 2
    for name in ("revenue", "redirect_traffic_revenue", "on_hold_potential_revenue"):
        assert report.arrow_schema.field(name).type == money_type()
    for name in ("ctr", "cvr", "evr", "rpc", "rpm"):  # ratios and percentages
        assert report.arrow_schema.field(name).type == pa.float64()


# 18 significant digits: the nearest float64 is 1000000000000.0; 0.1 + 0.2 as written.
UNHELD = {"P1": "999999999999.999999", "P2": "0.3", "P3": "123456789.123457"}


@pytest.mark.parametrize("path", ["page", "row path", "dicts"])
def test_a_value_no_float64_holds_round_trips(tmp_path: Path, path: str) -> None:
    assert float(UNHELD["P1"]) == 1e12  # what a float64 pipeline would have landed
    records = [
        _record(0, payout="P1", revenue="P2", sale_amount="P3"),
        _record(1, payout=0.1, revenue=0.2, sale_amount=1e2),
    ]
    if path == "row path":  # a field outside the spec sends the page to the row path
        records[1]["not_in_the_spec"] = 1.25
    if path == "dicts":
        # Parsed records hold floats; amounts given as text are taken digit for digit.
        records[0].update(payout=UNHELD["P1"], revenue="0.3", sale_amount=UNHELD["P3"])
        part = _land_dicts(tmp_path, records)
    else:
        part = _land_page(tmp_path, _page(records, UNHELD), len(records))
    table = read_partition(part)
    assert table.schema.field("payout").type == money_type()
    rows = {r["conversion_id"]: r for r in table.to_pylist()}
    assert rows["m0000000"]["payout"] == Decimal("999999999999.999999")
    assert rows["m0000000"]["revenue"] == Decimal("0.3")
    assert rows["m0000000"]["sale_amount"] == Decimal("123456789.123457")
    assert rows["m0000001"]["payout"] + rows["m0000001"]["revenue"] == Decimal("0.3")
    assert rows["m0000001"]["sale_amount"] == Decimal(100)
    # DuckDB sums them exactly: no float64 anywhere on the way.
    total = duckdb.execute(
        "SELECT sum(payout) + sum(revenue) FROM read_parquet($glob)",
        {"glob": str(part / "*.parquet")},
    ).fetchone()
    assert total is not None
    assert total[0] == Decimal("999999999999.999999") + Decimal("0.3") + Decimal("0.3")


@pytest.mark.parametrize(
    ("field", "text", "problem"),
    [
        ("payout", "1.0000001", "more than 6 decimals"),
        ("revenue", "0.0000005", "more than 6 decimals"),
        ("sale_amount", "1000000000000", "more than 12 integer digits"),
        ("payout", "-1e12", "more than 12 integer digits"),
        ("sale_amount", "1e-7", "more than 6 decimals"),
    ],
)
@pytest.mark.parametrize("path", ["page", "dicts"])
def test_an_amount_beyond_the_scale_or_precision_is_refused_by_name(
    tmp_path: Path, field: str, text: str, problem: str, path: str
) -> None:
    """Never rounded: the landing fails naming the field, the conversion and the value."""
    records = [_record(0), _record(1, **{field: "X"}), _record(2)]
    if path == "page":
        body = _page(records, {"X": text})
        with pytest.raises(SchemaMismatchError) as err:
            _land_page(tmp_path, body, len(records))
    else:
        records[1][field] = text
        with pytest.raises(SchemaMismatchError) as err:
            _land_dicts(tmp_path, records)
    message = str(err.value)
    assert f"field {field!r}" in message
    assert "conversion_id='m0000001'" in message
    assert problem in message
    assert not list(tmp_path.rglob("*.parquet"))  # nothing published


def test_the_affiliate_report_refuses_an_over_scale_amount_by_name() -> None:
    schema = AffiliateReportSchema(["offer"])
    row = {
        "columns": [{"column_type": "offer", "id": "7", "label": "A"}],
        "reporting": {"revenue": 12.3456789, "cv": 2, "ctr": 0.123456789},
    }
    with pytest.raises(SchemaMismatchError, match=r"field 'revenue'.*more than 6 decimals"):
        schema.to_table([schema.flatten(row)])
    row["reporting"]["revenue"] = 12.34
    table = schema.to_table([schema.flatten(row)])
    assert table.column("revenue").to_pylist() == [Decimal("12.34")]
    assert table.column("ctr").to_pylist() == [0.123456789]  # a rate stays a float


# --- against the sandbox --------------------------------------------------------------------


@pytest.fixture(scope="module")
def sandbox_day(sandbox_server, tmp_path_factory) -> dict[str, Any]:
    """The sandbox's last day landed as Parquet, and its raw pages as the API sent them."""
    from tests.support.connections import conn_env_name

    sandbox = sandbox_server
    sandbox.reset()  # default data, no faults
    tmp = tmp_path_factory.mktemp("money")
    day = dt.date.fromisoformat(sandbox.catalog()["last_date"])
    conn = json.dumps({
        "conn_type": "affiliate_network", "host": sandbox.base_url,
        "password": sandbox.keys["network"], "extra": {"portal": "network"},
    })  # fmt: skip
    pull = ConversionPull(day, 67, show_events=True)
    with pytest.MonkeyPatch.context() as env:
        env.setenv(conn_env_name("money"), conn)
        hook = AffiliateNetworkHook("money")
        try:
            summary = land_conversion_day(
                hook, str(tmp), pull, page_size=500, consistency_retries=1,
                log=logging.getLogger("test"),
            )  # fmt: skip
            pages = [
                page.content
                for page in hook.iter_conversions(
                    from_date=day, to_date=day, timezone_id=67, show_events=True, raw_pages=True
                )
            ]
        finally:
            hook.close()
    return {"path": Path(summary["path"]), "pages": pages}


def test_per_affiliate_sums_equal_the_sandbox_to_the_cent(sandbox_day: dict[str, Any]) -> None:
    """DuckDB's plain SUM of the landed day equals, per affiliate, the exact sum of the amounts
    as the sandbox printed them (read here with ``Decimal``, never a float)."""
    truth: dict[int, list[Decimal]] = defaultdict(lambda: [Decimal(0)] * 3)
    floats: dict[int, list[float]] = defaultdict(lambda: [0.0] * 3)
    for content in sandbox_day["pages"]:
        for record in json.loads(content, parse_float=Decimal)["conversions"]:
            affiliate = record["relationship"]["affiliate"]["network_affiliate_id"]
            for i, name in enumerate(("payout", "revenue", "sale_amount")):
                truth[affiliate][i] += Decimal(record[name])
                floats[affiliate][i] += float(record[name])
    rows = duckdb.execute(
        """SELECT rel_network_affiliate_id, sum(payout), sum(revenue), sum(sale_amount)
           FROM read_parquet($glob) GROUP BY 1""",
        {"glob": str(sandbox_day["path"] / "*.parquet")},
    ).fetchall()
    landed = {affiliate: list(sums) for affiliate, *sums in rows}
    assert len(landed) > 3
    assert landed == dict(truth)
    assert all(isinstance(v, Decimal) for sums in landed.values() for v in sums)
    # What float64 money gave (the drift in the last digits), for the record.
    drifted = sum(
        Decimal(repr(f)) != t for a in truth for f, t in zip(floats[a], truth[a], strict=True)
    )
    print(f"float64 sums that differ from the exact ones: {drifted} of {3 * len(truth)}")


def test_the_rules_decide_landed_money_as_the_apis_numbers(tmp_path: Path) -> None:
    """Landed decimals reach the rules as the API's JSON numbers (floats): ``payout > 50`` keeps
    its meaning at the boundary, for records pulled live and for the landed partition alike."""
    payouts = ["49.99", "50", "50.000001", "50.01", "1234.5"]
    records = [_record(i, payout=f"P{i}") for i in range(len(payouts))]
    body = _page(records, {f"P{i}": text for i, text in enumerate(payouts)})
    part = _land_page(tmp_path, body, len(records))
    live = orjson.loads(body)["conversions"]  # the hook's records: floats
    landed = load_records(part)
    assert [type(r["payout"]) for r in landed] == [float] * len(payouts)
    rules = tmp_path / "rules.yaml"
    doc = {
        "version": 1,
        "rules": [
            {"id": "high", "description": "above 50", "action": "reject",
             "when": {"field": "payout", "gt": 50}},
            {"id": "fifty", "description": "50 or more", "action": "review",
             "when": {"field": "payout", "ge": 50.0}},
        ],
    }  # fmt: skip
    rules.write_text(yaml.safe_dump(doc))
    ruleset = RuleSet.from_file(rules)
    now = 1768435200 + 86400

    def decided(batch: list[dict[str, Any]]) -> list[str | None]:
        evaluation = ruleset.evaluate(batch, now=now)
        return [d.rule_id if (d := evaluation.for_index(i)) else None for i in range(len(batch))]

    assert decided(landed) == decided(live) == [None, "fifty", "high", "high", "high"]
