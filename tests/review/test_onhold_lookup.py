"""The one search by on-hold id, as the writer and the traffic snapshot use it.

Real HTTP to the sandbox; what was sent is read from its request log (``GET /_sandbox/requests``).
The real service may refuse ``search_type: on_hold_conversion_id`` (it is not in the public docs)
or ignore it: a refusal is the sandbox's own 400 for a search type it does not know (the module's
search type renamed for the test); an ignored search is a hook that drops the search terms, so
the sandbox answers the whole window, as such a service would.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from affiliate_network.exceptions import InvalidRequestError
from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
from affiliate_network.review import onhold_lookup
from affiliate_network.review.apply import OnHoldWriter
from affiliate_network.review.onhold_lookup import iter_on_hold_rows
from affiliate_network.rules.fields import on_hold_conversion_id, on_hold_status
from tests.support.review_traffic import pull_traffic, snapshot_store, start_of_traffic

REPORT = "/networks/reporting/conversions"
#: Fast retries: a retried request would show in the log without slowing the tests.
FAST = {"max_attempts": 3, "base_delay": 0.005, "max_delay": 0.01, "jitter": 0.0}


class _IgnoresSearch(AffiliateNetworkHook):
    """A network that ignores search terms it does not support: the whole window comes back."""

    def iter_conversions(self, **kwargs: Any) -> Any:
        kwargs["search_terms"] = None
        return super().iter_conversions(**kwargs)


@pytest.fixture
def hook(network_conn) -> Iterator[AffiliateNetworkHook]:
    h = AffiliateNetworkHook(network_conn, **FAST)
    yield h
    h.close()


@pytest.fixture
def ignoring(network_conn) -> Iterator[AffiliateNetworkHook]:
    h = _IgnoresSearch(network_conn, **FAST)
    yield h
    h.close()


@pytest.fixture
def span(sandbox) -> dict[str, Any]:
    """The whole sandbox data range as the lookup's window (UTC)."""
    catalog = sandbox.catalog()
    first, last = (dt.date.fromisoformat(catalog[k]) for k in ("first_date", "last_date"))
    return {"from_date": first, "to_date": last, "timezone_id": 67}


def _report_requests(sandbox: Any) -> list[dict[str, Any]]:
    log = sandbox.requests_log()
    return [e for e in log if e["method"] == "POST" and e["path"].endswith(REPORT)]


def _writer(hook: AffiliateNetworkHook, span: dict[str, Any], chunk_size: int) -> OnHoldWriter:
    return OnHoldWriter(hook, chunk_size=chunk_size, log=logging.getLogger("test"), **span)


def test_ids_are_asked_chunk_by_chunk_and_each_row_says_it_was_asked(sandbox, hook, span) -> None:
    ids = sandbox.catalog()["on_hold_conversion_ids"][:23]
    hook.set_on_hold_status(ids[:3], "rejected")
    sandbox.clear_requests()
    rows = list(iter_on_hold_rows(hook, ids, chunk_size=10, **span))
    assert sorted(r.on_hold_id for r in rows) == sorted(ids)
    assert all(r.asked for r in rows)
    states = {r.on_hold_id: on_hold_status(r.record) for r in rows}
    assert [states[i] for i in ids] == ["rejected"] * 3 + ["on_hold"] * 20
    sent = _report_requests(sandbox)
    # One request per chunk, one page as large as the chunk, the ids in order.
    assert [e["query"]["page_size"] for e in sent] == ["10", "10", "3"]
    terms = [t for e in sent for t in e["body"]["query"]["search_terms"]]
    assert [t["value"] for t in terms] == ids
    assert {t["search_type"] for t in terms} == {"on_hold_conversion_id"}
    assert {(e["body"]["show_conversions"], e["body"]["show_events"]) for e in sent} == {
        (True, False)
    }


def test_the_writer_reads_states_through_the_lookup(sandbox, hook, span) -> None:
    ids = sandbox.catalog()["on_hold_conversion_ids"][:7]
    hook.set_on_hold_status(ids[:2], "approved")
    unknown = "0" * 32  # not an id of this world: the search does not return it
    sandbox.clear_requests()
    states = _writer(hook, span, chunk_size=4).current_states([*ids, unknown])
    assert states == {
        **dict.fromkeys(ids[:2], "approved"),
        **dict.fromkeys(ids[2:], "on_hold"),
        unknown: None,
    }
    assert len(_report_requests(sandbox)) == 2


def test_a_refused_search_raises_once_and_the_writer_fails_with_it(
    sandbox, hook, span, monkeypatch
) -> None:
    monkeypatch.setattr(onhold_lookup, "SEARCH_TYPE", "on_hold_id_unsupported")
    ids = sandbox.catalog()["on_hold_conversion_ids"][:5]
    sandbox.clear_requests()
    with pytest.raises(InvalidRequestError, match="on_hold_id_unsupported") as info:
        list(iter_on_hold_rows(hook, ids, chunk_size=10, **span))
    assert info.value.status_code == 400
    assert [e["status"] for e in _report_requests(sandbox)] == [400]  # not retried
    # The writer has no fallback: a refused re-check stops it before any PATCH.
    with pytest.raises(InvalidRequestError):
        _writer(hook, span, chunk_size=10).apply(ids, "approved")
    assert not [e for e in sandbox.requests_log() if e["method"] == "PATCH"]


