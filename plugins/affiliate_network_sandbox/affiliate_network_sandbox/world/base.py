"""The parts of a world every resource area uses: state, request pieces, the overlay.

A world = one network (default region or EU): catalog, generator and write overlay. The
endpoint logic lives in one module per resource area beside this one; HTTP concerns (routing,
auth, faults, rate limit) live in :mod:`affiliate_network_sandbox.app`.
"""

from collections import OrderedDict
from typing import Any

from affiliate_network_sandbox import choices
from affiliate_network_sandbox import validate as v
from affiliate_network_sandbox.clock import SandboxClock
from affiliate_network_sandbox.config import DataConfig
from affiliate_network_sandbox.data import (
    DEV_FRAGS,
    GEO_FRAGS,
    KIND_CONVERSION,
    KIND_EVENT,
    Generator,
)
from affiliate_network_sandbox.entities import (
    Catalog,
)
from affiliate_network_sandbox.errors import invalid
from affiliate_network_sandbox.ids import derive
from affiliate_network_sandbox.reporting_window import HISTORY_DAYS, resolve_timezone, utc_window
from affiliate_network_sandbox.state import State

EU_SEED_OFFSET = 1_000_003
SCRUB_RATE_BASE = 6000


class Raw:
    """A JSON response already rendered as byte chunks (sent without re-encoding).

    :param chunks: the rendered answer.
    :param rows: records in the answer, when it is a report page (the request log shows it).
    """

    __slots__ = ("chunks", "rows")

    def __init__(self, chunks: list[bytes], rows: int | None = None) -> None:
        self.chunks = chunks
        self.rows = rows


