"""The reconciliation's report requests against a network the sandbox cannot play: amounts of
17 significant digits, and more offers with data in a day than one answer holds.

A real HTTP server on loopback answers ``POST /networks/reporting/entity/table`` from a fixed
list of cells with the documented semantics (filter items: one type ORs its values, two types
AND; rows grouped by the columns asked; an answer over the cap is cut and carries
``incomplete_results: true``), printing every amount as its exact decimal text. The landed side
is a real partition of the same cells.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
from collections.abc import Iterator
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson
import pytest

from affiliate_network.exceptions import ReconciliationError
from affiliate_network.hooks._paging import Page
from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
from affiliate_network.partitions.write import PartitionWriter
from affiliate_network.reports.pull import ConversionPull
from affiliate_network.reports.reconcile import reconcile_day
from affiliate_network.reports.schema import conversion_schema

LOG = logging.getLogger("test")
DAY = dt.date(2026, 1, 15)
KEY = "recon-network-key-0123456789"


class _Network:
    """The cells the fake network reports: ``{(affiliate, offer): (cv, payout, revenue)}``."""

    cells: dict[tuple[int, int], tuple[int, Decimal, Decimal]] = {}
    cap = 10_000
    bodies: list[dict[str, Any]] = []


def _answer(body: dict[str, Any]) -> bytes:
    columns = [c["column"] for c in body["columns"]]
    wanted: dict[str, set[int]] = {}
    for item in body.get("query", {}).get("filters") or ():
        wanted.setdefault(item["resource_type"], set()).add(int(item["filter_id_value"]))
    groups: dict[tuple[int, ...], list[Any]] = {}
    for (affiliate, offer), (cv, payout, revenue) in sorted(_Network.cells.items()):
        ids = {"affiliate": affiliate, "offer": offer}
        if any(ids[kind] not in values for kind, values in wanted.items()):
            continue
        group = groups.setdefault(tuple(ids[c] for c in columns), [0, Decimal(0), Decimal(0)])
        group[0] += cv
        group[1] += payout
        group[2] += revenue
    rows = []
    for key, (cv, payout, revenue) in sorted(groups.items())[: _Network.cap]:
        cols = ", ".join(
            f'{{"column_type": "{c}", "id": "{i}", "label": "{c} {i}"}}'
            for c, i in zip(columns, key, strict=True)
        )
        # The amounts as JSON numbers written out digit by digit (no binary float between).
        rows.append(
            f'{{"columns": [{cols}], "reporting": {{"cv": {cv}, "event": 0, '
            f'"payout": {payout:f}, "revenue": {revenue:f}}}}}'
        )
    capped = ', "incomplete_results": true' if len(groups) > _Network.cap else ""
    return f'{{"table": [{", ".join(rows)}]{capped}}}'.encode()


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        _Network.bodies.append(body)
        data = _answer(body)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:  # quiet
        pass


@pytest.fixture(scope="module")
def network_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()


@pytest.fixture
def hook(network_url, make_connection, tmp_path) -> Iterator[AffiliateNetworkHook]:
    _Network.cells, _Network.cap, _Network.bodies = {}, 10_000, []
    conn = make_connection(
        "recon_fake_network",
        host=network_url,
        key=KEY,
        quota_dir=str(tmp_path / "quota"),
        timeout=10,
    )
    h = AffiliateNetworkHook(conn, max_attempts=1)
    yield h
    h.close()


def _land(base: Path, cells: dict[tuple[int, int], tuple[Decimal, Decimal]]) -> None:
    """One approved USD conversion per cell with the cell's amounts, landed from a page whose
    numbers are written out as text (as the conversion report sends them)."""
    records, numbers = [], {}
    for n, ((affiliate, offer), (payout, revenue)) in enumerate(sorted(cells.items())):
        numbers[f"@payout{n}"], numbers[f"@revenue{n}"] = f"{payout:f}", f"{revenue:f}"
        records.append(
            {
                "conversion_id": f"c{n:06d}",
                "status": "approved",
                "is_event": False,
                "currency_id": "USD",
                "conversion_unix_timestamp": 1768435200 + n,
                "payout": f"@payout{n}",
                "revenue": f"@revenue{n}",
                "relationship": {
                    "affiliate": {"network_affiliate_id": affiliate},
                    "offer": {"network_offer_id": offer},
                },
            }
        )
    body = orjson.dumps({"conversions": records, "paging": {"total_count": len(records)}})
    for placeholder, text in numbers.items():
        body = body.replace(f'"{placeholder}"'.encode(), text.encode())
    request = ConversionPull(DAY, 67, currency_id="USD", show_events=True).record()
    with PartitionWriter(base, "conversions", {"date": DAY.isoformat()}, conversion_schema()) as w:
        w.write_pages([Page(1, body, "conversions", len(records))])
        w.commit(request=request)


def test_report_amounts_are_read_exactly(hook, tmp_path) -> None:
    """17 significant digits: a binary float is off in the last one (12345678901.234567 reads
    as 12345678901.234568); the hook reads the number's text."""
    amounts = {
        (7, 101): (Decimal("12345678901.234567"), Decimal("98765432109.876543")),
        (7, 102): (Decimal("0.000001"), Decimal("99999999999.999999")),
        (8, 101): (Decimal("1.1"), Decimal("2.2")),
    }
    _Network.cells = {k: (1, p, r) for k, (p, r) in amounts.items()}
    _land(tmp_path, amounts)

    rows = hook.network_entity_table(
        from_date=DAY, to_date=DAY, columns=["affiliate", "offer"], timezone_id=67
    )
    assert rows[0]["reporting"]["payout"] == Decimal("12345678901.234567")
    assert isinstance(rows[0]["reporting"]["cv"], int)

    summary = reconcile_day(hook, tmp_path, DAY, log=LOG)

    assert summary["reconciled"] is True, summary
    assert summary["totals"]["USD"]["network"] == {
        "cv": 3,
        "payout": "12345678902.334568",
        "revenue": "198765432112.076542",
    }
    doc = json.loads(Path(summary["comparison"]).read_text())
    assert doc["cells"][0]["network"]["payout"] == "12345678901.234567"


def test_more_offers_than_the_cap_split_by_affiliate_and_find_the_unlanded_offer(
    hook, tmp_path
) -> None:
    """Twelve offers, four affiliates, three offers each; answers hold 10 rows. The day's offer
    list is capped, so the whole table is asked for split by affiliate; the landed offers'
    table is split by offer. The one offer with nothing landed is found and named."""
    _Network.cap = 10
    cells = {
        (a, 100 + 3 * (a - 1) + k): (Decimal(a), Decimal(k))
        for a in (1, 2, 3, 4)
        for k in (1, 2, 3)
    }
    _Network.cells = {key: (1, p, r) for key, (p, r) in cells.items()}
    lost = (4, 112)
    _land(tmp_path, {k: v for k, v in cells.items() if k != lost})

    with pytest.raises(ReconciliationError) as info:
        reconcile_day(hook, tmp_path, DAY, log=LOG)

    err = info.value
    assert err.cells == (
        "affiliate 4 offer 112 (no currency landed): cv landed 0 network 1 (difference 1); "
        "payout landed 0 network 4 (difference 4); revenue landed 0 network 3 (difference 3)",
    )
    assert err.totals["USD"]["difference"] == {"cv": 0, "payout": "0", "revenue": "0"}
    doc = json.loads(Path(err.comparison_path).read_text())
    assert doc["request"]["split_answers"] == {"offer": 1, "affiliate": 1}
    assert len(doc["cells"]) == 12
