"""Paging from the query string only (GET and POST alike); body paging is ignored."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from affiliate_network_sandbox import choices
from affiliate_network_sandbox.errors import invalid

if TYPE_CHECKING:
    from affiliate_network_sandbox.world.base import Raw

_TOTAL_COUNT = re.compile(rb'"total_count":(\d+)')


def parse_paging(
    query: dict[str, str], max_page_size: int = choices.MAX_PAGE_SIZE
) -> tuple[int, int]:
    """``(page, page_size)`` from the query string; 400 when malformed or out of range."""
    page = _int(query.get("page"), choices.DEFAULT_PAGE)
    size = _int(query.get("page_size"), choices.DEFAULT_PAGE_SIZE)
    if page < 1 or size < 1 or size > max_page_size:
        raise invalid(f"page must be >= 1 and page_size between 1 and {max_page_size}")
    return page, size


def envelope(page: int, page_size: int, total: int) -> dict[str, int]:
    return {"page": page, "page_size": page_size, "total_count": total}


def slice_list(items: list[Any], page: int, page_size: int) -> list[Any]:
    start = (page - 1) * page_size
    return items[start : start + page_size]


def _int(raw: str | None, default: int) -> int:
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise invalid("page and page_size must be integers") from None


def hold_back(raw: Raw, count: int, *, page_size: int, after_page: int) -> Raw:
    """A rendered report page answered as if ``count`` records sorting right behind page
    ``after_page`` had not arrived yet (fault injection, sandbox/faults.py): pages up to
    ``after_page`` hold the same records then, only ``total_count`` is ``count`` lower. A
    window too small to hold ``after_page`` full pages before them is left as it is."""
    if count <= 0:
        return raw
    tail = raw.chunks[-1]
    found = _TOTAL_COUNT.search(tail)
    if found is None:
        return raw
    before = int(found.group(1)) - count
    if before < after_page * page_size:
        return raw
    raw.chunks[-1] = tail[: found.start(1)] + str(before).encode() + tail[found.end(1) :]
    return raw
