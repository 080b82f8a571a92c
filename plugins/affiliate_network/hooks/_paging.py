"""Paged pulls: offset pages (:class:`PagedIterator`) and time slices (:class:`SlicedPull`).

Spec, "Endpoints / Common conventions": ``page`` (1-based) and ``page_size`` are read from the
query string for GET and POST alike (a body page is ignored); paginated responses carry
``paging: {page, page_size, total_count}``; the maximum page size is typically 2,000 and some
endpoints enforce less.

Offset pages (:class:`PagedIterator`, every paged list but the conversion report): page 1 first,
then the remaining pages concurrently, yielded in page order. A pull is a snapshot only if the
result set holds still while it is paged. Every page after the first must carry page 1's
``total_count``, every page but the last must hold exactly ``page_size`` records and the last
one the rest, and (``unique_key``) no record may come twice; otherwise the pull stops with
:class:`~affiliate_network.exceptions.PullShiftedError` naming the page and the counts. These
checks catch an arrival or a removal alone, but not both: one row removed from a page already
served and one added behind it keep every count, and the row at the next page's edge is never
served. No check across requests can see that; only one response is atomic.

Time slices (:class:`SlicedPull`, the conversion report): the window ``[t0, t1)`` (unix
seconds) is read as slices each answered by ONE request of page 1. A slice whose
``total_count`` exceeds the rows one page holds is not paged: its answer is dropped and the
slice is split by time (into as many equal parts as needed to fill about :data:`SLICE_FILL` of
a page each) and those are read, recursively. A slice is served only when its one answer holds
all of it (``rows == total_count <= page size``). Slices partition the window and a record's
timestamp never changes, so every record that exists throughout the pull lies in exactly one
served slice and is in that slice's one answer: it is served exactly once. A record that
appears or disappears during the pull may or may not be served (it was not in every state the
pull saw); a record served belongs to the window. A single second holding more records than a
page falls back to checked offset paging of that second (the checks above; a shift there
re-pulls the window): that is the one place the guarantee weakens to the checks'.

Junk stops a sliced pull early instead of multiplying it: an answer's ``total_count`` must be
plausible (at most :data:`MAX_PAGES` pages) before its slice is split, and the parts of a split
slice must report together no more than the slice did plus :data:`SPLIT_ARRIVALS`; a network
that ignores ``from``/``to`` answers every part with the whole count and is stopped at its
first split (the parts in flight are counted before any part is split or paged).

Memory: a sliding window of at most ``concurrency`` outstanding requests, each holding the raw
bytes of one page, plus the one parsed page being yielded. Pages are parsed on the consuming
thread (orjson holds the GIL anyway), so raw bytes, not parsed dicts, wait in the window. Memory is
therefore bounded by ``concurrency x page size``, never by the report size. Slices not yet
requested are two integers each.
"""

from __future__ import annotations

import functools
import itertools
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Generator, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import msgspec
import orjson

from affiliate_network.exceptions import AffiliateNetworkError, PullShiftedError
from affiliate_network.helpers.gcpause import paused_gc
from affiliate_network.helpers.tasklog import TaskLog
from affiliate_network.hooks._memory import pin_mmap_threshold

if TYPE_CHECKING:
    from affiliate_network.helpers.seen_keys import SeenKeys


def loads_without_gc(content: bytes) -> Any:
    """``orjson.loads`` with the cyclic GC paused.

    A 2,000-record page is ~300,000 new dicts and lists; with the collector on, those
    allocations trigger collections that walk the whole heap, a large share of the parse time.
    Parsed JSON holds no reference cycles, so nothing is leaked by pausing it.
    """
    with paused_gc():
        return orjson.loads(content)


@dataclass
class PullStats:
    """Progress of one paged pull, updated as pages are consumed.

    :param pages: pages consumed so far.
    :param rows: records yielded so far.
    :param total_count: ``paging.total_count`` of the first page (``None`` before it arrived).
    :param retries: extra attempts spent on this pull's requests (all pages).
    :param elapsed_s: seconds since the pull started.
    :param requests: answers received (a sliced pull: served slices, split slices and the
        pages of seconds paged; an offset pull: its pages).
    :param slices: slices served whole by one answer (sliced pulls).
    :param splits: slices whose answer was dropped because they held more than a page.
    :param paged_seconds: single seconds holding more than a page, paged with the checks.
    """

    pages: int = 0
    rows: int = 0
    total_count: int | None = None
    retries: int = 0
    elapsed_s: float = 0.0
    requests: int = 0
    slices: int = 0
    splits: int = 0
    paged_seconds: int = 0


