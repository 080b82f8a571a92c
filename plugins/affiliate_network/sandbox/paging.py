"""Paging from the query string only (GET and POST alike); body paging is ignored."""

from __future__ import annotations

from typing import Any

from affiliate_network.sandbox import choices
from affiliate_network.sandbox.errors import invalid


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
