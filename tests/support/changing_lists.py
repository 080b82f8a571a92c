"""A conversion list that changes between the requests of a pull, through the sandbox's own
mechanisms (real HTTP), and the truth to judge the pull by.

* Removal: approving an on-hold conversion takes it out of a ``status: pending`` listing
  (``PATCH /networks/reporting/onhold``).
* Insertion: moving the sandbox's frozen clock forward makes the conversions of that span exist.

:class:`ChangeBetween` is a ``requests`` adapter mounted on the hook under test: it sends every
request as usual and, right after the n-th conversion-report answer came back, makes the planned
change before handing the answer over; with one worker the next request leaves only after that.
The truth is read with single requests of a whole listing (one answer is atomic), never through
the paging under test.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import requests
from requests.adapters import HTTPAdapter

from affiliate_network.hooks._transport import API_KEY_HEADER
from affiliate_network.rules.fields import on_hold_conversion_id

REPORT = "/networks/reporting/conversions"
PENDING = [{"resource_type": "status", "filter_id_value": "pending"}]


class ChangeBetween(HTTPAdapter):
    """Runs ``changes[n]`` right after the n-th conversion-report answer (1-based) arrived."""

    def __init__(self, changes: dict[int, Callable[[], None]]) -> None:
        super().__init__()
        self.changes = changes
        self.answers = 0
        self._lock = threading.Lock()

    def send(self, request: Any, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        response = super().send(request, *args, **kwargs)
        if request.method == "POST" and request.path_url.split("?")[0].endswith(REPORT):
            with self._lock:
                self.answers += 1
                change = self.changes.get(self.answers)
            if change is not None:
                change()
        return response


@dataclass
class ChangingDay:
    """One day of a sandbox listing, with its clock frozen inside the day.

    :param sandbox: the running sandbox.
    :param day: the day (local in ``timezone_id``).
    :param timezone_id: the API timezone of the day.
    :param filters: the listing's filters (``PENDING``: approvals remove rows).
    """

    sandbox: Any
    day: dt.date
    timezone_id: int = 67
    filters: list[dict[str, str]] | None = field(default_factory=lambda: list(PENDING))
    arrivals: list[int] = field(default_factory=list)

    def listing(self) -> dict[str, dict[str, Any]]:
        """Every record of the listing now, from ONE answer: conversion id -> record."""
        body = {
            "show_conversions": True,
            "show_events": False,
            "from": self.day.isoformat(),
            "to": self.day.isoformat(),
            "timezone_id": self.timezone_id,
            "query": {"filters": self.filters or [], "search_terms": []},
        }
        reply = requests.post(
            self.sandbox.base_url + REPORT,
            params={"page": 1, "page_size": 2000},
            json=body,
            headers={API_KEY_HEADER: self.sandbox.keys["network"]},
            timeout=30,
        )
        reply.raise_for_status()
        doc = reply.json()
        assert doc["paging"]["total_count"] == len(doc["conversions"]) < 2000
        return {r["conversion_id"]: r for r in doc["conversions"]}

    def freeze_inside(self, share: float) -> None:
        """Freeze the clock where about ``share`` of the day's listing exists; the rest of
        the day's rows (``arrivals``, their timestamps in order) arrive as it moves on."""
        self.sandbox.set_clock(
            dt.datetime(self.day.year, self.day.month, self.day.day, tzinfo=dt.UTC)
            + dt.timedelta(days=2)
        )
        stamps = sorted(r["conversion_unix_timestamp"] for r in self.listing().values())
        cut = stamps[int(len(stamps) * share)]
        self.arrivals = [t for t in stamps if t >= cut]
        # a record exists once the clock is at or after its second
        self.sandbox.set_clock(dt.datetime.fromtimestamp(cut - 1, dt.UTC))

    def arrive(self, count: int) -> None:
        """Move the clock on until ``count`` more rows of the listing exist."""
        if count <= 0 or not self.arrivals:
            return
        upto = self.arrivals[min(count, len(self.arrivals)) - 1]
        self.arrivals = [t for t in self.arrivals if t > upto]
        self.sandbox.set_clock(dt.datetime.fromtimestamp(upto, dt.UTC))

    def approve(self, ids: Sequence[str]) -> None:
        """Approve these conversions (they leave a pending listing)."""
        now = self.listing()
        held = [oh for cid in ids if cid in now and (oh := on_hold_conversion_id(now[cid]))]
        if not held:
            return
        reply = requests.patch(
            self.sandbox.base_url + "/networks/reporting/onhold",
            json={"on_hold_conversion_ids": held, "status": "approved"},
            headers={API_KEY_HEADER: self.sandbox.keys["network"]},
            timeout=30,
        )
        reply.raise_for_status()

    def change(self, removals: Sequence[int], arrivals: int) -> Callable[[], None]:
        """A change to run between two requests: approve the rows at ``removals`` (indices,
        modulo, into the listing in time order: small ones sit on pages already served), then
        let ``arrivals`` rows arrive (at the end of the listing)."""

        def run() -> None:
            now = self.listing()
            pool = sorted(now, key=lambda cid: (now[cid]["conversion_unix_timestamp"], cid))
            self.approve([pool[i % len(pool)] for i in removals] if pool else [])
            self.arrive(arrivals)

        return run


def judge(served: list[str], before: set[str], after: set[str]) -> None:
    """What a pull of a changing list must give: no row twice, every row that existed from
    the first request to the last (``before & after``: rows only leave and arrive once), and
    nothing that never belonged to the listing."""
    twice = sorted({cid for cid in served if served.count(cid) > 1})
    assert not twice, f"served twice: {twice}"
    lost = sorted((before & after) - set(served))
    assert not lost, f"rows that existed throughout the pull were never served: {lost}"
    foreign = sorted(set(served) - before - after)
    assert not foreign, f"served rows that were never in the listing: {foreign}"


def crowded_second(sandbox: Any, day: dt.date, at_least: int = 3) -> tuple[str, int]:
    """``YYYY-MM-DD hh:mm:ss`` (UTC) of a second of ``day`` holding ``at_least`` conversions,
    and how many it holds, read from one answer (the sandbox reset to 200,000 conversions a
    day: 2 to 4 a second)."""
    reply = requests.post(
        sandbox.base_url + REPORT,
        params={"page": 1, "page_size": 2000},
        json={"from": f"{day} 10:00:00", "to": f"{day} 10:04:59", "timezone_id": 67},
        headers={API_KEY_HEADER: sandbox.keys["network"]},
        timeout=30,
    ).json()
    assert reply["paging"]["total_count"] == len(reply["conversions"])
    stamps: dict[int, int] = {}
    for record in reply["conversions"]:
        t = record["conversion_unix_timestamp"]
        stamps[t] = stamps.get(t, 0) + 1
    second = next(t for t, n in sorted(stamps.items()) if n >= at_least)
    return dt.datetime.fromtimestamp(second, dt.UTC).strftime("%Y-%m-%d %H:%M:%S"), stamps[second]