class WorldBase:
    """One network's data: configuration, catalog, generator, write overlay, shared helpers.

    :param cfg: data configuration.
    :param region: ``default`` or ``eu``.
    :param clock: the sandbox's clock (reads stop at it, writes are stamped with it); default
        a wall clock of its own.
    """

    def __init__(self, cfg: DataConfig, region: str, clock: SandboxClock | None = None) -> None:
        self.cfg = cfg
        self.region = region
        self.clock = clock or SandboxClock()
        self.seed = cfg.seed if region == "default" else cfg.seed + EU_SEED_OFFSET
        self.network_id = choices.NETWORK_ID if region == "default" else choices.EU_NETWORK_ID
        self.catalog = Catalog(cfg, self.seed, self.network_id)
        self.state = State()
        self.gen = Generator(cfg, self.seed, self.catalog, self.state, self.clock.visible_end)
        self.encode_key = derive(self.network_id, "encode")
        self._scan_cache: OrderedDict[tuple[Any, ...], list[tuple[int, int]]] = OrderedDict()
        self._truth_cache: OrderedDict[tuple[Any, ...], dict[str, Any]] = OrderedDict()

    # ============================================================================================
    # Common request pieces
    # ============================================================================================

    def now(self) -> int:
        """The sandbox clock's instant in whole seconds (the time stamped on writes)."""
        return int(self.clock.now())

    def timezone(self, body: dict[str, Any]) -> tuple[int, str]:
        """The request's ``timezone_id`` and zone; omitted: the network's reporting timezone."""
        return resolve_timezone(body, self.cfg.reporting_timezone_id)

    @staticmethod
    def currency(body: dict[str, Any]) -> str:
        cur = body.get("currency_id") or choices.DEFAULT_CURRENCY
        if cur not in choices.CURRENCY_RATES:
            raise invalid("unknown currency_id")
        return cur

    def window(self, body: dict[str, Any], kind: str = "conversions") -> tuple[int, int]:
        """UTC ``[t0, t1)`` of a report request (see :mod:`.reporting_window`).

        :param kind: ``conversions`` (both date forms, 365-day history), ``aggregate`` (dates,
            one year of range) or ``admin`` (the truth endpoints: both forms, no limit).
        """
        t0, t1 = utc_window(
            body,
            self.cfg.reporting_timezone_id,
            self.cfg.end_date,
            allow_time=kind != "aggregate",
            history_days=HISTORY_DAYS if kind == "conversions" else None,
        )
        # Nothing later than the sandbox's clock exists yet. Cut here (not only in the
        # generator) so the scan and truth caches key on the window actually served.
        return t0, max(t0, min(t1, self.clock.visible_end()))

    @staticmethod
    def filters(raw: Any, allowed: dict[str, str]) -> dict[str, set[str]]:
        """``query.filters`` items -> {resource_type: {values}} (AND across, OR within)."""
        if raw is None:
            return {}
        if not isinstance(raw, list):
            raise invalid("query.filters must be a list")
        out: dict[str, set[str]] = {}
        for item in raw:
            if not isinstance(item, dict):
                raise invalid("filter items must be objects")
            rtype = item.get("resource_type")
            value = item.get("filter_id_value")
            if rtype not in allowed:
                raise invalid(f"unknown filter resource_type {rtype!r}")
            if v.is_int(value):
                value = str(value)
            if not isinstance(value, str):
                raise invalid("filter_id_value must be a string")
            out.setdefault(rtype, set()).add(value)
        return out

    # ============================================================================================
    # Fast per-record attributes (no record built): used by filters, truth and aggregation
    # ============================================================================================

    def quick(self, kind: int, c: Any, idx: int) -> dict[str, str]:
        gen = self.gen
        i = idx if kind == KIND_CONVERSION else (idx * c.n) // c.e
        u, _ts, _pattern, oh = gen.core(c, i)
        t = gen.pair((u >> 16) % gen.pairs)
        geo = GEO_FRAGS[(u >> 32) % 20]
        dev = DEV_FRAGS[(u >> 40) % 10]
        return {
            "offer": str(t.oid),
            "affiliate": str(t.fid),
            "advertiser": str(t.adv_id),
            "offer_group": str(t.group_id),
            "status": self.status_of(kind, c, i, oh),
            "country": geo["country"],
            "platform": dev["platform"],
            "device_type": dev["device_type"],
        }

    def status_of(self, kind: int, c: Any, i: int, oh: bool) -> str:
        if kind == KIND_EVENT or not oh:
            return choices.STATUS_APPROVED
        extra = self.state.onhold.get(c.vbase | i) if self.state.onhold else None
        return extra[-1]["status"] if extra else choices.STATUS_PENDING

    # ============================================================================================
    # Catalog objects with the overlay
    # ============================================================================================

    def _objects(self, kind: str) -> dict[int, dict[str, Any]]:
        return self.state.objects[kind]

    def advertiser(self, aid: int) -> dict[str, Any]:
        return self.catalog.advertisers[aid]

    def offer_fields(self, oid: int) -> dict[str, Any] | None:
        return self._objects("offers").get(oid) or self.catalog.offers.get(oid)

    def offer_group_fields(self, gid: int) -> dict[str, Any] | None:
        return self._objects("offer_groups").get(gid) or self.catalog.offer_groups.get(gid)

    def offer_url(self, uid: int) -> dict[str, Any] | None:
        return self._objects("offer_urls").get(uid) or self.catalog.offer_urls.get(uid)

    def channel(self, cid: int) -> dict[str, Any] | None:
        return self._objects("channels").get(cid) or self.catalog.channels.get(cid)

    def assignments(self) -> dict[int, dict[str, Any]]:
        merged = dict(self.catalog.assignments)
        merged.update(self._objects("tracking_domains"))
        return merged


def _find_terms(raw: Any, fields: tuple[str, ...]) -> list[tuple[str, str]]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise invalid("search_terms must be a list")
    out = []
    for item in raw:
        if not isinstance(item, dict):
            raise invalid("search term items must be objects")
        stype, value = item.get("search_type"), item.get("value")
        if stype not in fields or not isinstance(value, str):
            raise invalid(f"unknown search_type {stype!r}")
        out.append((stype, value))
    return out


def _ruleset(nid: int) -> dict[str, Any]:
    lists = [
        "platforms",
        "device_types",
        "os_versions",
        "browsers",
        "languages",
        "countries",
        "regions",
        "cities",
        "dmas",
        "mobile_carriers",
        "connection_types",
        "ips",
        "isps",
        "brands",
        "postal_codes",
        "days_parting",
    ]
    return {
        "network_id": nid,
        "network_ruleset_id": 0,
        "time_created": 0,
        "time_saved": 0,
        **{name: [] for name in lists},
        "is_block_proxy": False,
        "is_use_day_parting": False,
        "day_parting_apply_to": "",
        "day_parting_timezone_id": 0,
    }
