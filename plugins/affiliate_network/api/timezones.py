"""The API's timezone ids: ``timezone_id`` -> IANA zone.

The spec does not show which id is which. The public reference of this API family lists them
(``GET /v1/meta/timezones``, fields ``timezone_id``, ``timezone``, ``timezone_name``,
``utc_offset``; reference page "Timezones" and the user guide page "Timezones"). Ids run from 1 to
99, ordered from the east (UTC+14) to the west (UTC-11).

Read directly on those pages: ids 1-16, 67 (UTC), 80 (America/New_York), 85 (America/Chicago),
87 (America/Denver) and 99 (Pacific/Pago_Pago) (:data:`READ_IN_REFERENCE`). The other ids follow
the order of the same published list, which agrees with every id quoted above. The network's own
``GET /meta/timezones`` stays the authority: :meth:`AffiliateNetworkHook.timezones` reads it and
``affiliate-network-sync``/the report operator can compare it with this table
(:func:`compare_with_api`).

This module is data and lookups; its one import is its error class from
:mod:`affiliate_network.exceptions` (which imports nothing): the hook, the settings and the DAGs
read this one table. The sandbox, a distribution of its own, serves a copy
(``affiliate_network_sandbox.timezones``) that a test keeps equal to this one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from affiliate_network.exceptions import UnknownTimezoneError

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

#: Ids quoted verbatim on the public reference pages (the rest follow the same list's order).
READ_IN_REFERENCE: frozenset[int] = frozenset({*range(1, 17), 67, 80, 85, 87, 99})

#: IANA name -> timezone_id (names are unique in the table).
IDS_BY_NAME: dict[str, int] = {name: tz_id for tz_id, name in TIMEZONES.items()}

#: The id of UTC (the documented example: "UTC with an offset of 00:00 has the timezone_id 67").
UTC_ID = 67

# Names people write for UTC; the table spells it "UTC".
_UTC_ALIASES = frozenset({"UTC", "Etc/UTC", "Etc/GMT", "GMT", "Z", "Zulu", "Etc/Zulu"})


def name_for_id(tz_id: int) -> str:
    """IANA name of ``tz_id``; :class:`UnknownTimezoneError` when the API has no such id."""
    if isinstance(tz_id, bool) or not isinstance(tz_id, int) or tz_id not in TIMEZONES:
        raise UnknownTimezoneError(
            f"timezone_id {tz_id!r} is not one of the API's ids (1..{max(TIMEZONES)})"
        )
    return TIMEZONES[tz_id]


def id_for_name(name: str) -> int:
    """The API id of an IANA name (``UTC`` aliases accepted).

    :class:`UnknownTimezoneError` names the closest names when the zone is not in the table.
    """
    if not isinstance(name, str) or not name.strip():
        raise UnknownTimezoneError("the timezone must be an IANA name such as UTC")
    key = name.strip()
    if key in _UTC_ALIASES:
        return UTC_ID
    if key in IDS_BY_NAME:
        return IDS_BY_NAME[key]
    import difflib

    close = difflib.get_close_matches(key, list(IDS_BY_NAME), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise UnknownTimezoneError(
        f"timezone {key!r} is not in the API's timezone table (GET /meta/timezones){hint}"
    )


def compare_with_api(records: Iterable[Mapping[str, Any]]) -> list[str]:
    """Differences between this table and a network's ``GET /meta/timezones`` answer.

    Returns one line per id whose IANA name differs or that only one side has; empty when they
    agree. Used to check a production network before trusting the table.
    """
    theirs: dict[int, str] = {}
    for rec in records:
        tz_id, name = rec.get("timezone_id"), rec.get("timezone")
        if isinstance(tz_id, int) and isinstance(name, str):
            theirs[tz_id] = name
    diffs: list[str] = []
    for tz_id in sorted(set(theirs) | set(TIMEZONES)):
        ours, other = TIMEZONES.get(tz_id), theirs.get(tz_id)
        if ours != other:
            diffs.append(f"timezone_id {tz_id}: table {ours!r}, network {other!r}")
    return diffs