class RawPage(NamedTuple):
    """One page as fetched by a worker: unparsed body and the retries it took."""

    content: bytes
    retries: int


class Page(NamedTuple):
    """One page handed over unparsed (``raw=True``): its body, and what the envelope said.

    :param number: 1-based page number.
    :param content: the response body, a JSON object holding ``key`` and ``paging``.
    :param key: name of the record list in ``content``.
    :param rows: number of records in that list.
    :param records: each record's JSON text as it stands in ``content`` (``msgspec.Raw``
        views, no copies), when the envelope check found them; ``None``: not split yet.
    """

    number: int
    content: bytes
    key: str
    rows: int
    records: Sequence[Any] | None = None


#: Most pages one pull may span (2 billion rows at 2,000 per page): a larger answer is junk.
MAX_PAGES = 1_000_000
#: Extra pulls of a window whose pages shifted while it was paged (so 3 pulls at most), for
#: every caller that pulls a live window (the report landing, the review's traffic).
SHIFT_RETRIES = 2
#: Seconds to wait before pulling a shifted window again: long enough for a burst of arriving
#: conversions to pass, short next to the task.
SHIFT_WAIT_S = 2.0
#: A slice split for holding more than a page is cut into parts planned to fill this share of
#: a page each: room for uneven traffic inside the part, so that few parts overflow again.
SLICE_FILL = 0.8
#: The parts of a split slice may report together this share more records than the slice did
#: (at least a page more, always fewer than twice as many): rows that arrived between the
#: slice's answer and its parts'. Beyond it the network is not narrowing its answers to the
#: parts' ``from``/``to``, and splitting further would multiply the requests at every level.
SPLIT_ARRIVALS = 0.5
_T = TypeVar("_T")


def pull_until_still(
    pull: Callable[[int], _T],
    *,
    what: str,
    lost: str,
    log: TaskLog,
    retries: int = SHIFT_RETRIES,
    wait_s: float = SHIFT_WAIT_S,
) -> _T:
    """``pull(attempt)`` (1, 2, ...) until one pull holds still: a pull whose pages shifted
    (:class:`PullShiftedError`) is discarded and made again ``wait_s`` later, ``retries``
    times at most; then the task fails, naming ``what`` and what was not done.

    :param pull: makes one whole pull; raises :class:`PullShiftedError` when it shifted.
    :param what: names the pull in the log and the error (``"2026-01-31"``).
    :param lost: what did not happen (``"published"``, ``"decided"``).
    :param log: where a discarded pull is told.
    :param retries: extra pulls.
    :param wait_s: seconds between pulls.
    :raises PullShiftedError: every pull shifted; the last one's counts.
    """
    pulls = retries + 1
    for attempt in range(1, pulls + 1):
        try:
            return pull(attempt)
        except PullShiftedError as err:
            if attempt == pulls:
                raise PullShiftedError(
                    f"{what}: {pulls} pull(s) all shifted while paging, nothing was {lost}; the "
                    f"last one: {err}",
                    expected=err.expected,
                    got=err.got,
                ) from err
            log.warning(
                "%s: %s; discarded, pulling again in %.1fs (pull %d of %d)",
                what,
                err,
                wait_s,
                attempt + 1,
                pulls,
            )
            time.sleep(wait_s)
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


#: ``fetch(page, page_size) -> RawPage``; raises an ``AffiliateNetworkError`` on failure.
PageFetcher = Callable[[int, int], RawPage]


