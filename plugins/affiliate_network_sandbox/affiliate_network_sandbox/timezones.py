"""The API's timezone ids (``timezone_id`` -> IANA zone), as the sandbox serves them.

The sandbox's own copy of the documented table (``GET /v1/meta/timezones``; the public reference
pages "Timezones"), in its data file ``timezones.tsv``, so the sandbox distribution needs
nothing of the provider. It is spec data:
``tests/sandbox/test_timezones_table.py`` keeps it equal to the provider's
``affiliate_network.api.timezones.TIMEZONES``, which the client reads.
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib.resources import files
from typing import Any

#: timezone_id -> IANA name, as published by the API (1..99): read from ``timezones.tsv``, the
#: sandbox's data file (a service serves this table from its own store).
TIMEZONES: dict[int, str] = {
    int(tz_id): name
    for tz_id, name in (
        line.split("\t")
        for line in (files(__package__) / "timezones.tsv").read_text("utf-8").splitlines()
        if line and not line.startswith("#")
    )
}


def as_api_records(ids: Iterable[int] | None = None) -> list[dict[str, Any]]:
    """The table in the documented ``GET /meta/timezones`` record shape (current offsets)."""
    import datetime as dt
    import zoneinfo

    now = dt.datetime.now(dt.UTC)
    out: list[dict[str, Any]] = []
    for tz_id in sorted(ids if ids is not None else TIMEZONES):
        name = TIMEZONES[tz_id]
        offset = now.astimezone(zoneinfo.ZoneInfo(name)).utcoffset() or dt.timedelta(0)
        minutes = int(offset.total_seconds() // 60)
        sign = "+" if minutes >= 0 else "-"
        hh, mm = divmod(abs(minutes), 60)
        out.append(
            {
                "timezone_id": tz_id,
                "timezone": name,
                "timezone_name": name if name == "UTC" else f"({name})",
                "utc_offset": f"{sign}{hh:02d}:{mm:02d}",
            }
        )
    return out
