"""Paged pulls against the real sandbox: complete, in order, concurrent, query-string paging.

The conversion report is read in time slices (one answer each); the other lists, and a second
fuller than a page, in offset pages with count checks. Lists that change while they are read:
tests/hooks/test_paging_changes.py.
"""

from __future__ import annotations

import datetime as dt
import math
import re

import orjson
import pytest


@pytest.fixture
def window(sandbox) -> tuple[str, str]:
    catalog = sandbox.catalog()
    return catalog["first_date"], catalog["last_date"]


def _ids(records) -> list[str]:
    return [r["conversion_id"] for r in records]


def test_concurrent_pull_matches_truth_and_sequential_order(
    network_conn, make_hook, sandbox, window
):
    first, last = window
    truth = sandbox.truth(first, last, timezone_id=67)

    concurrent = make_hook(network_conn, concurrency=4)
    pull = concurrent.iter_conversions(from_date=first, to_date=last, timezone_id=67, page_size=500)
    got = _ids(pull)
    sequential = make_hook(network_conn, concurrency=1)
    expected = _ids(
        sequential.iter_conversions(from_date=first, to_date=last, timezone_id=67, page_size=500)
    )

    assert len(got) == truth["conversions"]
    assert got == expected
    assert len(set(got)) == len(got)
    assert pull.stats.total_count == truth["conversions"]
    assert pull.stats.rows == truth["conversions"]
    # every slice served whole by one answer of at most 500 rows; split ones were re-read
    assert pull.stats.slices == pull.stats.pages >= math.ceil(truth["conversions"] / 500)
    assert pull.stats.requests == pull.stats.slices + pull.stats.splits
    assert pull.stats.paged_seconds == 0
    assert pull.stats.retries == 0


def test_events_included_when_asked(network_conn, make_hook, sandbox, window):
    first, last = window
    truth = sandbox.truth(first, last, timezone_id=67)
    hook = make_hook(network_conn)
    records = list(
        hook.iter_conversions(
            from_date=first,
            to_date=last,
            timezone_id=67,
            show_conversions=False,
            show_events=True,
            page_size=1000,
        )
    )
    assert len(records) == truth["events"]
    assert all(r["is_event"] for r in records)


def test_paging_travels_in_the_query_string_only(network_conn, make_hook, window, requests_to):
    """Offset pages of a paged list: page and page_size in the query, never in the body."""
    first, last = window
    hook = make_hook(network_conn, concurrency=3)
    body = {"from": first, "to": last, "timezone_id": 67}
    pull = hook.iter_pages(
        "/networks/reporting/conversions", key="conversions", body=body, page_size=700
    )
    rows = sum(1 for _ in pull)
    log = requests_to("/networks/reporting/conversions", "POST")

    assert len(log) == math.ceil(rows / 700) == pull.stats.requests
    pages = sorted(int(entry["query"]["page"]) for entry in log)
    assert pages == list(range(1, len(log) + 1))
    for entry in log:
        assert int(entry["query"]["page_size"]) == 700
        sent = entry["body"] if isinstance(entry["body"], dict) else orjson.loads(entry["body"])
        assert "page" not in sent
        assert "page_size" not in sent


def test_conversion_slices_are_utc_seconds_of_page_one(
    network_conn, make_hook, window, requests_to
):
    """Each slice is one request for page 1 in the query, its bounds as UTC seconds (timezone
    67, ``to`` inclusive); the slices tile the window with no gap and no overlap."""
    first, last = window
    hook = make_hook(network_conn, concurrency=3)
    pull = hook.iter_conversions(from_date=first, to_date=last, timezone_id=80, page_size=700)
    rows = sum(1 for _ in pull)
    log = requests_to("/networks/reporting/conversions", "POST")

    assert rows == pull.stats.rows
    assert len(log) == pull.stats.requests
    served: list[tuple[dt.datetime, dt.datetime]] = []
    for entry in log:
        assert entry["query"] == {"page": "1", "page_size": "700"} or (
            int(entry["query"]["page"]) == 1 and int(entry["query"]["page_size"]) == 700
        )
        sent = entry["body"] if isinstance(entry["body"], dict) else orjson.loads(entry["body"])
        assert "page" not in sent
        assert sent["timezone_id"] == 67
        served.append(
            (
                dt.datetime.strptime(sent["from"], "%Y-%m-%d %H:%M:%S"),
                dt.datetime.strptime(sent["to"], "%Y-%m-%d %H:%M:%S"),
            )
        )
    # the first request is the whole window: the New York days' midnights in UTC
    ny = __import__("zoneinfo").ZoneInfo("America/New_York")
    day0, day1 = dt.date.fromisoformat(first), dt.date.fromisoformat(last)
    start = dt.datetime(day0.year, day0.month, day0.day, tzinfo=ny).astimezone(dt.UTC)
    stop = dt.datetime(day1.year, day1.month, day1.day, tzinfo=ny) + dt.timedelta(days=1)
    assert served[0] == (
        start.replace(tzinfo=None),
        stop.astimezone(dt.UTC).replace(tzinfo=None) - dt.timedelta(seconds=1),
    )


