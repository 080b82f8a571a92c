"""The request log behind ``GET /_sandbox/requests``, with a hard memory bound.

Each entry is stored already rendered as compact JSON bytes, so the log can always be returned
(whatever a client sent) and its size is known exactly. The log keeps the last
:data:`MAX_ENTRIES` requests, and drops the oldest ones while the stored entries exceed
:data:`MAX_BYTES`. A body is kept whole up to :data:`BODY_MAX_BYTES` of JSON; a larger one, or
one nested too deep to re-encode, is replaced by a summary (size, SHA-256, the first bytes).
"""

from __future__ import annotations

import hashlib
from collections import deque
from typing import Any

import orjson

#: Entries kept (the newest ones).
MAX_ENTRIES = 20_000
#: Bytes of rendered entries kept; the oldest entries go first when a new one would exceed it.
MAX_BYTES = 32 * 1024 * 1024
#: A body re-encoded larger than this is logged as a summary.
BODY_MAX_BYTES = 256 * 1024
#: Path characters kept.
PATH_MAX_CHARS = 2048
#: A query string rendered larger than this is logged as a summary.
QUERY_MAX_BYTES = 8 * 1024
#: Characters of the body shown in a summary.
HEAD_CHARS = 200
#: Render the response in pieces of about this size (no second copy of the whole log).
_CHUNK_BYTES = 1024 * 1024


def _summary(raw: bytes, reason: str) -> dict[str, Any]:
    return {
        "_sandbox_summary": reason,
        "bytes": len(raw),
        "sha256": hashlib.sha256(raw).hexdigest(),
        "head": raw[:HEAD_CHARS].decode("utf-8", "replace"),
    }


def body_entry(raw: bytes | None, parsed: Any = None) -> Any:
    """What the log shows for a request body: the JSON value, or a bounded summary.

    :param raw: the body as received; ``None`` when it was never read (the request was refused
        before its body, e.g. 401, 413, 429).
    :param parsed: the body already parsed by the endpoint, if it was; saves a second parse.
    :return: ``None`` (no body), the JSON value, the first characters of a body that is not
        JSON (a string, as before), or a summary dict with the key ``_sandbox_summary``.
    """
    if raw is None or not raw.strip():
        return None
    if len(raw) > BODY_MAX_BYTES * 4:
        # Not even parsed: no JSON re-encoding of this can fit.
        return _summary(raw, "too large")
    if parsed is None:
        try:
            parsed = orjson.loads(raw)
        except orjson.JSONDecodeError:
            if len(raw) > BODY_MAX_BYTES:
                return _summary(raw, "not JSON")
            return raw[:2000].decode("utf-8", "replace")
    try:
        rendered = orjson.dumps(parsed)
    except (orjson.JSONEncodeError, TypeError):
        # orjson encodes at most 254 levels of nesting; a deeper body is summarised.
        return _summary(raw, "nested too deep")
    if len(rendered) > BODY_MAX_BYTES:
        return _summary(raw, "too large")
    return orjson.Fragment(rendered)


class RequestLog:
    """The last requests the API answered, as rendered JSON entries within a byte budget.

    :param max_entries: entries kept.
    :param max_bytes: rendered bytes kept.
    """

    def __init__(self, max_entries: int = MAX_ENTRIES, max_bytes: int = MAX_BYTES) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._entries: deque[bytes] = deque()
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()
        self.nbytes = 0

    def append(
        self,
        *,
        method: str,
        path: str,
        query: dict[str, str],
        status: int,
        portal: str | None,
        region: str,
        body: Any,
        rows: int | None = None,
    ) -> None:
        """Add one entry (``body`` is what :func:`body_entry` returned; ``rows``, the records
        a report page answered, is shown only when given)."""
        query_json = orjson.dumps(query)
        rendered_query: Any = orjson.Fragment(query_json)
        if len(query_json) > QUERY_MAX_BYTES:
            rendered_query = {"_sandbox_summary": "too large", "parameters": len(query)}
        doc = {
            "method": method[:32],
            "path": path[:PATH_MAX_CHARS],
            "query": rendered_query,
            "status": status,
            "portal": portal,
            "region": region,
            "body": body,
        }
        if rows is not None:
            doc["rows"] = rows
        entry = orjson.dumps(doc)
        self._entries.append(entry)
        self.nbytes += len(entry)
        while len(self._entries) > self.max_entries or (
            self.nbytes > self.max_bytes and len(self._entries) > 1
        ):
            self.nbytes -= len(self._entries.popleft())

    def render(self) -> list[bytes]:
        """``{"requests": [...]}`` as byte chunks of about 1 MiB."""
        chunks: list[bytes] = []
        part: list[bytes] = [b'{"requests":[']
        size = 0
        for n, entry in enumerate(self._entries):
            if n:
                part.append(b",")
            part.append(entry)
            size += len(entry)
            if size >= _CHUNK_BYTES:
                chunks.append(b"".join(part))
                part, size = [], 0
        part.append(b"]}")
        chunks.append(b"".join(part))
        return chunks
