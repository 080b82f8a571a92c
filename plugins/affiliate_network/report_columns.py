"""Group columns of the affiliate entity table, and the request rule the hook and the report
schema share (spec, "Aggregated reporting": 1 to 10 columns, at most one time column).

No imports: the hook (below the job libraries) and ``reports/schema.py`` both read it.
"""

from __future__ import annotations

from collections.abc import Sequence

#: Group columns the entity table accepts ("not shown" in the spec; the sandbox documents them).
REPORT_COLUMNS: tuple[str, ...] = (
    "offer",
    "advertiser",
    "country",
    "platform",
    "device_type",
    *(f"sub{i}" for i in range(1, 6)),
)
#: Time columns; a request may hold at most one.
TIME_COLUMNS: tuple[str, ...] = ("hour", "date", "week", "month", "year")
MAX_REPORT_COLUMNS = 10


def column_count_problem(names: Sequence[str]) -> str | None:
    """What breaks the entity table's column rule in ``names``, or ``None`` when it holds.

    :param names: requested column names, in order.
    """
    if not 1 <= len(names) <= MAX_REPORT_COLUMNS:
        return f"{len(names)} columns given, the entity table takes 1 to {MAX_REPORT_COLUMNS}"
    times = [n for n in names if n in TIME_COLUMNS]
    if len(times) > 1:
        return f"at most one time column ({'/'.join(TIME_COLUMNS)}), got {times}"
    return None