def test_default_page_size_is_2000(network_conn, make_hook, window, requests_to):
    first, last = window
    hook = make_hook(network_conn)
    pull = hook.iter_conversions(from_date=first, to_date=last, timezone_id=67)
    next(pull)
    pull.close()
    assert int(requests_to("/networks/reporting/conversions")[0]["query"]["page_size"]) == 2000


def test_pull_under_injected_faults_is_complete(network_conn, make_hook, sandbox, window):
    first, last = window
    clean = _ids(
        make_hook(network_conn).iter_conversions(
            from_date=first, to_date=last, timezone_id=67, page_size=250
        )
    )
    sandbox.set_faults(error_rate=0.3, seed=7)
    hook = make_hook(network_conn, concurrency=4, max_attempts=8)
    pull = hook.iter_conversions(from_date=first, to_date=last, timezone_id=67, page_size=250)
    assert _ids(pull) == clean
    assert pull.stats.retries > 0


def test_closing_early_stops_fetching(network_conn, make_hook, window, requests_to):
    first, last = window
    hook = make_hook(network_conn, concurrency=2)
    pull = hook.iter_conversions(from_date=first, to_date=last, timezone_id=67, page_size=100)
    for _ in range(150):  # into page 2
        next(pull)
    pull.close()
    sent = len(requests_to("/networks/reporting/conversions"))
    # page 1, plus at most the window of 2 outstanding pages and the one refilled on consuming 2
    assert 2 <= sent <= 4
    with pytest.raises(StopIteration):
        next(pull)


def test_empty_result_yields_nothing(network_conn, make_hook, sandbox):
    hook = make_hook(network_conn)
    first = dt.date.fromisoformat(sandbox.catalog()["first_date"])
    empty = (first - dt.timedelta(days=40)).isoformat()  # inside the 365-day history, no data
    pull = hook.iter_conversions(from_date=empty, to_date=empty, timezone_id=67)
    assert list(pull) == []
    assert pull.stats.total_count == 0
    assert pull.stats.pages == 1


def test_tiered_commissions_and_pixels_page_completely(network_conn, make_hook):
    hook = make_hook(network_conn)
    for pull_of in (hook.iter_tiered_commissions, hook.iter_pixels):
        whole = list(pull_of())
        paged = pull_of(page_size=1)
        assert list(paged) == whole
        assert paged.stats.pages == max(1, len(whole))
        assert paged.stats.total_count == len(whole)


def test_raw_pages_carry_the_same_records_unparsed(network_conn, make_hook, sandbox, window):
    first, last = window
    truth = sandbox.truth(first, last, timezone_id=67)
    hook = make_hook(network_conn, concurrency=3)
    expected = _ids(hook.iter_conversions(from_date=first, to_date=last, timezone_id=67))
    pull = hook.iter_conversions(
        from_date=first, to_date=last, timezone_id=67, page_size=500, raw_pages=True
    )
    pages = list(pull)
    assert [p.number for p in pages] == list(range(1, len(pages) + 1))
    assert all(isinstance(p.content, bytes) and p.key == "conversions" for p in pages)
    records = [r for p in pages for r in orjson.loads(p.content)["conversions"]]
    assert [p.rows for p in pages] == [len(orjson.loads(p.content)["conversions"]) for p in pages]
    assert _ids(records) == expected
    assert pull.stats.rows == pull.stats.total_count == truth["conversions"]
    assert all(p.rows <= 500 for p in pages)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"conversions": [', "not valid JSON"),
        (b'{"conversions": []}', "no paging envelope"),
        (b'{"rows": [], "paging": {"total_count": 0}}', "no 'conversions' list"),
    ],
)
def test_raw_pages_check_the_envelope(body: bytes, message: str) -> None:
    """A server body is checked before a page is handed over (the fetcher stands in for HTTP)."""
    import logging

    from affiliate_network.exceptions import AffiliateNetworkError
    from affiliate_network.hooks._paging import PagedIterator, RawPage

    pull = PagedIterator(
        lambda page, size: RawPage(body, 0),
        key="conversions",
        page_size=10,
        concurrency=1,
        label="POST /networks/reporting/conversions",
        log=logging.getLogger("test"),
        raw=True,
    )
    with pytest.raises(AffiliateNetworkError, match=message):
        list(pull)


