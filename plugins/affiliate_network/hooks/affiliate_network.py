"""AffiliateNetworkHook: all HTTP with the affiliate tracking network, for all four portals.

It stands on Airflow's :class:`~airflow.sdk.BaseHook` (connection lookup, logging) with its own
``requests`` sessions (:mod:`affiliate_network.hooks._transport`: auth header, retries, throttle),
and adds what the API specification (``affiliate-network-api.md``) asks of a client; this module
holds the connection parsing and the endpoint methods. A call takes two steps: the hook builds
one :class:`~affiliate_network.hooks._transport.Request` (:meth:`AffiliateNetworkHook._build`:
portal check, query, encoded body, idempotency, the quota it draws on, timeout) and the
transport sends it (:meth:`~affiliate_network.hooks._transport.Transport.send`).

* Auth: the API key (connection password) goes in ``X-Svc-Api-Key``, or the header the extra
  ``key_header`` names (the real API family's clients send ``X-Eflow-API-Key``); it is
  registered with the secrets masker the moment it is read. Connection extras are never sent
  as headers; only the transport extras (``verify``, ``proxies``, ``cert``, ...) set session
  options.
* Portal guard: each endpoint belongs to the portal named by its path prefix (``/networks``,
  ``/affiliates``, ``/advertisers``, ``/partners``); calling one with another portal's connection
  raises :class:`PortalMismatchError` before anything is sent.
* Paging: ``page``/``page_size`` in the query string only. The conversion report is read in
  time slices each answered whole by one request (a list that changes while it is read loses
  no row that stays); other lists in offset pages, page 1 first, then the rest concurrently,
  checked and yielded in page order (see :mod:`affiliate_network.hooks._paging`).
* Retries: see :mod:`affiliate_network.hooks._retry` and the idempotency table below.
* Rate limits: ``X-RateLimit-Remaining`` feeds a throttle shared by all the hook's workers
  (:mod:`affiliate_network.hooks._ratelimit`).

Idempotency (decides what may be re-sent after a timeout or a dropped connection):

* idempotent, re-sent: every GET (reads); every PUT (offers, offer groups, channels, tracking
  domains, sale amount: the spec says PUT replaces the whole object); PATCH
  ``/networks/reporting/onhold`` (sets a fixed status); PATCH ``/networks/patch/offerurls/apply``
  when every operator is ``overwrite``, ``delete`` or ``clear`` (they converge when repeated);
  the read-like POSTs (``reporting/conversions``, ``reporting/entity/table``,
  ``tieredcommissions/table``, ``pixelstable``, ``encode``: nothing is written).
* not idempotent, never re-sent once it may have arrived: POST ``/networks/custom/scrubrate``
  and POST ``/networks/categories`` (each call creates a record), and the offer-URL PATCH with
  an ``append`` operator.

A non-idempotent request is re-sent only when it provably never left the client (connect
timeout, connection refused) or was answered 429 (refused by the rate limiter before it was
handled). A read timeout, a dropped connection or any 5xx (500, 502, 503, 504: the server or an
upstream may have acted before failing) raises :class:`OutcomeUnknownError` instead, so the
caller reconciles rather than creating a duplicate. Idempotent requests are retried on 429 and
every 5xx, as the spec's retry guidance says.

A ``Retry-After`` is honoured up to 30 s (the spec's backoff ceiling); a longer one (a proxy
answering ``86400``) is capped, with a warning in the task log, so no worker is parked for hours.
"""

from __future__ import annotations

import datetime as dt
import random
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import TYPE_CHECKING, Any, ClassVar, NotRequired, TypedDict, TypeVar, Unpack
from urllib.parse import quote, urlsplit

import orjson
import requests
from airflow.sdk import BaseHook
from airflow.sdk.log import mask_secret

from affiliate_network.api.report_columns import column_count_problem, granular_columns
from affiliate_network.api.timezones import TIMEZONES
from affiliate_network.compat import AirflowNotFoundException
from affiliate_network.exceptions import (
    AffiliateNetworkError,
    AuthenticationError,
    ConnectionConfigError,
    InvalidRequestError,
    NotFoundError,
    PermissionDeniedError,
    PortalMismatchError,
    ReportRowLimitError,
)
from affiliate_network.hooks._budget import (
    REPORTING_PREFIX,
    GranularBudget,
    QuotaSettings,
    SharedBudget,
    open_store,
)
from affiliate_network.hooks._network_identity import NetworkIdentity, network_identity
from affiliate_network.hooks._paging import PagedIterator, PullStats, RawPage, SlicedPull
from affiliate_network.hooks._ratelimit import RateLimitThrottle
from affiliate_network.hooks._retry import RetryPolicy
from affiliate_network.hooks._transport import (
    API_KEY_HEADER,
    CONNECT_TIMEOUT_S,
    KEY_HEADER_EXTRA,
    RETRY_AFTER_CAP_S,
    SAFE_RESEND_STATUSES,
    Request,
    Transport,
    key_header_name,
)

if TYPE_CHECKING:
    from airflow.sdk import Connection

__all__ = [
    "API_KEY_HEADER",
    "CONNECT_TIMEOUT_S",
    "RETRY_AFTER_CAP_S",
    "SAFE_RESEND_STATUSES",
    "AffiliateNetworkHook",
    "PagedIterator",
    "PullStats",
    "RetryPolicy",
]

#: Portal name -> path prefix (spec, "What the service does").
PORTAL_PREFIXES: dict[str, str] = {
    "network": "/networks",
    "affiliate": "/affiliates",
    "advertiser": "/advertisers",
    "marketplace": "/partners",
}
#: A numeric connection setting: whole (page size, concurrency) or not (timeout).
_Number = TypeVar("_Number", int, float)
DEFAULT_PAGE_SIZE = 2000
MAX_PAGE_SIZE = 2000  # spec, "Limits": typically 2,000
DEFAULT_CONCURRENCY = 4
# Public docs: at most 10 concurrent requests to the network reporting endpoints.
MAX_CONCURRENCY = 10
DEFAULT_TIMEOUT_S = 120.0
ENTITY_TABLE_ROW_CAP = 10_000  # spec, "Limits": rows returned by aggregated reporting
#: Statuses the spec shows (``approved``) or implies (rejection exists; its value is not shown, so
#: any lowercase status word is sent as given and the server decides).
ON_HOLD_STATUSES = ("approved", "rejected")
ON_HOLD_STATUS_FORM = re.compile(r"[a-z][a-z_]*\Z")
#: One cheap authenticated call per portal for :meth:`AffiliateNetworkHook.test_connection`:
#: (method, path, query, body). Network and affiliate use documented endpoints; the spec documents
#: no advertiser or marketplace endpoint, only names ``GET /advertisers/advertiser`` and
#: ``GET /partners/connections`` as existing, so those are used.
_CHEAP_CALLS: dict[str, tuple[str, str, dict[str, Any] | None, dict[str, Any] | None]] = {
    "network": ("POST", "/networks/tieredcommissions/table", {"page": 1, "page_size": 1}, {}),
    "affiliate": (
        "POST",
        "/affiliates/encode",
        None,
        {"type": "tracking_link_affiliate", "ids": [1]},
    ),
    "advertiser": ("GET", "/advertisers/advertiser", None, None),
    "marketplace": ("GET", "/partners/connections", None, None),
}


