"""The current rows of given on-hold conversions, searched by on-hold id: one helper, two callers.

The writer re-checks ids right before a PATCH and reads them back after it
(:class:`~affiliate_network.review.apply.OnHoldWriter`), and the traffic snapshot refreshes the
rows it holds on hold (:mod:`affiliate_network.review.traffic`). Both ask the conversion report
the same way: one ``{"search_type": "on_hold_conversion_id", "value": id}`` term per id,
``chunk_size`` ids per request, one page as large as the chunk (an exact id search answers at
most one conversion per id, so a chunk costs one request).

That search type is the sandbox's and the product's, but not in the public docs, so the real
service may refuse it (400, :class:`~affiliate_network.exceptions.InvalidRequestError`) or ignore
it (answering the whole window). What to do then is each caller's decision, so this module only
reports it: a 400 propagates, and every row says whether its on-hold id was asked for in that
request (:attr:`OnHoldRow.asked`), so a caller can stop at the first stray row instead of paging
through the window (the traffic snapshot falls back to a full pull; the writer ignores strays).

Why here and not on the hook: the hook is HTTP only, one method per endpoint, and may not import
a job library (``docs/architecture.md``); this composes several requests and reads the on-hold id
out of a record with :mod:`affiliate_network.rules.fields`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Generator, Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from affiliate_network.rules.fields import on_hold_conversion_id

if TYPE_CHECKING:
    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook

__all__ = ["SEARCH_TYPE", "OnHoldRow", "chunked", "iter_on_hold_rows"]

#: The conversion report's search type for an on-hold id (not in the public docs).
SEARCH_TYPE = "on_hold_conversion_id"

_T = TypeVar("_T")


def chunked(items: Sequence[_T], size: int) -> Iterator[list[_T]]:
    """``items`` in order, ``size`` at a time (the last chunk may be shorter).

    :param items: what to split.
    :param size: items per chunk (at least 1).
    """
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


class OnHoldRow(NamedTuple):
    """One conversion the search by on-hold id answered.

    :param on_hold_id: the record's on-hold id (``None`` when it carries none).
    :param record: the conversion record as the API returned it.
    :param asked: the id was among those of the request that returned it (``False``: the
        service ignored or widened the search).
    """

    on_hold_id: str | None
    record: dict[str, Any]
    asked: bool


def iter_on_hold_rows(
    hook: AffiliateNetworkHook,
    on_hold_ids: Sequence[str],
    *,
    from_date: dt.date,
    to_date: dt.date,
    timezone_id: int,
    chunk_size: int,
) -> Generator[OnHoldRow]:
    """Every conversion the search by on-hold id returns, chunk by chunk, in request order.

    An id the search does not return yields nothing (the caller sees it missing). Closing the
    iterator early (a caller that stops at a stray row) closes the pull in flight, cancelling
    the pages not fetched yet.

    :param hook: the network hook.
    :param on_hold_ids: the on-hold ids to look up (each chunk is sent as given).
    :param from_date: first local day of the window searched.
    :param to_date: last local day of that window (inclusive).
    :param timezone_id: the API's timezone id of those days.
    :param chunk_size: ids per request; also the page size, so at most 2000.
    :raises InvalidRequestError: the network refused the search (or the chunk size).
    """
    for chunk in chunked(on_hold_ids, chunk_size):
        asked = set(chunk)
        pages = hook.iter_conversions(
            from_date=from_date,
            to_date=to_date,
            timezone_id=timezone_id,
            show_conversions=True,
            show_events=False,
            search_terms=[{"search_type": SEARCH_TYPE, "value": i} for i in chunk],
            page_size=len(chunk),
        )
        with pages:
            for record in pages:
                oh_id = on_hold_conversion_id(record)
                yield OnHoldRow(oh_id, record, oh_id in asked)
