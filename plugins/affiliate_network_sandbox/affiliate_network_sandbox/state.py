"""The write overlay of a world: the only data the sandbox stores.

Generated records and catalog objects are never modified; reads merge this overlay in.
"""

from __future__ import annotations

from typing import Any


class State:
    """Changes made by write endpoints since the last reset.

    ``onhold`` maps an on-hold conversion's encoded value to the snapshots appended by PATCHes
    (the last one is the current on-hold status); ``sale`` maps ``(kind, value)`` to the
    ``sale_amount`` snapshots of corrections (last one current); ``objects`` holds replaced or
    created objects per kind, keyed by id.
    """

    KINDS = (
        "offer_groups",
        "offers",
        "custom_scrub_rates",
        "channels",
        "categories",
        "tracking_domains",
        "offer_urls",
    )

    def __init__(self) -> None:
        self.onhold: dict[int, list[dict[str, Any]]] = {}
        self.sale: dict[tuple[int, int], list[dict[str, Any]]] = {}
        self.objects: dict[str, dict[int, dict[str, Any]]] = {k: {} for k in self.KINDS}
        self.next_ids: dict[str, int] = {}
        #: Bumped on every write; caches of filtered scans key on it.
        self.version = 0
        self.snapshot_seq = 0

    def new_id(self, kind: str, start: int) -> int:
        value = self.next_ids.get(kind, start)
        self.next_ids[kind] = value + 1
        return value

    def touch(self) -> None:
        self.version += 1
