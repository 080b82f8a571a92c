"""The sandbox's ASGI application: routing, auth, rate limit, faults, admin endpoints.

A small hand-written router (not Starlette's) so that every pre-endpoint error carries the
spec's ``Error`` spelling and the hot path does no extra work. Responses are orjson-encoded.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import traceback
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

import orjson

from affiliate_network_sandbox import choices
from affiliate_network_sandbox.auth import (
    HEADER,
    HEADER_ALIAS,
    PORTAL_PREFIXES,
    KeyRing,
    Principal,
    require_scope,
)
from affiliate_network_sandbox.clock import SandboxClock
from affiliate_network_sandbox.config import ConfigError, DataConfig
from affiliate_network_sandbox.errors import ApiError, before, invalid, not_found
from affiliate_network_sandbox.faults import FaultConfig, FaultConfigError, Faults
from affiliate_network_sandbox.late_writes import (
    LateWrites,
    LateWritesConfig,
    LateWritesConfigError,
)
from affiliate_network_sandbox.paging import hold_back, parse_paging
from affiliate_network_sandbox.ratelimit import Limiter, build_limiter, retry_after
from affiliate_network_sandbox.requestlog import RequestLog, body_entry
from affiliate_network_sandbox.state import State
from affiliate_network_sandbox.timezones import as_api_records
from affiliate_network_sandbox.world import Raw, World

Handler = Callable[["Call"], Any]
#: Largest request body the API reads (the spec shows no limit; larger ones get 413 unread).
MAX_BODY_BYTES = 4 * 1024 * 1024
#: Largest body of an admin request (data config, fault settings: a few hundred bytes).
ADMIN_MAX_BODY_BYTES = 1024 * 1024
#: Distinct "METHOD path" counters kept; requests to further paths count under one key.
MAX_ROUTE_COUNTERS = 1000
MSG_TOO_LARGE = f"Request body too large (limit {MAX_BODY_BYTES} bytes)"


class BodyTooLargeError(Exception):
    """The request body is larger than the limit (raised before it is read whole)."""


class Route:
    """One API path with its methods.

    :param pattern: path after ``/v1`` with ``{name}`` placeholders.
    :param methods: method -> (handler, needs the ``write`` scope).
    """

    def __init__(self, pattern: str, methods: dict[str, tuple[Handler, bool]]) -> None:
        self.pattern = pattern
        regex = re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", pattern)
        self.regex = re.compile(f"^{regex}$")
        self.methods = methods


def _int_param(raw: str) -> int:
    # A path id that is not an integer names no record: the endpoint's 404.
    try:
        return int(raw)
    except ValueError:
        raise not_found() from None


# --- endpoint handlers (thin: parse, call the world) ---------------------------------------------


@dataclass(frozen=True, slots=True)
class Call:
    """One API request as an endpoint handler sees it.

    :param sb: the sandbox (faults, late writes).
    :param w: the world of the request's region.
    :param p: the authenticated caller.
    :param params: path parameters (``{id}``, ``{label}``).
    :param q: the query string.
    :param body: the parsed JSON body (None for a GET).
    """

    sb: Sandbox
    w: World
    p: Principal
    params: dict[str, Any]
    q: dict[str, Any]
    body: Any

    @property
    def id(self) -> int:
        """The ``{id}`` path parameter; one that is not an integer names no record: 404."""
        return _int_param(self.params["id"])


def h_conversions(c: Call) -> Any:
    page, size = parse_paging(c.q)
    report = c.w.conversion_report(c.body, page, size)
    held = c.sb.faults.held_back(page)  # fault injection: records arriving mid-pull
    after = c.sb.faults.config.insert_after_page or 0
    return hold_back(report, held, page_size=size, after_page=after)


def h_onhold(c: Call) -> Any:
    return c.w.patch_onhold(c.body, c.sb.faults.config.onhold_ignore_ids, c.sb.late_writes)


def h_tiered(c: Call) -> Any:
    page, size = parse_paging(c.q)
    return c.w.tiered_commissions(c.body, page, size)


def h_pixels(c: Call) -> Any:
    page, size = parse_paging(c.q)
    return c.w.pixels(c.body, page, size)


def h_payoutrevenue(c: Call) -> Any:
    expand = c.q.get(choices.EXPAND_PARAM) == choices.EXPAND_VALUE
    return c.w.get_payout_revenue(c.id, expand)


def h_network(c: Call) -> Any:
    # Network info. The reference page documents GET /networks with ``timezone_id``; the
    # timezone user guide names ``reporting_timezone_id`` (GET /networks/info). Both are served,
    # with both fields: the default reporting timezone of report requests.
    tz = c.w.cfg.reporting_timezone_id
    return {
        "network_id": c.w.network_id,
        "name": f"Sandbox network ({c.w.region})",
        "account_status": "active",
        "timezone_id": tz,
        "reporting_timezone_id": tz,
        "currency_id": choices.DEFAULT_CURRENCY,
    }


def h_timezones(c: Call) -> Any:
    # GET /meta/timezones (public reference "List Timezones"): no key needed.
    return {"timezones": as_api_records()}


def h_advertiser_self(c: Call) -> Any:
    adv = c.w.catalog.advertisers[c.p.entity_id]
    return {k: adv[k] for k in ("network_advertiser_id", "network_id", "name", "account_status")}


def h_partner_connections(c: Call) -> Any:
    name = f"Sandbox network ({c.w.region})"
    return {"connections": [{"network_id": c.w.network_id, "name": name}]}


# Method -> (handler, needs the ``write`` scope). One-line delegations to the world are written
# in place.
ROUTES: list[Route] = [
    Route("/networks/reporting/conversions", {"POST": (h_conversions, False)}),
    Route("/networks/reporting/onhold", {"PATCH": (h_onhold, True)}),
    Route(
        "/networks/reporting/conversions/{id}/saleamount",
        {"PUT": (lambda c: c.w.put_sale_amount(c.params["id"], c.body), True)},
    ),
    Route(
        "/networks/reporting/transactions/{id}/flowchart",
        {"GET": (lambda c: c.w.flowchart(c.params["id"]), False)},
    ),
    Route(
        "/networks/reporting/entity/table",
        {"POST": (lambda c: c.w.network_entity_table(c.body), False)},
    ),
    Route(
        "/affiliates/reporting/entity/table",
        {"POST": (lambda c: c.w.entity_table(c.p.entity_id, c.body), False)},
    ),
    Route(
        "/networks/offergroups/{id}", {"PUT": (lambda c: c.w.put_offer_group(c.id, c.body), True)}
    ),
    Route("/networks/offers/{id}", {"PUT": (lambda c: c.w.put_offer(c.id, c.body), True)}),
    Route("/networks/custom/scrubrate", {"POST": (lambda c: c.w.post_scrub_rate(c.body), True)}),
    Route(
        "/networks/affiliates/{id}/trackingdomains",
        {"PUT": (lambda c: c.w.put_tracking_domain(c.id, c.body), True)},
    ),
    Route("/networks/tieredcommissions/table", {"POST": (h_tiered, False)}),
    Route("/networks/channels/{id}", {"PUT": (lambda c: c.w.put_channel(c.id, c.body), True)}),
    Route("/networks/categories", {"POST": (lambda c: c.w.post_category(c.body), True)}),
    Route("/affiliates/encode", {"POST": (lambda c: c.w.encode(c.body), False)}),
    Route("/networks/pixelstable", {"POST": (h_pixels, False)}),
    Route("/networks/custom/payoutrevenue/{id}", {"GET": (h_payoutrevenue, False)}),
    Route("/networks/offerurls/{id}", {"GET": (lambda c: c.w.get_offer_url(c.id), False)}),
    Route(
        "/networks/patch/offerurls/apply",
        {"PATCH": (lambda c: c.w.patch_offer_urls(c.body), True)},
    ),
    Route("/networks/labels/{label}", {"GET": (lambda c: c.w.get_label(c.params["label"]), False)}),
    Route("/networks", {"GET": (h_network, False)}),
    Route("/networks/info", {"GET": (h_network, False)}),
    Route("/meta/timezones", {"GET": (h_timezones, False)}),
    Route(
        "/affiliates/affiliate",
        {"GET": (lambda c: c.w.catalog.affiliate_small(c.p.entity_id), False)},
    ),
    Route("/advertisers/advertiser", {"GET": (h_advertiser_self, False)}),
    Route("/partners/connections", {"GET": (h_partner_connections, False)}),
]


# --- the application ------------------------------------------------------------------------------


class Sandbox:
    """The whole sandbox: two worlds, keys, faults, rate limits and the request log.

    :param config: the startup data configuration (``POST /_sandbox/reset`` applies overrides
        on top of it).
    :param rate_limit: the rate-limit settings a reset returns to (a profile of
        :data:`choices.RATE_LIMIT_PROFILES`, default ``"sandbox"``).
    :param late_writes: the late/lost on-hold update setting after a reset (default: off).
    :param clock: the startup clock instant (unix seconds) to freeze at; None: the wall clock.
    """

    def __init__(
        self,
        config: DataConfig,
        rate_limit: dict[str, Any] | None = None,
        late_writes: LateWritesConfig | None = None,
        clock: float | None = None,
    ) -> None:
        self.base_config = config
        self.clock = SandboxClock(clock)
        self.rate_limit = rate_limit or choices.RATE_LIMIT_PROFILES["sandbox"]
        self.keys = KeyRing(config.seed)
        self.faults = Faults()
        self.late_writes = LateWrites(late_writes)
        self.limiter: Limiter = build_limiter(self.rate_limit)
        self.log = RequestLog()
        self.counts: Counter[str] = Counter()
        self.worlds: dict[str, World] = {}
        self.reset({})

    # --- state ----------------------------------------------------------------------------------

    def reset(self, overrides: dict[str, Any]) -> DataConfig:
        cfg = self.base_config.with_overrides(overrides)
        self.config = cfg
        self.clock.restore()
        self.worlds = {
            "default": World(cfg, "default", self.clock),
            "eu": World(cfg, "eu", self.clock),
        }
        self.keys.build(
            {
                region: (list(w.catalog.affiliates), list(w.catalog.advertisers))
                for region, w in self.worlds.items()
            }
        )
        self.faults.clear()
        self.late_writes.reset()
        self.limiter = build_limiter(self.rate_limit)
        self.log.clear()
        self.counts.clear()
        return cfg

    # --- ASGI -------------------------------------------------------------------------------------

    async def __call__(
        self, scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]
    ) -> None:
        if scope["type"] == "lifespan":
            while True:
                msg = await receive()
                if msg["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif msg["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        path: str = scope["path"]
        method: str = scope["method"]
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        if path.startswith("/_sandbox/") or path == "/_sandbox":
            try:
                body = await _read_body(scope, receive, ADMIN_MAX_BODY_BYTES)
            except BodyTooLargeError:
                limit = f"limit {ADMIN_MAX_BODY_BYTES} bytes"
                await _respond(send, 413, {"error": f"Request body too large ({limit})"}, {})
                return
            status, payload, headers = self.admin(method, path, query, body)
            await _respond(send, status, payload, headers)
            return
        if path.startswith("/v1/") or path == "/v1":
            region, api = "default", path[3:]
        elif path.startswith("/eu/v1/") or path == "/eu/v1":
            region, api = "eu", path[6:]
        else:
            await _respond(send, 404, {"Error": choices.MSG_ROUTE_NOT_FOUND}, {})
            return
        await self.api(scope, receive, send, method, region, api, query)

    async def api(
        self,
        scope: dict[str, Any],
        receive: Callable[[], Awaitable[dict[str, Any]]],
        send: Callable[..., Any],
        method: str,
        region: str,
        api: str,
        query: dict[str, Any],
    ) -> None:
        # The body is read only after the route, the key and its scope are accepted, and only
        # up to MAX_BODY_BYTES: a refused request costs no memory whatever its size.
        key = _api_key(scope)
        segment = api.split("/", 2)[1] if api.count("/") >= 1 else ""
        portal = PORTAL_PREFIXES.get(segment)
        world = self.worlds[region]
        # Unknown keys share the keyless bucket: random keys must not each get a bucket. A known
        # key counts in its own network's window of its user type (documented mode).
        known = self.keys.principals.get(key) if key is not None else None
        bucket = key if key is not None and known is not None else ""
        user = (known.region, known.portal) if known is not None else (region, "")
        allowed, headers, wait = self.limiter.take(bucket, *user)
        reporting_slot = False
        status = 200
        payload: Any = None
        body: Any = None
        raw_body: bytes | None = None
        delay_after = 0.0
        try:
            if not allowed:
                raise before(429, "Too Many Requests", {"retry-after": retry_after(wait)})
            route, params = self._match(api)
            if route is None:
                raise before(404, choices.MSG_ROUTE_NOT_FOUND)
            entry = route.methods.get(method)
            if entry is None:
                raise before(
                    405, choices.MSG_METHOD_NOT_ALLOWED, {"allow": ", ".join(route.methods)}
                )
            handler, write = entry
            if segment == "meta":
                # The metadata reference declares no security (docs/api-decisions.md): the key
                # header, sent or not, right or wrong, is not checked.
                principal = Principal(region, choices.META_PRINCIPAL, 0, frozenset({"read"}))
            else:
                principal = self.keys.authenticate(key, region, portal)
            if write:
                require_scope(principal, "write")
            if method != "GET":
                try:
                    raw_body = await _read_body(scope, receive, MAX_BODY_BYTES)
                except BodyTooLargeError:
                    raise before(413, MSG_TOO_LARGE) from None
            injected = self.faults.decide(api)
            if injected is not None:
                field, message = choices.FAULT_MESSAGES.get(injected, ("error", "Injected fault"))
                extra = {}
                ra = self.faults.config.retry_after_s
                if ra is not None and injected in (429, 503):
                    extra["retry-after"] = str(ra)
                raise ApiError(injected, message, field, extra)
            if raw_body is not None:
                body = _parse_json(raw_body)
            self.late_writes.settle()  # what has landed by now is what this request sees
            reporting_slot = self.limiter.enter(region, principal.portal, api, body)
            payload = handler(Call(self, world, principal, params, query, body))
            delay_after = self.faults.delay_after_apply(api)
        except ApiError as err:
            status = err.status
            payload = err.body()
            headers.update(err.headers)
        except Exception:
            traceback.print_exc(file=sys.stderr)
            status = 500
            payload = {"error": "Internal Server Error"}
        self._record(method, region, api, query, status, portal, raw_body, body, payload)
        latency = self.faults.config.latency_ms
        if latency or delay_after:
            # asyncio.sleep: concurrent requests overlap, like a slow upstream.
            await asyncio.sleep(latency / 1000 + delay_after)
        try:
            await _respond(send, status, payload, headers)
        finally:
            if reporting_slot:  # in flight until answered (the documented concurrency cap)
                self.limiter.leave(region)

    def _record(
        self,
        method: str,
        region: str,
        api: str,
        query: dict[str, Any],
        status: int,
        portal: str | None,
        raw_body: bytes | None,
        body: Any,
        payload: Any,
    ) -> None:
        """One request-log entry and the route/status counters for an answered request."""
        full_path = ("/v1" if region == "default" else "/eu/v1") + api
        try:
            logged = body_entry(raw_body, body)
        except Exception:  # the log must never cost the answer
            traceback.print_exc(file=sys.stderr)
            logged = None
        self.log.append(
            method=method,
            path=full_path,
            query=query,
            status=status,
            portal=portal,
            region=region,
            body=logged,
            rows=getattr(payload, "rows", None),
        )
        counter = f"{method} {full_path}"
        if counter not in self.counts and len(self.counts) >= MAX_ROUTE_COUNTERS:
            counter = f"{method[:32]} (other paths)"
        self.counts[counter] += 1
        self.counts[f"status:{status}"] += 1

    @staticmethod
    def _match(api: str) -> tuple[Route | None, dict[str, Any]]:
        for route in ROUTES:
            m = route.regex.match(api)
            if m:
                return route, m.groupdict()
        return None, {}

    # --- admin ------------------------------------------------------------------------------------

    def admin(
        self, method: str, path: str, query: dict[str, Any], raw: bytes
    ) -> tuple[int, Any, dict[str, Any]]:
        try:
            return 200, self._admin(method, path, query, raw), {}
        except ApiError as err:
            return err.status, err.body(), err.headers
        except (ConfigError, FaultConfigError, LateWritesConfigError, ValueError) as err:
            return 400, {"error": str(err)}, {}

    def _world(self, query: dict[str, Any]) -> World:
        region = query.get("region", "default")
        if region not in self.worlds:
            raise invalid("region must be default or eu")
        return self.worlds[region]

    def _admin(self, method: str, path: str, query: dict[str, Any], raw: bytes) -> Any:
        route = (method, path.rstrip("/"))
        self.late_writes.settle()  # the truth endpoints show what has landed, nothing more
        if route == ("GET", "/_sandbox/health"):
            return {
                "status": "ok",
                "pid": os.getpid(),
                "config": self.config.to_json(),
                "clock": self.clock.to_json(),
            }
        if route == ("GET", "/_sandbox/config"):
            return self.config.to_json()
        if route == ("GET", "/_sandbox/keys"):
            return self.keys.listing
        if route == ("GET", "/_sandbox/catalog"):
            return self._world(query).catalog_listing()
        if route == ("POST", "/_sandbox/reset"):
            body = _parse_json(raw) if raw.strip() else {}
            if body is None:
                body = {}
            cfg = self.reset(body)
            return {"config": cfg.to_json()}
        if route == ("GET", "/_sandbox/faults"):
            return self.faults.config.to_json()
        if route == ("PUT", "/_sandbox/faults"):
            body = _parse_json(raw) if raw.strip() else {}
            self.faults.set(FaultConfig.from_json(body or {}))
            return self.faults.config.to_json()
        if route == ("DELETE", "/_sandbox/faults"):
            self.faults.clear()
            return self.faults.config.to_json()
        if route == ("GET", "/_sandbox/late-writes"):
            return self.late_writes.to_json()
        if route == ("PUT", "/_sandbox/late-writes"):
            self.late_writes.set(LateWritesConfig.from_json(_parse_json(raw)))
            return self.late_writes.to_json()
        if route == ("GET", "/_sandbox/clock"):
            return self.clock.to_json()
        if route == ("PUT", "/_sandbox/clock"):
            self.clock.update(_parse_json(raw))
            return self.clock.to_json()
        if route == ("GET", "/_sandbox/rate_limit"):
            return self.limiter.to_json()
        if route == ("PUT", "/_sandbox/rate_limit"):
            return self._admin_rate_limit(raw)
        if route == ("GET", "/_sandbox/requests"):
            return Raw(self.log.render())
        if route == ("GET", "/_sandbox/requests/counts"):
            by_status = {
                k.split(":", 1)[1]: n for k, n in self.counts.items() if k.startswith("status:")
            }
            by_route = {k: n for k, n in self.counts.items() if not k.startswith("status:")}
            return {"total": sum(by_status.values()), "by_status": by_status, "by_route": by_route}
        if route == ("DELETE", "/_sandbox/requests"):
            self.log.clear()
            self.counts.clear()
            return {"result": True}
        if route == ("GET", "/_sandbox/stats"):
            return {
                region: {
                    "records_built": w.gen.records_built,
                    "cores_computed": w.gen.cores_computed,
                }
                for region, w in self.worlds.items()
            }
        if route in (
            ("GET", "/_sandbox/truth/conversions"),
            ("GET", "/_sandbox/truth/planted"),
            ("GET", "/_sandbox/truth/money"),
        ):
            return self._admin_truth(route[1], query)
        if method == "GET" and path.startswith("/_sandbox/objects/"):
            kind = path.rsplit("/", 1)[1]
            if kind not in State.KINDS:
                raise not_found()
            objects = self._world(query).state.objects[kind]
            return {str(k): val for k, val in objects.items()}
        raise not_found()

    def _admin_truth(self, path: str, query: dict[str, Any]) -> Any:
        """``/_sandbox/truth/conversions``, ``/planted`` and ``/money`` for a window."""
        world = self._world(query)
        body = {"from": query.get("from"), "to": query.get("to")}
        tz = query.get("timezone_id")
        if tz is not None:
            try:
                body["timezone_id"] = int(tz)
            except ValueError:
                raise invalid("timezone_id must be an integer") from None
        t0, t1 = world.window(body, "admin")
        if path.endswith("money"):
            cells = query.get("cells", "true")
            if cells not in ("true", "false"):
                raise invalid("cells must be true or false")
            return world.money_truth(t0, t1, cells=cells == "true")
        truth = world.truth(t0, t1)
        if path.endswith("conversions"):
            return {k: val for k, val in truth.items() if not k.startswith("_")}
        planted_ids, planted_oh, clean, negative_ids, negative_oh = truth["_ids"]
        return {
            "conversion_ids": planted_ids,
            "on_hold_conversion_ids": planted_oh,
            "clean_on_hold_conversion_ids": clean,
            # Planted reversals and adjustments (negative amounts; choices.REVERSAL_NOTES).
            "reversal_conversion_ids": negative_ids,
            "reversal_on_hold_conversion_ids": negative_oh,
            "rules": planted_rules(world.cfg.offer_currencies),
        }

    def _admin_rate_limit(self, raw: bytes) -> Any:
        """``PUT /_sandbox/rate_limit``: a per-key bucket or the documented quota (settings in
        :func:`~affiliate_network_sandbox.ratelimit.build_limiter`), until the next reset."""
        self.limiter = build_limiter(_parse_json(raw))
        return self.limiter.to_json()


def planted_rules(currencies: tuple[str, ...] = ("USD",)) -> dict[str, str]:
    """The planted patterns and the rules that catch exactly them (README "Planted patterns").

    :param currencies: the offers' currencies: the outlier threshold is a USD amount, so with
        other currencies the rule compares with it times the record currency's rate.
    """
    outlier = f"sale_amount >= {choices.OUTLIER_SALE_AMOUNT_MIN}"
    if set(currencies) != {"USD"}:
        rates = ", ".join(f"{c} {choices.CURRENCY_RATES[c]}" for c in currencies)
        outlier += f" x the rate of the record's currency_id per 1 USD ({rates})"
    return {
        "duplicate_ip": f">= {choices.DUPLICATE_IP_MIN_CONVERSIONS} conversions (is_event false) "
        "with the same conversion_user_ip in one UTC day",
        "fast_click": "conversion_unix_timestamp - click_unix_timestamp < "
        f"{choices.FAST_CLICK_MAX_SECONDS}",
        "blocklisted_sub": f"sub1 in {list(choices.BLOCKLISTED_SUB1)}",
        "outlier_sale_amount": outlier,
        "ip_mismatch": "session_user_ip != conversion_user_ip",
    }


# --- low-level I/O --------------------------------------------------------------------------------


async def _read_body(
    scope: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]], limit: int
) -> bytes:
    """The request body, or :class:`BodyTooLargeError` as soon as it is known to exceed ``limit``.

    A declared ``Content-Length`` above the limit is refused before any byte is read; a chunked
    body is refused when its running total passes the limit. The server discards the rest.
    """
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                declared = int(value)
            except ValueError:
                declared = 0  # the HTTP parser rejects these; the running total still applies
            if declared > limit:
                raise BodyTooLargeError
            break
    chunks = []
    size = 0
    while True:
        msg = await receive()
        if msg["type"] != "http.request":
            break
        chunk = msg.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLargeError
        chunks.append(chunk)
        if not msg.get("more_body"):
            break
    return b"".join(chunks)


def _parse_json(raw: bytes) -> Any:
    if not raw.strip():
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise invalid("the body is not valid JSON") from None


async def _respond(
    send: Callable[..., Any], status: int, payload: Any, headers: dict[str, str]
) -> None:
    chunks = payload.chunks if isinstance(payload, Raw) else [orjson.dumps(payload)]
    length = sum(len(c) for c in chunks)
    raw_headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(length).encode()),
    ]
    raw_headers.extend((k.encode(), v.encode()) for k, v in headers.items())
    await send({"type": "http.response.start", "status": status, "headers": raw_headers})
    last = len(chunks) - 1
    for n, chunk in enumerate(chunks):
        await send({"type": "http.response.body", "body": chunk, "more_body": n < last})


def create_app(
    config: DataConfig | None = None,
    rate_limit: str = "sandbox",
    late_writes: LateWritesConfig | None = None,
    clock: float | None = None,
) -> Sandbox:
    """Build the ASGI application (``config`` defaults to :class:`DataConfig`'s defaults).

    :param rate_limit: a name in :data:`choices.RATE_LIMIT_PROFILES`.
    :param late_writes: late/lost on-hold updates after every reset (default: off).
    :param clock: freeze the sandbox's clock at this instant (unix seconds); None: wall clock.
    """
    if rate_limit not in choices.RATE_LIMIT_PROFILES:
        raise ValueError(
            f"rate_limit must be one of {sorted(choices.RATE_LIMIT_PROFILES)}, got {rate_limit!r}"
        )
    return Sandbox(
        config or DataConfig(), choices.RATE_LIMIT_PROFILES[rate_limit], late_writes, clock
    )


def _api_key(scope: dict[str, Any]) -> str | None:
    """The request's API key header (``X-Svc-Api-Key``, else its alias ``X-Eflow-API-Key``)."""
    alias = None
    for name, value in scope["headers"]:
        if name == HEADER:
            return str(value.decode("latin-1"))
        if name == HEADER_ALIAS and alias is None:
            alias = str(value.decode("latin-1"))
    return alias