#: Paths every portal's key may call (the public reference's metadata lookups).
ANY_PORTAL_PREFIXES = ("/meta",)


def portal_of(path: str) -> str | None:
    """The portal whose prefix starts ``path`` (``/networks/...`` -> ``network``).

    ``None`` for metadata paths (``/meta/...``) that any portal's key may call.
    """
    if any(path == p or path.startswith(p + "/") for p in ANY_PORTAL_PREFIXES):
        return None
    for portal, prefix in PORTAL_PREFIXES.items():
        if path == prefix or path.startswith(prefix + "/"):
            return portal
    raise InvalidRequestError(
        f"path {path!r} is under no portal prefix {sorted(PORTAL_PREFIXES.values())}"
    )


def _as_date(value: str | dt.date, name: str, *, allow_time: bool = False) -> str:
    """``YYYY-MM-DD`` of a date or string; with ``allow_time`` a ``YYYY-MM-DD hh:mm:ss`` string
    passes unchanged and a datetime is sent as its wall time in that form (the conversion
    report documents both forms; plain dates are the default).
    """
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S") if allow_time else value.date().isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    try:
        if allow_time and isinstance(value, str) and len(value) == 19:
            return dt.datetime.strptime(value, "%Y-%m-%d %H:%M:%S").strftime("%Y-%m-%d %H:%M:%S")
        if len(value) != 10:
            raise ValueError
        return dt.date.fromisoformat(value).isoformat()
    except (TypeError, ValueError):
        forms = "YYYY-MM-DD or YYYY-MM-DD hh:mm:ss" if allow_time else "YYYY-MM-DD"
        raise InvalidRequestError(f"{name} must be a date or a {forms} string") from None


#: The API's id of UTC (public reference, "timezones"): time slices are sent in it.
UTC_TIMEZONE_ID = 67