class PagedIterator(Iterator[dict[str, Any]]):
    """Iterator of the records of every page of a paginated endpoint, in page order.

    Nothing is requested before the first ``next()``. Closing it early (``close()``, leaving a
    ``with`` block, or dropping it) cancels the pages not yet fetched.

    :param fetch: fetches one page (runs on worker threads; must be thread-safe).
    :param key: name of the record list in the response (``conversions``, ``commissions``, ...).
    :param page_size: requested rows per page.
    :param concurrency: worker threads, and pages outstanding at most, after page 1.
    :param label: what is being pulled, for the log line.
    :param log: logger of the owning hook.
    :param cancel: set when the pull stops (done, failed or closed early), so a fetcher that is
        waiting to retry gives up instead of working for nobody.
    :param raw: yield one :class:`Page` per page (body unparsed, envelope checked) instead of
        records: for consumers that parse pages themselves without building Python objects.
    :param progress_every_s: log a progress line (pages done / total, rows, rows/s, ETA) at
        most this often; a pull shorter than that logs only its closing line.
    :param clock: monotonic clock (tests inject one).
    :param unique_key: record field that identifies a record (``conversion_id``): a record
        whose key an earlier one of this pull had means the pages overlap (the result set
        moved), and the pull stops. Checked for parsed records only (``raw=False``); raw pages
        are deduplicated by their consumer (the landing's seen keys). Costs 4 bytes per record
        in memory (:mod:`affiliate_network.helpers.seen_keys`).
    """

    def __init__(
        self,
        fetch: PageFetcher,
        *,
        key: str,
        page_size: int,
        concurrency: int,
        label: str,
        log: TaskLog,
        cancel: threading.Event | None = None,
        raw: bool = False,
        progress_every_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        unique_key: str | None = None,
    ) -> None:
        if page_size < 1:
            raise ValueError("page_size must be at least 1")
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.stats = PullStats()
        self._fetch = fetch
        self._key = key
        self._page_size = page_size
        self._concurrency = concurrency
        self._label = label
        self._log = log
        self._cancel = cancel or threading.Event()
        self._raw = raw
        self._progress_every_s = progress_every_s
        self._clock = clock
        self._last_progress = 0.0
        self._unique_key = None if raw else unique_key
        self._seen: SeenKeys | None = None  # made at the first page checked, closed at the end
        self._gen = self._generate()

    def __iter__(self) -> PagedIterator:
        return self

    def __next__(self) -> dict[str, Any]:
        return next(self._gen)

    def close(self) -> None:
        """Stop the pull and cancel outstanding page requests."""
        self._gen.close()

    def __enter__(self) -> PagedIterator:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _parse(self, raw: RawPage, page: int) -> tuple[Any, dict[str, Any]]:
        if self._raw:
            return self._parse_envelope(raw, page)
        try:
            doc = loads_without_gc(raw.content)
        except orjson.JSONDecodeError:
            raise AffiliateNetworkError(f"{self._label}: page {page} is not valid JSON") from None
        records = doc.get(self._key) if isinstance(doc, dict) else None
        paging = doc.get("paging") if isinstance(doc, dict) else None
        if not isinstance(records, list) or not isinstance(paging, dict):
            raise AffiliateNetworkError(
                f"{self._label}: page {page} has no '{self._key}' list or no paging envelope"
            )
        for i, record in enumerate(records):
            if type(record) is not dict:
                raise AffiliateNetworkError(
                    f"{self._label}: page {page}, {self._key}[{i}] is a "
                    f"{type(record).__name__}, not an object"
                )
        return records, paging

    def _paging_int(
        self, paging: dict[str, Any], name: str, page: int, *, minimum: int
    ) -> int | None:
        """``paging.<name>`` as a whole number ``>= minimum`` (absent: ``None``)."""
        value = paging.get(name)
        if value is None:
            return None
        if type(value) is not int or value < minimum:
            raise AffiliateNetworkError(
                f"{self._label}: page {page} has paging.{name} = {str(value)[:40]!r}, not a "
                f"whole number >= {minimum}"
            )
        return value

    def _parse_envelope(self, raw: RawPage, page: int) -> tuple[list[Page], dict[str, Any]]:
        """Check the envelope of an unparsed page: records split as spans, never parsed."""
        try:
            envelope = page_decoder(self._key).decode(raw.content)
        except msgspec.ValidationError:  # valid JSON, wrong shape (a subclass: caught first)
            raise AffiliateNetworkError(
                f"{self._label}: page {page} has no '{self._key}' list or no paging envelope"
            ) from None
        except msgspec.DecodeError:
            raise AffiliateNetworkError(f"{self._label}: page {page} is not valid JSON") from None
        records: list[Any] = getattr(envelope, self._key)
        page_obj = Page(page, raw.content, self._key, len(records), records)
        return [page_obj], envelope.paging

    def _progress(self, started: float, last_page: int) -> None:
        """Log pages done / total, rows, rows/s and an ETA, at most every ``progress_every_s``."""
        now = self._clock()
        if now - max(started, self._last_progress) < self._progress_every_s:
            return
        self._last_progress = now
        st = self.stats
        elapsed = max(now - started, 1e-9)
        rate = st.rows / elapsed
        left = (st.total_count or 0) - st.rows
        eta = f"{left / rate:.0f}s" if rate > 0 and left > 0 else "-"
        self._log.info(
            "%s: page %d/%d, %d of %s rows, %.0f rows/s, ETA %s",
            self._label,
            st.pages,
            last_page,
            st.rows,
            st.total_count,
            rate,
            eta,
        )

    def _log_end(self, finished: bool) -> None:
        st = self.stats
        if st.total_count is not None and finished and st.rows != st.total_count:
            self._log.warning(
                "%s: got %d rows but total_count said %d", self._label, st.rows, st.total_count
            )
        if not finished:
            # The error that stopped it says why (and how many attempts it took); the retries of
            # the failed page are not in the count, so "0 retries" would contradict it.
            self._log.info(
                "%s: stopped after %d pages, %d rows in %.2fs",
                self._label,
                st.pages,
                st.rows,
                st.elapsed_s,
            )
            return
        self._log.info(
            "%s: pulled %d pages, %d rows (total_count %s), %d retries in %.2fs",
            self._label,
            st.pages,
            st.rows,
            st.total_count,
            st.retries,
            st.elapsed_s,
        )

    def _count(self, records: list[Any]) -> int:
        return records[0].rows if self._raw else len(records)

    def _first_page(self, started: float) -> tuple[list[Any], int, int, int, tuple[int, int]]:
        """Page 1: its records, ``total_count``, the page size served, the last page number
        and the page's digest (to spot a server that ignores ``page``).
        """
        stats = self.stats
        raw = self._fetch(1, self._page_size)
        stats.requests += 1
        stats.retries += raw.retries
        records, paging = self._parse(raw, 1)
        digest = (len(raw.content), hash(raw.content))
        del raw
        total_count = self._paging_int(paging, "total_count", 1, minimum=0)
        total = total_count or 0
        stats.total_count = total
        # Some endpoints enforce a smaller maximum than asked for: page by what was served.
        page_size = self._paging_int(paging, "page_size", 1, minimum=1) or self._page_size
        served = self._count(records)
        if 0 < served < page_size < total:
            page_size = served
        last_page = self._plausible_pages(total, page_size)
        if total_count is not None:
            self._check_rows(1, served, last_page, page_size, total)
        self._check_unique(records, 1)
        stats.pages = 1
        stats.rows += self._count(records)
        stats.elapsed_s = self._clock() - started
        self._progress(started, last_page)
        return records, total, page_size, last_page, digest

    def _plausible_pages(self, total: int, page_size: int) -> int:
        """Pages ``total`` records take at ``page_size``; more than :data:`MAX_PAGES` is junk,
        refused before anything more is requested."""
        last_page = max(1, math.ceil(total / page_size))
        if last_page > MAX_PAGES:
            raise AffiliateNetworkError(
                f"{self._label}: paging says total_count {total} at page_size {page_size}, "
                f"{last_page} pages; more than {MAX_PAGES:,} pages is not a plausible "
                "answer, so nothing more is requested"
            )
        return last_page

    def _shifted(self, message: str, *, expected: int, got: Any) -> PullShiftedError:
        return PullShiftedError(
            f"{self._label}: {message}; the result set moved while paging, so this pull is "
            "incomplete (pull the window again)",
            expected=expected,
            got=got if type(got) is int else None,
        )

    def _expect(self, got: Any, expected: int, message: str) -> None:
        """Stop the pull (:class:`PullShiftedError` saying ``message``) unless ``got`` is
        ``expected``: a count the pages must keep while the result set holds still."""
        if got != expected:
            raise self._shifted(message, expected=expected, got=got)

    def _check_rows(self, page: int, rows: int, last_page: int, page_size: int, total: int) -> None:
        """A page holds ``page_size`` records, the last one the rest of ``total_count``: fewer
        means records moved to a page already served (lost), more means pages overlap."""
        want = page_size if page < last_page else total - (last_page - 1) * page_size
        self._expect(
            rows,
            want,
            f"page {page} of {last_page} has {rows} records where total_count {total} at "
            f"page_size {page_size} means {want}",
        )

    def _check_unique(self, records: list[Any], page: int) -> None:
        """No record key twice in one pull (parsed records with ``unique_key`` only).

        The keys go into a :class:`~affiliate_network.helpers.seen_keys.SeenKeys`, exact at 4 bytes
        per key: a Python set kept every id string alive, about 120 bytes a record (1 GB of RSS
        for a 5,000,000-row pull)."""
        key = self._unique_key
        if key is None:
            return
        values = []
        for record in records:
            value = record.get(key)
            if value is None:
                continue
            if not isinstance(value, str | int):
                value = repr(value)  # a malformed id still compares, and never fails to hash
            values.append(value)
        if self._seen is None:
            from affiliate_network.helpers.seen_keys import SeenKeys

            self._seen = SeenKeys()
        fresh = self._seen.add_many(values)
        if not all(fresh):
            value = values[fresh.index(False)]
            distinct = len(self._seen)
            raise self._shifted(
                f"page {page} repeats {key} {str(value)[:40]!r} of an earlier record "
                f"({distinct} distinct so far)",
                expected=distinct + 1,
                got=distinct,
            )

    def _later_page(
        self,
        raw: RawPage,
        page: int,
        last_page: int,
        page_size: int,
        total: int,
        previous: tuple[int, int],
    ) -> tuple[list[Any], tuple[int, int]]:
        """A page after the first, parsed and checked against the pull so far."""
        self.stats.requests += 1
        self.stats.retries += raw.retries
        records, paging = self._parse(raw, page)
        digest = (len(raw.content), hash(raw.content))
        if digest == previous:
            # Two pages byte for byte alike: the server ignores ``page`` (or a proxy
            # cached page 1). Going on would land the same rows again and again.
            raise AffiliateNetworkError(
                f"{self._label}: page {page} is identical to page {page - 1}; the "
                "server ignores the page parameter, so the pull stops here"
            )
        later_total = paging.get("total_count")
        # A conversion arrived (or left) after page 1: every page behind the change is
        # shifted, so rows were skipped or served twice even if the counts add up.
        self._expect(
            later_total,
            total,
            f"total_count changed from {total} at page 1 to {str(later_total)[:40]} at "
            f"page {page} of {last_page}",
        )
        self._check_rows(page, self._count(records), last_page, page_size, total)
        self._check_unique(records, page)
        return records, digest

    def _generate(self) -> Generator[Any, None, None]:
        started = self._clock()
        stats = self.stats
        prefetch: _Prefetcher | None = None
        finished = False
        try:
            records, total, page_size, last_page, previous = self._first_page(started)
            yield from records
            del records
            prefetch = _Prefetcher(
                self._fetch, concurrency=self._concurrency, page_size=page_size, last=last_page
            )
            while (item := prefetch.next_page()) is not None:
                page, raw = item
                del item
                records, previous = self._later_page(
                    raw, page, last_page, page_size, total, previous
                )
                del raw
                stats.pages += 1
                stats.rows += self._count(records)
                stats.elapsed_s = self._clock() - started
                self._progress(started, last_page)
                yield from records
                del records
            finished = True
        finally:
            self._cancel.set()
            if prefetch is not None:
                prefetch.shutdown()
            if self._seen is not None:
                self._seen.close()  # its spill files go now, not at garbage collection
                self._seen = None
            stats.elapsed_s = self._clock() - started
            self._log_end(finished)