def test_an_ignored_search_marks_stray_rows_and_the_writer_still_reads_its_ids(
    sandbox, hook, ignoring, span
) -> None:
    day = span["to_date"]
    held = [
        oh
        for r in hook.iter_conversions(from_date=day, to_date=day, timezone_id=67)
        if on_hold_status(r) == "on_hold" and (oh := on_hold_conversion_id(r))
    ][:3]
    one_day = {**span, "from_date": day}
    rows = iter_on_hold_rows(ignoring, held, chunk_size=3, **one_day)
    first = next(rows)
    rows.close()
    assert not first.asked  # the day's first conversion, not one of those asked
    states = _writer(ignoring, one_day, chunk_size=200).current_states(held)
    assert states == dict.fromkeys(held, "on_hold")


def _snapshot_then_next_hour(sandbox: Any, hook: AffiliateNetworkHook, tmp_path: Path) -> Any:
    """A stored snapshot and the time of the next run (which refreshes its on-hold rows)."""
    store = snapshot_store(tmp_path)
    t1 = start_of_traffic(sandbox)
    assert pull_traffic(hook, store, t1).saved
    return store, t1 + dt.timedelta(hours=1)


def test_traffic_falls_back_to_a_full_pull_when_the_search_is_refused(
    sandbox, hook, tmp_path, monkeypatch
) -> None:
    store, t2 = _snapshot_then_next_hour(sandbox, hook, tmp_path)
    reference = pull_traffic(hook, None, t2).records
    monkeypatch.setattr(onhold_lookup, "SEARCH_TYPE", "on_hold_id_unsupported")
    pulled = pull_traffic(hook, store, t2)
    assert pulled.mode == "full"
    assert "refused the search by on-hold id" in pulled.reason
    assert pulled.records == reference


def test_traffic_stops_at_the_first_stray_row_and_pulls_in_full(
    sandbox, hook, ignoring, tmp_path
) -> None:
    store, t2 = _snapshot_then_next_hour(sandbox, hook, tmp_path)
    reference = pull_traffic(hook, None, t2).records
    sandbox.clear_requests()
    pulled = pull_traffic(ignoring, store, t2, refresh_chunk=20)
    assert pulled.mode == "full"
    assert "answered ids not asked for" in pulled.reason
    assert pulled.records == reference
    refresh = [e for e in _report_requests(sandbox) if e["query"]["page_size"] == "20"]
    # Stopped at the first page (plus the pages already in flight), not the window's ~100.
    assert 1 <= len(refresh) <= 1 + ignoring.concurrency
    assert len(reference) > 50 * 20


def test_traffic_falls_back_when_an_on_hold_id_is_no_longer_found(sandbox, hook, tmp_path) -> None:
    store, t2 = _snapshot_then_next_hour(sandbox, hook, tmp_path)
    snap, _ = store.load()
    held = next(r for r in snap.records if on_hold_status(r) == "on_hold")
    held["relationship"]["on_hold_snapshots"][-1]["on_hold_conversion_id"] = "0" * 32
    store.save(snap)
    pulled = pull_traffic(hook, store, t2)
    assert pulled.mode == "full"
    assert "1 on-hold conversions of the snapshot not found by id" in pulled.reason
    assert pulled.records == pull_traffic(hook, None, t2).records


def test_traffic_refreshes_on_hold_rows_through_the_lookup(sandbox, hook, tmp_path) -> None:
    store, t2 = _snapshot_then_next_hour(sandbox, hook, tmp_path)
    snap, _ = store.load()
    # The oldest on-hold rows: the newest hours are pulled again (late arrivals), not looked up.
    held = [
        oh
        for r in sorted(snap.records, key=lambda r: r["conversion_unix_timestamp"])
        if on_hold_status(r) == "on_hold" and (oh := on_hold_conversion_id(r))
    ]
    hook.set_on_hold_status(held[:4], "rejected")
    sandbox.clear_requests()
    # Chunks well under the snapshot's on-hold rows (about a hundred, more or less by the day).
    chunk = 50
    pulled = pull_traffic(hook, store, t2, refresh_chunk=chunk)
    assert pulled.mode == "incremental", pulled.reason
    assert pulled.records == pull_traffic(hook, None, t2).records
    states = {on_hold_conversion_id(r): on_hold_status(r) for r in pulled.records}
    assert [states[i] for i in held[:4]] == ["rejected"] * 4
    searches = [e["body"]["query"]["search_terms"] for e in _report_requests(sandbox)]
    asked = [t["value"] for terms in searches for t in terms]
    # Chunks of ``chunk`` ids, each id once: every on-hold row of the snapshot not pulled again.
    sizes = [len(terms) for terms in searches if terms]
    assert set(sizes[:-1]) == {chunk}
    assert 0 < sizes[-1] <= chunk
    assert pulled.rows_refreshed == len(asked) == len(set(asked)) > chunk
    assert set(held[:4]) <= set(asked)
