"""The API's timezone ids (``timezone_id`` -> IANA zone), as the sandbox serves them.

The sandbox's own copy of the documented table (``GET /v1/meta/timezones``; the public reference
pages "Timezones"), so the sandbox distribution needs nothing of the provider. It is spec data:
``tests/sandbox/test_timezones_table.py`` keeps it equal to the provider's
``affiliate_network.timezones.TIMEZONES``, which the client reads.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

#: timezone_id -> IANA name, as published by the API (1..99).
TIMEZONES: dict[int, str] = {
    1: "Pacific/Kiritimati",
    2: "Pacific/Enderbury",
    3: "Pacific/Tongatapu",
    4: "Pacific/Chatham",
    5: "Pacific/Auckland",
    6: "Pacific/Fiji",
    7: "Asia/Kamchatka",
    8: "Pacific/Norfolk",
    9: "Australia/Lord_Howe",
    10: "Pacific/Guadalcanal",
    11: "Australia/Adelaide",
    12: "Australia/Sydney",
    13: "Australia/Brisbane",
    14: "Australia/Darwin",
    15: "Asia/Seoul",
    16: "Asia/Tokyo",
    17: "Asia/Hong_Kong",
    18: "Asia/Kuala_Lumpur",
    19: "Asia/Manila",
    20: "Asia/Shanghai",
    21: "Asia/Singapore",
    22: "Asia/Taipei",
    23: "Australia/Perth",
    24: "Asia/Bangkok",
    25: "Asia/Ho_Chi_Minh",
    26: "Asia/Jakarta",
    27: "Asia/Rangoon",
    28: "Asia/Dhaka",
    29: "Asia/Kathmandu",
    30: "Asia/Colombo",
    31: "Asia/Kolkata",
    32: "Asia/Karachi",
    33: "Asia/Tashkent",
    34: "Asia/Yekaterinburg",
    35: "Asia/Kabul",
    36: "Asia/Baku",
    37: "Asia/Dubai",
    38: "Asia/Tbilisi",
    39: "Asia/Yerevan",
    40: "Asia/Tehran",
    41: "Africa/Nairobi",
    42: "Asia/Baghdad",
    43: "Asia/Kuwait",
    44: "Asia/Riyadh",
    45: "Europe/Minsk",
    46: "Europe/Moscow",
    47: "Africa/Cairo",
    48: "Asia/Beirut",
    49: "Asia/Jerusalem",
    50: "Europe/Athens",
    51: "Europe/Bucharest",
    52: "Europe/Helsinki",
    53: "Europe/Istanbul",
    54: "Africa/Johannesburg",
    55: "Europe/Amsterdam",
    56: "Europe/Berlin",
    57: "Europe/Brussels",
    58: "Europe/Paris",
    59: "Europe/Prague",
    60: "Europe/Rome",
    61: "Europe/Lisbon",
    62: "Africa/Algiers",
    63: "Europe/London",
    64: "Atlantic/Cape_Verde",
    65: "Africa/Casablanca",
    66: "Europe/Dublin",
    67: "UTC",
    68: "America/Scoresbysund",
    69: "Atlantic/Azores",
    70: "Atlantic/South_Georgia",
    71: "America/St_Johns",
    72: "America/Sao_Paulo",
    73: "America/Argentina/Buenos_Aires",
    74: "America/Santiago",
    75: "America/Halifax",
    76: "America/Puerto_Rico",
    77: "Atlantic/Bermuda",
    78: "America/Caracas",
    79: "America/Indiana/Indianapolis",
    80: "America/New_York",
    81: "America/Bogota",
    82: "America/Lima",
    83: "America/Panama",
    84: "America/Mexico_City",
    85: "America/Chicago",
    86: "America/El_Salvador",
    87: "America/Denver",
    88: "America/Mazatlan",
    89: "America/Phoenix",
    90: "America/Los_Angeles",
    91: "America/Tijuana",
    92: "Pacific/Pitcairn",
    93: "America/Anchorage",
    94: "Pacific/Gambier",
    95: "America/Adak",
    96: "Pacific/Marquesas",
    97: "Pacific/Honolulu",
    98: "Pacific/Niue",
    99: "Pacific/Pago_Pago",
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