#: ``fetch(start, end, page, page_size) -> RawPage``: page ``page`` of the records whose
#: timestamps lie in ``[start, end)`` (unix seconds); raises an ``AffiliateNetworkError``.
SliceFetcher = Callable[[int, int, int, int], RawPage]


class _Split:
    """A slice that was split: its ``total_count`` and what its parts have reported so far."""

    __slots__ = ("end", "limit", "reported", "start", "total")

    def __init__(self, start: int, end: int, total: int, capacity: int) -> None:
        self.start = start
        self.end = end
        self.total = total
        allowance = min(total - 1, max(int(total * SPLIT_ARRIVALS), capacity))
        self.limit = total + max(0, allowance)
        self.reported = 0


class _Slot:
    """One slice ``[start, end)`` of the window and, once requested, its answer.

    :param split: the split slice this one is a part of (``None``: the whole window).
    """

    __slots__ = ("counted", "end", "future", "split", "start")

    def __init__(self, start: int, end: int, split: _Split | None = None) -> None:
        self.start = start
        self.end = end
        self.split = split
        self.counted = False  # its total_count was added to ``split.reported``
        self.future: Future[RawPage] | None = None


class _Paging(msgspec.Struct):
    """Only the ``paging`` member of an answer (the records are skipped, not decoded)."""

    paging: dict[str, Any]