def _utc_text(unix: int) -> str:
    """``YYYY-MM-DD hh:mm:ss`` of a unix second in UTC (the timed form of ``from``/``to``)."""
    return dt.datetime.fromtimestamp(unix, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _wall_instants(wall: dt.datetime, tz: dt.tzinfo) -> tuple[int, int]:
    """The earliest and latest unix second a naive wall time can name in ``tz`` (two in a
    repeated hour, the two offsets' readings in a skipped one, else one)."""
    readings = [int(wall.replace(tzinfo=tz, fold=fold).timestamp()) for fold in (0, 1)]
    return min(readings), max(readings)


def conversion_window(
    from_date: str | dt.date, to_date: str | dt.date, timezone_id: int
) -> tuple[int, int]:
    """UTC ``[start, end)`` unix seconds of a conversion report's ``from``/``to``.

    Days run midnight to midnight in the timezone (public documentation, "day bucketing"),
    ``to`` inclusive; a midnight in a DST gap or fold is read as Python reads it (``fold=0``,
    as the network's own day boundaries fall). A timed bound is that second, ``to`` inclusive;
    an aware datetime is its own instant; a naive wall time that names two instants (a
    repeated hour) or none (a skipped one) is widened to cover every reading.

    :param from_date: first day or second.
    :param to_date: last day or second (inclusive).
    :param timezone_id: the API's timezone id of naive bounds.
    :raises InvalidRequestError: unknown timezone id, malformed bound, or an empty window.
    """
    import zoneinfo

    from affiliate_network.api.timezones import name_for_id
    from affiliate_network.exceptions import UnknownTimezoneError

    try:
        tz = zoneinfo.ZoneInfo(name_for_id(int(timezone_id)))
    except (UnknownTimezoneError, TypeError, ValueError) as err:
        raise InvalidRequestError(f"timezone_id: {err}") from None

    def bound(value: str | dt.date, name: str, *, end: bool) -> int:
        if isinstance(value, dt.datetime):
            if value.tzinfo is not None and value.utcoffset() is not None:
                return int(value.timestamp()) + (1 if end else 0)
            moment = value.replace(microsecond=0)
        elif isinstance(value, dt.date):
            day = value + dt.timedelta(days=1) if end else value
            return int(dt.datetime(day.year, day.month, day.day, tzinfo=tz).timestamp())
        else:
            text = _as_date(value, name, allow_time=True)
            if len(text) == 10:
                return bound(dt.date.fromisoformat(text), name, end=end)
            moment = dt.datetime.strptime(text, "%Y-%m-%d %H:%M:%S")
        early, late = _wall_instants(moment, tz)
        return late + 1 if end else early

    start = bound(from_date, "from_date", end=False)
    stop = bound(to_date, "to_date", end=True)
    if stop <= start:
        raise InvalidRequestError(f"the window from {from_date} to {to_date} is empty")
    return start, stop


def _is_masked(secret: str) -> bool:
    """Whether the secrets masker already hides ``secret``.

    ``False`` when this Airflow has no ``redact`` next to ``mask_secret`` (then every key is
    registered, as before).
    """
    try:
        from airflow.sdk.log import redact
    except ImportError:  # pragma: no cover - Airflow moved the masker's lookup
        return False
    return redact(secret) != secret


def _conversion_filters(
    filters: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None,
) -> list[dict[str, Any]]:
    """Filter items as sent; a mapping ``{"offer": [1, 2]}`` is a shorthand for the item list."""
    if filters is None:
        return []
    if isinstance(filters, Mapping):
        items: list[dict[str, Any]] = []
        for resource_type, values in filters.items():
            many = values if isinstance(values, list | tuple | set | frozenset) else [values]
            items += [{"resource_type": resource_type, "filter_id_value": str(v)} for v in many]
        return items
    return [dict(item) for item in filters]


def _entity_columns(columns: Any) -> list[dict[str, Any]]:
    """The entity table's ``columns`` as sent: each a ``{"column": name}`` object.

    A name is a shorthand for its object. The whole argument given as one plain string
    (``columns="offer"``) would be sent letter by letter: refused, like an item that is neither
    a name nor an object with a ``column`` name, by position, so no error says ``None``.

    :raises InvalidRequestError: naming ``columns`` (and the item's position).
    """
    if isinstance(columns, str | bytes) or not isinstance(columns, Sequence):
        shown = repr(columns) if isinstance(columns, str | bytes) else type(columns).__name__
        raise InvalidRequestError(
            f"columns: {shown:.60} is not a list of columns; pass a list of names or "
            '{"column": name} objects, e.g. ["offer"]'
        )
    cols: list[dict[str, Any]] = []
    for i, item in enumerate(columns):
        if isinstance(item, str) and item.strip():
            cols.append({"column": item})
            continue
        if isinstance(item, Mapping):
            name = item.get("column")
            if isinstance(name, str) and name.strip():
                cols.append(dict(item))
                continue
            keys = ", ".join(repr(k) for k in list(item)[:5]) or "no keys"
            problem = f"an object without a 'column' name (it has {keys})"
        else:
            problem = f"a {type(item).__name__}" if not isinstance(item, str) else "an empty name"
        raise InvalidRequestError(
            f'columns[{i}]: {problem:.120}; each column is a name or a {{"column": name}} object'
        )
    return cols


def _exact_object(content: bytes, what: str) -> dict[str, Any]:
    """A JSON object answer with its non-integer numbers as ``Decimal`` (their text, exactly).

    :raises AffiliateNetworkError: the body is not JSON, or JSON but not an object.
    """
    import msgspec

    if not content:
        return {}
    try:
        doc = msgspec.json.Decoder(float_hook=Decimal).decode(content)
    except msgspec.DecodeError:
        raise AffiliateNetworkError(f"{what}: the response is not JSON") from None
    if not isinstance(doc, dict):
        raise AffiliateNetworkError(
            f"{what}: the response is a JSON {type(doc).__name__}, not an object"
        )
    return doc


class EntityTableQuery(TypedDict):
    """The keywords of an aggregated report (both portals' ``entity/table`` take one body).

    - ``from_date``, ``to_date``: first and last day (inclusive), ``YYYY-MM-DD`` or a date.
    - ``columns``: 1 to 10 column names (or ``{"column": name}``), at most one time column.
    - ``timezone_id``: the timezone of the dates.
    - ``currency_id``: a currency code (optional).
    - ``filters``: filter items ``{"resource_type", "filter_id_value"}`` (optional).
    """

    from_date: str | dt.date
    to_date: str | dt.date
    columns: Sequence[str | Mapping[str, Any]]
    timezone_id: int
    currency_id: NotRequired[str | None]
    filters: NotRequired[Sequence[Mapping[str, Any]] | None]


@dataclass(frozen=True)
class _Connected:
    """What the connection gave, read once: the portal, the paging settings and the transport."""

    portal: str
    page_size: int
    concurrency: int
    timeout_s: float
    transport: Transport
    network: NetworkIdentity


class AffiliateNetworkHook(BaseHook):
    """Client of the affiliate tracking network API (network, affiliate, advertiser, marketplace).

    Connection: ``host`` = base URL ending in ``/v1``; ``password`` = the portal's API key; extras
    ``portal`` (required), ``region`` (``eu`` selects ``eu_base_url``), ``eu_base_url``,
    ``timeout`` (seconds), ``page_size``, ``concurrency``, ``key_header`` (the header the key
    travels in, default ``X-Svc-Api-Key``). Arguments given here win over extras.

    :param affiliate_network_conn_id: Airflow connection id.
    :param max_attempts: tries in all per request (spec: 5).
    :param base_delay: first retry wait in seconds, doubling per failure (spec: 1).
    :param max_delay: cap of the doubling wait in seconds (spec: 30).
    :param jitter: up to this many random seconds added to each wait (spec: 1).
    :param timeout: read timeout per request in seconds (default: extra ``timeout``, else 120).
    :param page_size: rows per page for paged pulls (default: extra ``page_size``, else 2000).
    :param concurrency: pages fetched at once after page 1 (default: extra, else 4).
    :param throttle: slow down on a low ``X-RateLimit-Remaining`` before the server answers 429.
    :param rate_limit_reserve: tokens the throttle keeps in hand.
    :param sleep: how the hook waits (retries, throttling); injectable to record the waits.
    :param clock: monotonic clock in seconds used for timings and throttling.
    :param rng: source of jitter (``random.Random``); seed it for a reproducible sequence.
    :param adapter: optional ``requests`` adapter mounted on every session instead of the default
        keep-alive adapter (one per session, so sessions are never shared between threads).
    """

    conn_name_attr = "affiliate_network_conn_id"
    default_conn_name = "affiliate_network_default"
    conn_type = "affiliate_network"
    hook_name = "Affiliate Network"

    #: Methods re-sent after a timeout/dropped connection unless told otherwise (``request``).
    #: A paged pull logs its progress at most this often (seconds); quiet when it is shorter.
    progress_every_s: float = 10.0
    IDEMPOTENT_METHODS: ClassVar[frozenset[str]] = frozenset({"GET", "HEAD", "PUT", "DELETE"})

    def __init__(
        self,
        affiliate_network_conn_id: str = default_conn_name,
        *,
        max_attempts: int = 5,
        base_delay: float = 1.0,
        max_delay: float = 30.0,
        jitter: float = 1.0,
        timeout: float | None = None,
        page_size: int | None = None,
        concurrency: int | None = None,
        throttle: bool = True,
        rate_limit_reserve: int = 2,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
        adapter: requests.adapters.HTTPAdapter | None = None,
    ) -> None:
        super().__init__()
        self.affiliate_network_conn_id = affiliate_network_conn_id
        self.retry_policy = RetryPolicy(max_attempts, base_delay, max_delay, jitter)
        self._timeout_arg = timeout
        self._page_size_arg = page_size
        self._concurrency_arg = concurrency
        self._adapter = adapter
        self._sleep = sleep
        self._clock = clock
        self._rng = rng or random.Random()
        self._throttle = RateLimitThrottle(
            reserve=rate_limit_reserve, clock=clock, sleep=sleep, enabled=throttle
        )
        self._load_lock = threading.Lock()
        self._connected: _Connected | None = None
        self._extras: dict[str, Any] = {}

    def __repr__(self) -> str:
        # Never the connection (its repr shows the password).
        return f"<AffiliateNetworkHook conn_id={self.affiliate_network_conn_id!r}>"

    # ------------------------------------------------------------------ connection
    @property
    def _ready(self) -> _Connected:
        """The connection as read once (see :meth:`_connect`)."""
        connected = self._connected
        if connected is None:
            with self._load_lock:
                if self._connected is None:
                    self._connected = self._connect()
                connected = self._connected
        return connected

    def _connect(self) -> _Connected:
        """Read the connection: mask the key, validate extras, pick the base URL."""
        conn_id = self.affiliate_network_conn_id
        try:
            conn = self.get_connection(conn_id)
        except AirflowNotFoundException:
            raise ConnectionConfigError(f"connection {conn_id!r} is not defined") from None
        key = conn.password or ""
        if key and not _is_masked(key):
            # Airflow's own connection lookup registers the password with the masker (and,
            # in a task, with the supervisor). Register it again only when that has not
            # happened (a connection built some other way): every registration crosses to
            # the supervisor, and the in-process one (dag.test / `airflow dags test`) logs
            # the message, key included, at DEBUG.
            mask_secret(key)
        # extra_dejson registers the extras with the masker on every access: read it once.
        extras = dict(conn.extra_dejson or {})
        portal = str(extras.get("portal") or "").strip().lower()
        if portal not in PORTAL_PREFIXES:
            # Never the value given: it may be the API key typed into the wrong field.
            raise ConnectionConfigError(
                f"connection {conn_id!r}: extra 'portal' must be one of "
                f"{sorted(PORTAL_PREFIXES)}" + (" (it is empty)" if not portal else "")
            )
        if not key:
            raise ConnectionConfigError(
                f"connection {conn_id!r}: the API key (password field) is empty"
            )
        self._extras = extras
        key_header = key_header_name(extras.get(KEY_HEADER_EXTRA), conn_id)
        timeout_s = self._number_setting(
            "timeout", self._timeout_arg, DEFAULT_TIMEOUT_S, 0.001, 3600.0, float
        )
        page_size = self._number_setting(
            "page_size", self._page_size_arg, DEFAULT_PAGE_SIZE, 1, MAX_PAGE_SIZE, int
        )
        concurrency = self._number_setting(
            "concurrency", self._concurrency_arg, DEFAULT_CONCURRENCY, 1, MAX_CONCURRENCY, int
        )
        base_url = self._base_url_from(conn)
        network = network_identity(base_url, extras, conn_id)
        settings = QuotaSettings.from_extras(extras, conn_id)
        budget = SharedBudget(
            open_store(settings, network, portal),
            settings,
            portal,
            slot_ttl_s=timeout_s + CONNECT_TIMEOUT_S + 10.0,
        )
        transport = Transport(
            base_url=base_url,
            api_key=key,
            key_header=key_header,
            extras=extras,
            adapter=self._adapter,
            throttle=self._throttle,
            budget=budget,
            sleep=self._sleep,
            clock=self._clock,
            rng=self._rng,
            log=self.log,
        )
        return _Connected(portal, page_size, concurrency, timeout_s, transport, network)

    def _number_setting(
        self,
        name: str,
        argument: _Number | None,
        default: _Number,
        low: float,
        high: float,
        kind: type[_Number],
    ) -> _Number:
        raw = argument if argument is not None else self._extras.get(name)
        if raw is None or raw == "":
            return default
        value: _Number | None = None
        if isinstance(raw, str | int | float) and not isinstance(raw, bool):
            try:
                value = kind(raw)  # URI-form extras arrive as strings
            except (TypeError, ValueError, OverflowError):
                value = None
            # int(2.5) would silently give 2, float("nan") compares false with every bound.
            if kind is int and isinstance(raw, float) and not raw.is_integer():
                value = None
        if value is None or not low <= value <= high:
            # Never the value given: it may be the API key typed into the wrong field.
            raise ConnectionConfigError(
                f"connection {self.affiliate_network_conn_id!r}: {name} must be "
                f"{'a whole number' if kind is int else 'a number'} from {low:g} to {high:g}"
            )
        return value

    def _base_url_from(self, connection: Connection) -> str:
        """Base URL from the connection (``schema`` is a path here, not the scheme).

        ``host`` may be a full URL (``https://api.example.com/v1``) or a bare host, in which case
        the URI form's path (``schema`` field) is the path, ``https`` is assumed and ``/v1`` is
        the default path. ``region: eu`` selects the ``eu_base_url`` extra.
        """
        conn_id = self.affiliate_network_conn_id
        extras = self._extras
        region = str(extras.get("region") or "default").strip().lower()
        if region == "eu":
            raw = str(extras.get("eu_base_url") or "").strip()
            field = "extra 'eu_base_url'"
            if not raw:
                raise ConnectionConfigError(
                    f"connection {conn_id!r}: region is 'eu' but extra 'eu_base_url' is empty"
                )
        elif region == "default":
            raw = self._url_from_host(connection)
            field = "host"
        else:
            raise ConnectionConfigError(
                f"connection {conn_id!r}: extra 'region' must be 'default' or 'eu'"
            )
        parts = urlsplit(raw)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConnectionConfigError(
                f"connection {conn_id!r}: {field} must be an http(s) URL ending in /v1"
            )
        if parts.username or parts.password:
            raise ConnectionConfigError(
                f"connection {conn_id!r}: {field} must not carry credentials; "
                "put the API key in the password field"
            )
        path = parts.path.rstrip("/")
        if not path.endswith("/v1"):
            raise ConnectionConfigError(
                f"connection {conn_id!r}: {field} must end in /v1 (the API version segment)"
            )
        return f"{parts.scheme}://{parts.netloc}{path}"

    @staticmethod
    def _url_from_host(connection: Connection) -> str:
        host = (connection.host or "").strip()
        port = connection.port
        if "://" in host:
            parts = urlsplit(host)
            netloc = parts.netloc
            if port and parts.port is None:
                netloc = f"{netloc}:{port}"
            return f"{parts.scheme}://{netloc}{parts.path}"
        host, _, host_path = host.partition("/")
        schema = (connection.schema or "").strip("/")
        if schema in ("http", "https"):  # HttpHook's convention: schema holds the scheme
            scheme, path = schema, host_path
        else:
            scheme, path = "https", host_path or schema
        netloc = f"{host}:{port}" if port else host
        return f"{scheme}://{netloc}/{path or 'v1'}"

    def get_conn(self, headers: dict[Any, Any] | None = None) -> requests.Session:
        """A new ``requests`` session carrying the API key header and the transport extras.

        The hook's own requests use a pool of such sessions; this one is the caller's to use
        and close. Sessions are not shared between threads.

        :param headers: extra headers for this session.
        """
        session = self._ready.transport.new_session()
        if headers:
            session.headers.update(headers)
        return session

    def close(self) -> None:
        """Close the pooled sessions (the hook stays usable: new ones are made on demand)."""
        if self._connected is not None:
            self._connected.transport.close()

    @property
    def base_url(self) -> str:
        """Base URL every path is appended to (the EU one for ``region: eu``), read lazily."""
        return self._ready.transport.base_url

    @property
    def network(self) -> NetworkIdentity:
        """The network this connection reaches (its normalized base URL, or the ``network``
        extra): the key of the shared quota, the write lease and the sync ledger."""
        return self._ready.network

    @property
    def portal(self) -> str:
        """The connection's portal (``network``, ``affiliate``, ``advertiser``, ``marketplace``)."""
        return self._ready.portal

    @property
    def page_size(self) -> int:
        """Rows per page of paged pulls."""
        return self._ready.page_size

    @property
    def concurrency(self) -> int:
        """Pages fetched at once after page 1."""
        return self._ready.concurrency

    @property
    def budget(self) -> SharedBudget:
        """The network's quota shared with every other process (README "Sharing one network's
        quota"): pacing, reporting concurrency, granular queries."""
        return self._ready.transport.budget

    def granular_budget(self) -> GranularBudget:
        """The network's granular-query quota now: budget, used in the rolling hour, left."""
        return self.budget.granular_status()

    def check_granular_budget(self, needed: int, what: str) -> GranularBudget:
        """Refuse up front ``needed`` granular queries that do not fit in the rolling hour.

        :param needed: granular queries the caller is about to send.
        :param what: names the work in the error (an affiliate, a window).
        :raises GranularQuotaError: naming needed, budget, used in the last hour and how long
            until enough frees; nothing is sent.
        """
        return self.budget.check_granular(needed, what)

    @property
    def throttle(self) -> RateLimitThrottle:
        """The rate-limit throttle shared by this hook's workers."""
        return self._throttle

    # ------------------------------------------------------------------ core request
    def _build(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        idempotent: bool,
        policy: RetryPolicy | None = None,
        timeout: float | None = None,
        cancel: threading.Event | None = None,
    ) -> Request:
        """The one place a request is built; :meth:`Transport.send` sends what it returns.

        Checks the path's portal against the connection's before anything is sent, encodes the
        body, and decides what the request draws on: a reporting slot (``/networks/reporting/*``)
        and, when the body names a granular column, the granular-query quota.

        :param method: HTTP method (upper case).
        :param path: path after the base URL.
        :param query: query string.
        :param body: JSON body (``None``: no body).
        :param idempotent: whether it may be re-sent after it may have arrived.
        :param policy: attempts and backoff (default: the hook's).
        :param timeout: read timeout in seconds (default: the connection's).
        :param cancel: set when nobody waits for the answer any more (no further retries).
        :raises PortalMismatchError: the path belongs to another portal; nothing was sent.
        """
        ready = self._ready
        wanted = portal_of(path)
        if wanted is not None and wanted != ready.portal:
            raise PortalMismatchError(
                f"{method} {path} belongs to the {wanted} portal, but connection "
                f"{self.affiliate_network_conn_id!r} is for the {ready.portal} portal; "
                "nothing was sent"
            )
        return Request(
            method=method,
            path=path,
            query=query,
            data=orjson.dumps(body) if body is not None else None,
            idempotent=idempotent,
            reporting=path.startswith(REPORTING_PREFIX),
            granular=isinstance(body, dict) and bool(granular_columns(body.get("columns"))),
            policy=policy or self.retry_policy,
            timeout_s=timeout or ready.timeout_s,
            cancel=cancel,
        )

    @property
    def _transport(self) -> Transport:
        """The transport that sends what :meth:`_build` built (reads the connection once)."""
        return self._ready.transport

    def _scrub(self, text: str) -> str:
        return self._connected.transport.scrub(text) if self._connected is not None else text

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        idempotent: bool | None = None,
    ) -> Any:
        """Call any endpoint (path after ``/v1``) with the hook's auth, guard and retries.

        :param method: HTTP method.
        :param path: path after the base URL, e.g. ``/networks/offers/12``.
        :param params: query string parameters.
        :param json: JSON body.
        :param idempotent: whether a timeout may be retried; default by method (GET, HEAD, PUT,
            DELETE yes; POST, PATCH no).
        :return: parsed JSON body (``None`` when empty).
        """
        method = method.upper()
        if idempotent is None:
            idempotent = method in self.IDEMPOTENT_METHODS
        built = self._build(method, path, query=params, body=json, idempotent=idempotent)
        return self._transport.send(built).json()

    def iter_pages(
        self,
        path: str,
        *,
        key: str,
        body: Any = None,
        method: str = "POST",
        page_size: int | None = None,
        raw_pages: bool = False,
        unique_key: str | None = None,
        label: str | None = None,
    ) -> PagedIterator:
        """Records of every page of a paginated endpoint, in page order (lazy, memory bounded).

        A pull whose pages shift under it (``total_count`` changes, a short or overlapping
        page, a repeated ``unique_key``) stops with
        :class:`~affiliate_network.exceptions.PullShiftedError`: pull it again.

        :param path: endpoint path after ``/v1``.
        :param key: the response's record list (``conversions``, ``commissions``, ``pixels``).
        :param body: JSON body (POST) sent unchanged with every page.
        :param method: ``POST`` or ``GET``; paging always travels in the query string.
        :param page_size: rows per page (default: the hook's page size, at most 2000).
        :param raw_pages: yield one unparsed :class:`~affiliate_network.hooks._paging.Page` per
            page (envelope checked) instead of records.
        :param unique_key: record field that must not repeat within the pull (parsed records).
        :param label: what is pulled, for log lines and errors (default: method and path).
        """
        cancel = threading.Event()
        # Built (and its portal checked) at the call, not at the first next(); paged
        # endpoints only read, so every page may be re-sent.
        request = self._build(method, path, body=body, idempotent=True, cancel=cancel)
        size = self._ready.page_size if page_size is None else int(page_size)
        if not 1 <= size <= MAX_PAGE_SIZE:
            raise InvalidRequestError(f"page_size must be 1 to {MAX_PAGE_SIZE}, got {page_size!r}")
        transport = self._transport

        def fetch(page: int, size_: int) -> RawPage:
            reply = transport.send(request.page(page, size_))
            return RawPage(reply.content, reply.retries)

        return PagedIterator(
            fetch,
            key=key,
            page_size=size,
            concurrency=self._ready.concurrency,
            label=label or f"{method} {path}",
            log=self.log,
            cancel=cancel,
            raw=raw_pages,
            progress_every_s=self.progress_every_s,
            unique_key=unique_key,
        )

    # ------------------------------------------------------------------ network: reporting
    def iter_conversions(
        self,
        *,
        from_date: str | dt.date,
        to_date: str | dt.date,
        timezone_id: int,
        currency_id: str | None = None,
        show_conversions: bool = True,
        show_events: bool = False,
        filters: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
        search_terms: Sequence[Mapping[str, Any]] | None = None,
        page_size: int | None = None,
        raw_pages: bool = False,
    ) -> PagedIterator:
        """Conversion records of ``POST /networks/reporting/conversions`` over the window.

        The window is read in time slices, each answered whole by one request, not in offset
        pages (:class:`~affiliate_network.hooks._paging.SlicedPull`): a record that exists for
        the whole pull is served exactly once even while others arrive or leave (approvals
        take rows out of a status-filtered list, new conversions come in). The slices are
        sent in UTC (``timezone_id`` 67, ``YYYY-MM-DD hh:mm:ss``, ``to`` inclusive at the
        second) so no wall time of a DST change is ambiguous; ``from_date``/``to_date`` and
        ``timezone_id`` only decide the window's instants. A ``timezone_id`` missing from the
        API's published table (:mod:`affiliate_network.api.timezones`) cannot be turned into
        instants here: that request is sent as given, in offset pages with the count checks,
        and the network decides (it answers 400 for an id it does not know).

        :param from_date: first day, ``YYYY-MM-DD`` or a date; or a first second: a
            ``YYYY-MM-DD hh:mm:ss`` string or a datetime (an aware one is that instant, a
            naive one or a string a wall time in ``timezone_id``, read so that a repeated or
            skipped wall time covers both of its readings).
        :param to_date: last day (inclusive), or last second (inclusive), in the same forms.
        :param timezone_id: the API's timezone id of the dates (67 = UTC, 80 =
            America/New_York; :mod:`affiliate_network.api.timezones` has the table).
        :param currency_id: currency code (server default when omitted).
        :param show_conversions: include conversions.
        :param show_events: include events.
        :param filters: filter items ``{"resource_type", "filter_id_value"}``, or a mapping
            ``{"offer": [1, 2], "status": "approved"}`` as a shorthand.
        :param search_terms: items ``{"search_type", "value"}``.
        :param page_size: rows per answer (default 2000): slices holding more are split.
        :param raw_pages: yield one unparsed page per slice instead of records (see
            :meth:`iter_pages`).
        :return: a :class:`~affiliate_network.hooks._paging.SlicedPull` (a
            :class:`PagedIterator` for a timezone outside the table); its ``stats`` fill as it
            is consumed.
        :raises InvalidRequestError: a bound is malformed, or the window is empty or reversed.
        """
        start = _as_date(from_date, "from_date", allow_time=True)
        end = _as_date(to_date, "to_date", allow_time=True)
        if start[:10] > end[:10] or (len(start) == len(end) and start > end):
            raise InvalidRequestError(f"from_date {start} is after to_date {end}")
        window = (
            conversion_window(from_date, to_date, timezone_id)
            if not isinstance(timezone_id, bool) and timezone_id in TIMEZONES
            else None
        )
        body: dict[str, Any] = {
            "show_conversions": bool(show_conversions),
            "show_events": bool(show_events),
            "from": start,
            "to": end,
            "timezone_id": int(timezone_id),
            "query": {
                "filters": _conversion_filters(filters),
                "search_terms": [dict(term) for term in search_terms or ()],
            },
        }
        if currency_id:
            body["currency_id"] = currency_id
        path = "/networks/reporting/conversions"
        label = f"POST {path} {start}..{end} (timezone {timezone_id})"
        if window is None:
            return self.iter_pages(
                path,
                key="conversions",
                body=body,
                page_size=page_size,
                raw_pages=raw_pages,
                unique_key="conversion_id",
                label=label,
            )
        cancel = threading.Event()
        # Built (and its portal checked) at the call; each slice replaces only the body.
        request = self._build("POST", path, body=body, idempotent=True, cancel=cancel)
        size = self._ready.page_size if page_size is None else int(page_size)
        if not 1 <= size <= MAX_PAGE_SIZE:
            raise InvalidRequestError(f"page_size must be 1 to {MAX_PAGE_SIZE}, got {page_size!r}")
        transport = self._transport

        def fetch(first: int, stop: int, page: int, size_: int) -> RawPage:
            sliced = {**body, "from": _utc_text(first), "to": _utc_text(stop - 1)}
            sliced["timezone_id"] = UTC_TIMEZONE_ID
            reply = transport.send(replace(request, data=orjson.dumps(sliced)).page(page, size_))
            return RawPage(reply.content, reply.retries)

        return SlicedPull(
            fetch,
            window=window,
            key="conversions",
            page_size=size,
            concurrency=self._ready.concurrency,
            label=label,
            log=self.log,
            cancel=cancel,
            raw=raw_pages,
            progress_every_s=self.progress_every_s,
            unique_key="conversion_id",
        )

    def set_on_hold_status(self, on_hold_conversion_ids: Sequence[str], status: str) -> bool:
        """Approve or reject on-hold conversions in bulk (``PATCH /networks/reporting/onhold``).

        :param on_hold_conversion_ids: on-hold conversion IDs (strings).
        :param status: ``approved``, or the network's rejecting status (``rejected`` by default
            in this package; the spec does not show the value).
        :return: the server's ``result``.
        """
        if not isinstance(status, str) or not ON_HOLD_STATUS_FORM.match(status):
            raise InvalidRequestError(
                f"status must be a lowercase status word such as {ON_HOLD_STATUSES}, got {status!r}"
            )
        if isinstance(on_hold_conversion_ids, str) or not on_hold_conversion_ids:
            raise InvalidRequestError("on_hold_conversion_ids must be a non-empty list of IDs")
        body = {
            "on_hold_conversion_ids": [str(i) for i in on_hold_conversion_ids],
            "status": status,
        }
        doc = self._transport.send(
            self._build("PATCH", "/networks/reporting/onhold", body=body, idempotent=True)
        ).object()
        return bool(doc.get("result"))

    def set_sale_amount(
        self, conversion_id: str, *, sale_amount: float, is_event: bool = False
    ) -> bool:
        """Correct a conversion's sale amount (``PUT .../conversions/{id}/saleamount``).

        :param conversion_id: conversion (or event) ID.
        :param sale_amount: the new amount.
        :param is_event: whether the ID is an event's.
        """
        path = f"/networks/reporting/conversions/{quote(str(conversion_id), safe='')}/saleamount"
        body = {"sale_amount": sale_amount, "is_event": bool(is_event)}
        doc = self._transport.send(self._build("PUT", path, body=body, idempotent=True)).object()
        return bool(doc.get("result"))

    def get_transaction_flowchart(self, transaction_id: str) -> dict[str, Any]:
        """Event chain of a transaction (clicks, conversions, pixel_logs).

        :param transaction_id: transaction ID.
        """
        path = f"/networks/reporting/transactions/{quote(str(transaction_id), safe='')}/flowchart"
        return self._transport.send(self._build("GET", path, idempotent=True)).object()

    # ------------------------------------------------------------------ network: objects
    def update_offer_group(self, offer_group_id: int, body: dict[str, Any]) -> dict[str, Any]:
        """Replace an offer group (``PUT /networks/offergroups/{id}``; omitted fields reset).

        :param offer_group_id: offer group ID.
        :param body: the full offer group body.
        """
        path = f"/networks/offergroups/{int(offer_group_id)}"
        return self._transport.send(self._build("PUT", path, body=body, idempotent=True)).object()

    def update_offer(self, offer_id: int, body: dict[str, Any]) -> dict[str, Any]:
        """Replace an offer (``PUT /networks/offers/{id}``).

        :param offer_id: offer ID.
        :param body: the offer object.
        """
        path = f"/networks/offers/{int(offer_id)}"
        return self._transport.send(self._build("PUT", path, body=body, idempotent=True)).object()

    def create_custom_scrub_rate(self, body: dict[str, Any]) -> dict[str, Any]:
        """Create a custom scrub rate setting (``POST /networks/custom/scrubrate``).

        Not idempotent: on a timeout or dropped connection after sending, raises
        :class:`OutcomeUnknownError` and does not re-send.

        :param body: network_offer_id, network_affiliate_id, name, custom_setting_status,
            scrub_rate_percentage (0-100), scrub_rate_status, optional variables and ruleset.
        """
        return self._transport.send(
            self._build("POST", "/networks/custom/scrubrate", body=body, idempotent=False)
        ).object()

    def assign_affiliate_tracking_domain(
        self, affiliate_id: int, body: dict[str, Any]
    ) -> dict[str, Any]:
        """Assign a tracking domain (``PUT /networks/affiliates/{id}/trackingdomains``).

        :param affiliate_id: affiliate ID.
        :param body: network_affiliate_id, network_tracking_domain_id,
            network_affiliate_tracking_domain_id, is_apply_all_offers, network_offer_id.
        """
        path = f"/networks/affiliates/{int(affiliate_id)}/trackingdomains"
        return self._transport.send(self._build("PUT", path, body=body, idempotent=True)).object()

    def update_channel(self, channel_id: int, *, name: str, status: str) -> dict[str, Any]:
        """Replace a channel (``PUT /networks/channels/{id}``; both fields required).

        :param channel_id: channel ID.
        :param name: channel name.
        :param status: ``active`` or ``inactive``.
        """
        body = {"name": name, "status": status}
        path = f"/networks/channels/{int(channel_id)}"
        return self._transport.send(self._build("PUT", path, body=body, idempotent=True)).object()

    def create_category(self, *, name: str, status: str) -> dict[str, Any]:
        """Create an offer category (``POST /networks/categories``; not idempotent).

        :param name: category name.
        :param status: ``active`` or ``inactive``.
        """
        body = {"name": name, "status": status}
        return self._transport.send(
            self._build("POST", "/networks/categories", body=body, idempotent=False)
        ).object()

    def bulk_edit_offer_urls(
        self,
        *,
        network_offer_id: int,
        network_offer_url_ids: Sequence[int],
        fields: Sequence[Mapping[str, Any]],
    ) -> bool:
        """Bulk edit offer URLs (``PATCH /networks/patch/offerurls/apply``).

        :param network_offer_id: offer the URLs belong to.
        :param network_offer_url_ids: URLs to modify.
        :param fields: items ``{field_type, field_value, operator}``.
        :return: the server's ``result``.
        """
        items = [dict(field) for field in fields]
        body = {
            "network_offer_id": int(network_offer_id),
            "network_offer_url_ids": [int(i) for i in network_offer_url_ids],
            "fields": items,
        }
        # overwrite/delete/clear converge when repeated; append may not.
        idempotent = all(item.get("operator") != "append" for item in items)
        doc = self._transport.send(
            self._build(
                "PATCH", "/networks/patch/offerurls/apply", body=body, idempotent=idempotent
            )
        ).object()
        return bool(doc.get("result"))

    def iter_tiered_commissions(
        self,
        *,
        search_terms: Sequence[Mapping[str, Any]] | None = None,
        filters: Mapping[str, Sequence[int]] | None = None,
        page_size: int | None = None,
    ) -> PagedIterator:
        """Tiered commissions (``POST /networks/tieredcommissions/table``) over all pages.

        :param search_terms: items ``{search_type, value}`` (``name`` is the shown type).
        :param filters: ``network_affiliate_ids``, ``network_offer_ids``,
            ``network_advertiser_ids`` (integer lists).
        :param page_size: rows per page.
        """
        body = {
            "search_terms": [dict(term) for term in search_terms or ()],
            "filters": {k: [int(i) for i in v] for k, v in (filters or {}).items()},
        }
        return self.iter_pages(
            "/networks/tieredcommissions/table", key="commissions", body=body, page_size=page_size
        )

    def iter_pixels(
        self,
        *,
        pixel_type: str | None = None,
        network_offer_ids: Sequence[int] | None = None,
        search_terms: Sequence[Mapping[str, Any]] | None = None,
        page_size: int | None = None,
    ) -> PagedIterator:
        """Partner postbacks (``POST /networks/pixelstable``) over all pages.

        :param pixel_type: e.g. ``conversion``.
        :param network_offer_ids: restrict to these offers.
        :param search_terms: items ``{search_type, value}``.
        :param page_size: rows per page.
        """
        filters: dict[str, Any] = {}
        if pixel_type is not None:
            filters["pixel_type"] = pixel_type
        if network_offer_ids is not None:
            filters["network_offer_ids"] = [int(i) for i in network_offer_ids]
        body = {
            "query": {"search_terms": [dict(t) for t in search_terms or ()], "filters": filters}
        }
        return self.iter_pages(
            "/networks/pixelstable", key="pixels", body=body, page_size=page_size
        )

    def get_custom_payout_revenue(
        self, setting_id: int, *, expand_all: bool = False
    ) -> dict[str, Any]:
        """A custom payout/revenue setting (``GET /networks/custom/payoutrevenue/{id}``).

        :param setting_id: setting ID.
        :param expand_all: include ruleset, variables and offer_urls (sends ``relationship=all``).
        """
        params = {"relationship": "all"} if expand_all else None
        path = f"/networks/custom/payoutrevenue/{int(setting_id)}"
        return self._transport.send(
            self._build("GET", path, query=params, idempotent=True)
        ).object()

    def get_offer_url(self, offer_url_id: int) -> dict[str, Any]:
        """An offer URL (``GET /networks/offerurls/{id}``).

        :param offer_url_id: offer URL ID.
        """
        path = f"/networks/offerurls/{int(offer_url_id)}"
        return self._transport.send(self._build("GET", path, idempotent=True)).object()

    def get_label(self, label: str) -> dict[str, Any]:
        """A label record (``GET /networks/labels/{label}``).

        :param label: the label value.
        """
        path = f"/networks/labels/{quote(str(label), safe='')}"
        return self._transport.send(self._build("GET", path, idempotent=True)).object()

    # ------------------------------------------------------------------ aggregated reports
    def _entity_table(
        self, path: str, what: str, query: EntityTableQuery, *, exact: bool = False
    ) -> list[dict[str, Any]]:
        """Build and send one entity-table request (both portals take the same body) and
        refuse a capped answer; ``what`` names the report in the error; ``exact`` reads every
        non-integer JSON number as the :class:`~decimal.Decimal` of its text."""
        columns, filters = query["columns"], query.get("filters")
        from_date, to_date = query["from_date"], query["to_date"]
        timezone_id, currency_id = query["timezone_id"], query.get("currency_id")
        cols = _entity_columns(columns)
        problem = column_count_problem([str(c.get("column")) for c in cols])
        if problem is not None:
            raise InvalidRequestError(f"columns: {problem}")
        start, end = _as_date(from_date, "from_date"), _as_date(to_date, "to_date")
        body: dict[str, Any] = {
            "from": start,
            "to": end,
            "timezone_id": int(timezone_id),
            "columns": cols,
            "query": {"filters": [dict(f) for f in filters or ()]},
        }
        if currency_id:
            body["currency_id"] = currency_id
        # Read-only: re-sent after a timeout. _build decides the quota it draws on: a
        # reporting slot under /networks/reporting/, the granular quota only when a column
        # is granular.
        reply = self._transport.send(self._build("POST", path, body=body, idempotent=True))
        doc = _exact_object(reply.content, what) if exact else reply.object()
        table = doc.get("table")
        if not isinstance(table, list):
            raise AffiliateNetworkError("entity table response has no 'table' list")
        # The documented signal is ``incomplete_results: true``; a table at the cap without
        # it is treated the same (10,000 rows exactly cannot be told from truncation).
        if doc.get("incomplete_results") is True or len(table) >= ENTITY_TABLE_ROW_CAP:
            raise ReportRowLimitError(
                f"the {what} for {start}..{end} returned {len(table)} rows, the "
                f"{ENTITY_TABLE_ROW_CAP:,}-row cap (incomplete_results="
                f"{doc.get('incomplete_results')!r}): the result is incomplete; use fewer "
                "columns, narrower filters or a shorter date range"
            )
        return table

    def network_entity_table(self, **query: Unpack[EntityTableQuery]) -> list[dict[str, Any]]:
        """The network's aggregated report (``POST /networks/reporting/entity/table``).

        Not in the spec; the public reference's "Aggregated Data Reports"
        (``docs/api-decisions.md``): the affiliate table's body, rows ``{"columns":
        [{column_type, id, label}], "reporting": {cv, event, payout, revenue, ...}}``, at most
        10,000 rows. It counts as a reporting
        request (the 10-concurrent cap) and spends a granular query only when a column is
        granular (``report_columns.GRANULAR_COLUMNS``; ``offer`` and ``affiliate`` are not).

        Amounts are exact: every JSON number with a fraction or an exponent is the
        :class:`~decimal.Decimal` of its text (a binary float is wrong from 17 significant
        digits); integers (``cv``, ``event``) are ``int``.

        :param query: the keywords of :class:`EntityTableQuery`.
        :raises ReportRowLimitError: the answer says ``incomplete_results: true`` or reached the
            10,000-row cap; narrow it.
        """
        return self._entity_table(
            "/networks/reporting/entity/table", "network entity table", query, exact=True
        )

    # ------------------------------------------------------------------ affiliate portal
    def affiliate_entity_table(self, **query: Unpack[EntityTableQuery]) -> list[dict[str, Any]]:
        """The affiliate's aggregated report (``POST /affiliates/reporting/entity/table``).

        :param query: the keywords of :class:`EntityTableQuery`.
        :raises ReportRowLimitError: the answer says ``incomplete_results: true`` or reached the
            10,000-row cap (10,000 exactly is indistinguishable from truncation); narrow it.
        """
        return self._entity_table(
            "/affiliates/reporting/entity/table", "affiliate entity table", query
        )

    def encode_ids(
        self, ids: Sequence[int], *, type: str = "tracking_link_affiliate"
    ) -> list[dict[str, Any]]:
        """Encode numeric IDs for tracking links (``POST /affiliates/encode``).

        :param ids: integer IDs.
        :param type: encoding context (``tracking_link_affiliate`` is the documented value).
        :return: ``[{"decoded": int, "encoded": str}, ...]``, one per ID.
        """
        body = {"type": type, "ids": [int(i) for i in ids]}
        doc = self._transport.send(
            self._build("POST", "/affiliates/encode", body=body, idempotent=True)
        ).object()
        return list(doc.get("values") or [])

    # ------------------------------------------------------------------ network and metadata
    def network_info(self) -> dict[str, Any]:
        """The network's configuration (``GET /networks``, network portal).

        Its ``timezone_id`` (the public reference; the timezone guide calls the same setting
        ``reporting_timezone_id``) is the reporting timezone a report request without
        ``timezone_id`` uses.
        """
        return self._transport.send(self._build("GET", "/networks", idempotent=True)).object()

    def timezones(self) -> list[dict[str, Any]]:
        """The API's timezone table (``GET /meta/timezones``; any portal's key).

        Records ``{timezone_id, timezone, timezone_name, utc_offset}``; compare them with
        :data:`affiliate_network.api.timezones.TIMEZONES` through
        :func:`affiliate_network.api.timezones.compare_with_api`.
        """
        doc = self._transport.send(self._build("GET", "/meta/timezones", idempotent=True)).object()
        return list(doc.get("timezones") or [])

    # ------------------------------------------------------------------ test button
    def test_connection(self) -> tuple[bool, str]:
        """One cheap authenticated call for the connection's portal, no retries.

        Network: ``POST /networks/tieredcommissions/table?page=1&page_size=1``; affiliate:
        ``POST /affiliates/encode`` of one ID; advertiser: ``GET /advertisers/advertiser``;
        marketplace: ``GET /partners/connections`` (the spec names the last two as existing but
        shows no shape; only the status is read). The UI button needs
        ``[core] test_connection = Enabled``.
        """
        try:
            portal = self._ready.portal
        except Exception as exc:  # any set-up problem is a failed test, not a crash
            return False, self._scrub(str(exc))
        method, path, params, body = _CHEAP_CALLS[portal]
        single = RetryPolicy(max_attempts=1, base_delay=0, max_delay=0, jitter=0)
        where = f"{method} {path} at {self.base_url}"
        try:
            built = self._build(
                method, path, query=params, body=body, idempotent=True, policy=single, timeout=15
            )
            self._transport.send(built)
        except (AuthenticationError, PermissionDeniedError) as exc:
            return False, f"the {portal} API key was refused by {where}: {exc}"
        except NotFoundError as exc:
            return False, f"{where} answered 404 ({exc.message}): the key could not be verified"
        except AffiliateNetworkError as exc:
            return False, f"the {portal} portal at {self.base_url} failed the test: {exc}"
        except Exception as exc:
            return False, self._scrub(f"{where} failed: {type(exc).__name__}: {exc}")
        return True, f"Connected to the {portal} portal: {where} succeeded"