def test_long_pull_logs_progress_with_rate_and_eta(network_conn, make_hook, sandbox, debug_logs):
    """Progress lines (pages done / total, rows, rows/s, ETA) at most every progress_every_s."""
    catalog = sandbox.catalog()
    hook = make_hook(network_conn)
    hook.progress_every_s = 0.0  # every page: the clock is real, the interval is what we vary
    rows = list(
        hook.iter_conversions(
            from_date=catalog["last_date"], to_date=catalog["last_date"], timezone_id=67,
            page_size=100,
        )
    )  # fmt: skip
    pages = -(-len(rows) // 100)
    progress = re.findall(
        r"(\d+) slices served \(\d+ split\), (\d+) rows, (\d+)% of the window, \d+ rows/s, ETA",
        debug_logs.text(),
    )
    assert pages >= 3
    served = [int(p[0]) for p in progress]
    assert served == list(range(1, len(served) + 1))
    assert len(served) >= pages
    assert int(progress[-1][1]) == len(rows)
    assert progress[-1][2] == "100"


def test_short_pull_is_quiet_until_the_progress_interval(
    network_conn, make_hook, sandbox, debug_logs
):
    catalog = sandbox.catalog()
    hook = make_hook(network_conn)  # default: at most every 10 s
    assert hook.progress_every_s == 10.0
    list(
        hook.iter_conversions(
            from_date=catalog["last_date"], to_date=catalog["last_date"], timezone_id=67,
            page_size=100,
        )
    )  # fmt: skip
    text = debug_logs.text()
    assert "pulled" in text  # the closing line
    assert not re.search(r"slices served", text)


def _shift_sizes(truth: int, page_size: int = 100) -> tuple[int, int]:
    """``(page_size, insert_count)`` such that the window before the arrival fills whole pages:
    then an unchecked pull's counts add up exactly while it loses the window's last records."""
    count = truth % page_size or page_size
    assert truth - count >= 2 * page_size, truth
    return page_size, count


def test_pull_whose_pages_shift_stops_naming_the_counts(network_conn, make_hook, sandbox):
    """Conversions arriving after page 1 of an offset-paged pull (sandbox fault, real HTTP,
    concurrent page fetches): the pull stops with PullShiftedError naming the window and both
    counts (the checks a second fuller than a page is paged with). Before the fix: a warning,
    and the pull yielded `truth - count` unique rows that matched page 1's total_count."""
    from affiliate_network.exceptions import PullShiftedError

    day = sandbox.catalog()["last_date"]
    truth = sandbox.truth(day, day, timezone_id=67)["conversions"]
    size, count = _shift_sizes(truth)
    sandbox.set_faults(insert_after_page=1, insert_count=count)
    hook = make_hook(network_conn, concurrency=4)
    pull = hook.iter_pages(
        "/networks/reporting/conversions",
        key="conversions",
        body={"from": day, "to": day, "timezone_id": 67},
        page_size=size,
        unique_key="conversion_id",
        label=f"conversions {day}..{day} (timezone 67)",
    )
    with pytest.raises(PullShiftedError) as caught:
        list(pull)
    message = str(caught.value)
    assert f"{day}..{day} (timezone 67)" in message
    assert f"total_count changed from {truth - count} at page 1 to {truth} at page 2" in message
    assert (caught.value.expected, caught.value.got) == (truth - count, truth)


def _stub_pull(pages: dict[int, list[str]], total: int, **kwargs):
    """A PagedIterator over a stub server: ``pages`` maps page number to record ids."""
    import logging

    from affiliate_network.hooks._paging import PagedIterator, RawPage

    def fetch(page: int, size: int) -> RawPage:
        records = [{"conversion_id": i} for i in pages.get(page, [])]
        paging = {"page": page, "page_size": size, "total_count": total}
        return RawPage(orjson.dumps({"conversions": records, "paging": paging}), 0)

    return PagedIterator(
        fetch,
        key="conversions",
        page_size=3,
        concurrency=2,
        label="stub",
        log=logging.getLogger("test"),
        unique_key="conversion_id",
        **kwargs,
    )


@pytest.mark.parametrize(
    ("pages", "message"),
    [
        # a record moved back onto a page already served: page 2 short, one record lost
        ({1: ["a", "b", "c"], 2: ["e", "f"], 3: ["g", "h"]}, "page 2 of 3 has 2 records"),
        # the last page holds less than total_count leaves for it
        ({1: ["a", "b", "c"], 2: ["d", "e", "f"], 3: ["g"]}, "page 3 of 3 has 1 records"),
        # one record in, one out: counts add up, but pages overlap (c twice, one record lost)
        ({1: ["a", "b", "c"], 2: ["c", "d", "e"], 3: ["f", "g"]}, "page 2 repeats"),
    ],
)
def test_short_or_overlapping_pages_stop_the_pull(pages, message) -> None:
    """total_count 8 at page size 3: pages of 3, 3 and 2 records, no key twice. Before the fix
    only an empty page stopped a pull; these were yielded as complete."""
    from affiliate_network.exceptions import PullShiftedError

    with pytest.raises(PullShiftedError, match=message):
        list(_stub_pull(pages, total=8))