_paging_decoder = msgspec.json.Decoder(_Paging)


def _peek_total(content: bytes) -> int | None:
    """``paging.total_count`` of an unparsed answer, or ``None`` when it has none that is a
    whole number (the answer's own parse, later, says what is wrong with it)."""
    try:
        total = _paging_decoder.decode(content).paging.get("total_count")
    except msgspec.DecodeError:  # ValidationError is a subclass
        return None
    return total if type(total) is int and total >= 0 else None


def _utc(unix: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(unix))


class SlicedPull(PagedIterator):
    """Records of a time window, read as slices each answered whole by one request.

    The protocol and what it guarantees are in the module docstring: a slice is served only
    when its single answer holds every record of it (``rows == total_count``); a fuller slice is
    split by time and re-read; a single second fuller than a page is paged with the checks of
    :class:`PagedIterator`. Slices are yielded in time order whatever the concurrency, so the
    same window gives the same sequence.

    :param fetch: fetches one page of one slice (runs on worker threads; thread-safe).
    :param window: ``(start, end)``: unix seconds, ``start`` inclusive, ``end`` exclusive.
    :param key: name of the record list in the response.
    :param page_size: requested rows per answer: the most a slice may hold to be served.
    :param concurrency: worker threads, and slices requested at most at once.
    :param label: what is being pulled, for the log lines and errors.
    :param log: logger of the owning hook.
    :param cancel: set when the pull stops, so a fetcher waiting to retry gives up.
    :param raw: yield one :class:`Page` per served slice instead of records.
    :param progress_every_s: log a progress line at most this often.
    :param clock: monotonic clock (tests inject one).
    :param unique_key: record field that must not repeat within the pull (parsed records):
        a repeat means a record moved between slices (its timestamp changed) and the pull stops.
    """

    def __init__(
        self,
        fetch: SliceFetcher,
        *,
        window: tuple[int, int],
        key: str,
        page_size: int,
        concurrency: int,
        label: str,
        log: TaskLog,
        cancel: threading.Event | None = None,
        raw: bool = False,
        progress_every_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        unique_key: str | None = None,
    ) -> None:
        start, end = int(window[0]), int(window[1])
        if end <= start:
            raise ValueError(f"the window must end after it starts, got [{start}, {end})")
        super().__init__(
            lambda page, size: fetch(start, end, page, size),
            key=key,
            page_size=page_size,
            concurrency=concurrency,
            label=label,
            log=log,
            cancel=cancel,
            raw=raw,
            progress_every_s=progress_every_s,
            clock=clock,
            unique_key=unique_key,
        )
        self._fetch_slice = fetch
        self._window = (start, end)
        self._covered = 0  # seconds of the window served so far (progress)

    def _span(self, slot: _Slot) -> str:
        return f"slice {_utc(slot.start)}..{_utc(slot.end - 1)} UTC"

    def _submit(self, pending: deque[_Slot], executor: ThreadPoolExecutor, inflight: int) -> int:
        """Request the first slices not yet requested, up to ``concurrency`` in flight. The
        caller has just taken one answer, so the first slice always gets its request."""
        for slot in pending:
            if inflight >= self._concurrency:
                break
            if slot.future is None:
                slot.future = executor.submit(
                    self._fetch_slice, slot.start, slot.end, 1, self._page_size
                )
                inflight += 1
        return inflight

    def _parts(self, slot: _Slot, total: int, capacity: int) -> list[_Slot]:
        """``slot`` cut into equal parts planned to fill :data:`SLICE_FILL` of a page each."""
        width = slot.end - slot.start
        parts = min(width, max(2, math.ceil(total / max(1.0, SLICE_FILL * capacity))))
        cuts = [slot.start + width * i // parts for i in range(parts + 1)]
        split = _Split(slot.start, slot.end, total, capacity)
        return [_Slot(a, b, split) for a, b in itertools.pairwise(cuts) if b > a]

    def _count_part(self, slot: _Slot, total: int) -> None:
        """Add a part's ``total_count`` to its split slice's: together the parts hold the
        slice's records (plus arrivals), never much more; more means the network answers
        every part with more than the part's time range (it ignores ``from``/``to``)."""
        split = slot.split
        if split is None or slot.counted:
            return
        slot.counted = True
        split.reported += total
        if split.reported > split.limit:
            raise AffiliateNetworkError(
                f"{self._label}: the parts of slice {_utc(split.start)}..{_utc(split.end - 1)} "
                f"UTC report {split.reported} records so far where the slice itself held "
                f"{split.total} (at most {split.limit} with arrivals); the network does not "
                "narrow the answer to the slice's from/to, so the pull stops here instead of "
                "splitting further"
            )

    def _count_siblings(self, slot: _Slot, pending: deque[_Slot]) -> None:
        """Before a part is split or paged, count the answers of its sibling parts already
        requested (waiting for them: they are in flight anyway). A network that ignores
        ``from``/``to`` is so stopped at the first split it fails, before any part's own
        split (which would multiply the requests at every level) or paging."""
        if slot.split is None:
            return
        for sibling in pending:
            if sibling.split is not slot.split or sibling.future is None:
                break  # the parts are contiguous, and requested in order
            total = _peek_total(sibling.future.result().content)
            if total is not None:
                self._count_part(sibling, total)

    def _progress_slices(self, started: float) -> None:
        now = self._clock()
        if now - max(started, self._last_progress) < self._progress_every_s:
            return
        self._last_progress = now
        st = self.stats
        elapsed = max(now - started, 1e-9)
        width = self._window[1] - self._window[0]
        share = self._covered / width
        eta = f"{elapsed * (1 - share) / share:.0f}s" if 0 < share < 1 else "-"
        self._log.info(
            "%s: %d slices served (%d split), %d rows, %.0f%% of the window, %.0f rows/s, ETA %s",
            self._label,
            st.slices,
            st.splits,
            st.rows,
            100 * share,
            st.rows / elapsed,
            eta,
        )

    def _log_end(self, finished: bool) -> None:
        st = self.stats
        if not finished:
            # As the paged pull: the error that stopped it counts its own attempts.
            self._log.info(
                "%s: stopped after %d rows in %d slices (%d requests) in %.2fs",
                self._label,
                st.rows,
                st.slices,
                st.requests,
                st.elapsed_s,
            )
            return
        self._log.info(
            "%s: %s %d rows in %d slices (%d requests: %d split, %d seconds paged), %d "
            "retries in %.2fs",
            self._label,
            "pulled",
            st.rows,
            st.slices,
            st.requests,
            st.splits,
            st.paged_seconds,
            st.retries,
            st.elapsed_s,
        )

    def _page_second(self, slot: _Slot) -> Generator[Any, None, None]:
        """One second holding more than a page: paged with the offset checks (a shift there
        stops the pull with :class:`PullShiftedError`, and the caller pulls again)."""
        stats = self.stats
        stats.paged_seconds += 1
        self._log.warning(
            "%s: %s holds more than %d records; paged with count checks",
            self._label,
            self._span(slot),
            self._page_size,
        )
        second = PagedIterator(
            lambda page, size: self._fetch_slice(slot.start, slot.end, page, size),
            key=self._key,
            page_size=self._page_size,
            concurrency=self._concurrency,
            label=f"{self._label}, {self._span(slot)}",
            log=self._log,
            raw=self._raw,
            progress_every_s=self._progress_every_s,
            clock=self._clock,
        )
        with second:
            for item in second:
                if not self._raw:
                    self._check_unique([item], stats.requests + second.stats.requests)
                yield item
        sub = second.stats
        stats.requests += sub.requests
        stats.retries += sub.retries
        stats.pages += sub.pages
        stats.rows += sub.rows
        stats.total_count = (stats.total_count or 0) + (sub.total_count or 0)

    def _generate(self) -> Generator[Any, None, None]:
        started = self._clock()
        stats = self.stats
        stats.total_count = 0
        pending: deque[_Slot] = deque([_Slot(*self._window)])
        executor = ThreadPoolExecutor(
            max_workers=self._concurrency, thread_name_prefix="affiliate-network-slice"
        )
        pin_mmap_threshold()  # worker-read answers must not pile up in arenas
        inflight = 0
        finished = False
        try:
            while pending:
                inflight = self._submit(pending, executor, inflight)
                slot = pending.popleft()
                assert slot.future is not None
                raw = slot.future.result()
                slot.future = None  # a done future keeps its result (the raw answer) alive
                inflight -= 1
                stats.requests += 1
                stats.retries += raw.retries
                number = stats.pages + 1  # a served answer is the pull's next page
                records, paging = self._parse(raw, number)
                del raw
                total = self._paging_int(paging, "total_count", number, minimum=0)
                if total is None:
                    raise AffiliateNetworkError(
                        f"{self._label}: the answer for {self._span(slot)} has no "
                        "paging.total_count, so it cannot show that it holds the whole slice"
                    )
                self._count_part(slot, total)
                rows = self._count(records)
                if rows > total:
                    raise self._shifted(
                        f"the answer for {self._span(slot)} holds {rows} records where its "
                        f"total_count says {total}",
                        expected=total,
                        got=rows,
                    )
                if rows < total:
                    # More than one answer holds: drop it, read smaller slices instead.
                    del records
                    served = self._paging_int(paging, "page_size", number, minimum=1)
                    capacity = min(self._page_size, served or self._page_size)
                    if 0 < rows < capacity:
                        capacity = rows  # the endpoint serves fewer per page than asked
                    self._plausible_pages(total, capacity)  # junk: refused before any split
                    self._count_siblings(slot, pending)
                    if slot.end - slot.start > 1:
                        stats.splits += 1
                        pending.extendleft(reversed(self._parts(slot, total, capacity)))
                        continue
                    yield from self._page_second(slot)
                    self._covered += 1
                    continue
                self._check_unique(records, number)
                stats.pages += 1
                stats.slices += 1
                stats.rows += rows
                stats.total_count += total
                self._covered += slot.end - slot.start
                stats.elapsed_s = self._clock() - started
                self._progress_slices(started)
                yield from records
                del records
            finished = True
        finally:
            self._cancel.set()
            for slot in pending:
                if slot.future is not None:
                    slot.future.cancel()
            executor.shutdown(wait=False, cancel_futures=True)
            if self._seen is not None:
                self._seen.close()
                self._seen = None
            stats.elapsed_s = self._clock() - started
            self._log_end(finished)


class _Prefetcher:
    """Pages 2..``last`` fetched on worker threads, at most ``concurrency`` outstanding.

    Each page is handed over by a plain method call (never held in a generator frame), so the
    raw bytes of a page live only as long as its consumer keeps them.
    """

    def __init__(self, fetch: PageFetcher, *, concurrency: int, page_size: int, last: int) -> None:
        self._fetch = fetch
        self._page_size = page_size
        self._last = last
        self._next = 2
        self._window: deque[tuple[int, Future[RawPage]]] = deque()
        self._executor: ThreadPoolExecutor | None = None
        if last >= 2:
            pin_mmap_threshold()  # worker-read page buffers must not pile up in arenas
            self._executor = ThreadPoolExecutor(
                max_workers=min(concurrency, last - 1),
                thread_name_prefix="affiliate-network-page",
            )
        while self._next <= last and len(self._window) < concurrency:
            self._submit()

    def _submit(self) -> None:
        assert self._executor is not None
        future = self._executor.submit(self._fetch, self._next, self._page_size)
        self._window.append((self._next, future))
        self._next += 1

    def next_page(self) -> tuple[int, RawPage] | None:
        """The next page in order (waiting for it), or None after the last."""
        if not self._window:
            return None
        page, future = self._window.popleft()
        raw = future.result()
        del future  # a done future keeps its result (the raw page) alive
        # Refill the window before the page is parsed so the workers never idle on us.
        if self._next <= self._last:
            self._submit()
        return page, raw

    def shutdown(self) -> None:
        """Cancel the pages not yet fetched and let the workers go."""
        for _, future in self._window:
            future.cancel()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)


@functools.cache
def page_decoder(key: str) -> Any:
    """msgspec decoder of a page: ``key`` as a list of record spans (each record's JSON text,
    validated but not parsed into objects) and ``paging`` as a dict; other members ignored.
    """
    envelope = msgspec.defstruct("Envelope", [(key, list[msgspec.Raw]), ("paging", dict[str, Any])])
    return msgspec.json.Decoder(envelope)
