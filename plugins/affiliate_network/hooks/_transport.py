"""The hook's transport: sessions, the API key header, retries, throttling and error mapping.

One :class:`Transport` per hook, built once the connection is read. It knows nothing of the
API's endpoints: :class:`~affiliate_network.hooks.affiliate_network.AffiliateNetworkHook`
builds each call as one :class:`Request` (path, query, encoded body, what it may re-send, which
quota it draws on, timeout) and hands it to :meth:`Transport.send`, which does the rest
(session, retries, throttle, shared budget, error mapping, logging). The retry rules (what may
be re-sent after a timeout, a dropped connection, a 429 or a 5xx) are described in the hook's
module docstring and :mod:`affiliate_network.hooks._retry`.
"""

from __future__ import annotations

import contextlib
import queue
import random
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlencode

import orjson
import requests
import urllib3
from requests_toolbelt.adapters.socket_options import TCPKeepAliveAdapter

from affiliate_network.exceptions import (
    AffiliateNetworkError,
    ConnectionConfigError,
    OutcomeUnknownError,
    TransportError,
    error_for_status,
)
from affiliate_network.helpers.tasklog import TaskLog
from affiliate_network.hooks._budget import SharedBudget
from affiliate_network.hooks._ratelimit import RateLimitThrottle
from affiliate_network.hooks._retry import (
    RetryPolicy,
    is_retryable_status,
    parse_retry_after,
    was_never_sent,
)

API_KEY_HEADER = "X-Svc-Api-Key"
#: The connection extra naming the key header (default :data:`API_KEY_HEADER`, the spec's).
#: Not ``api_key_header``: Airflow's masker treats any extra whose name holds ``api_key`` as a
#: secret, and would hide the header's name in every log line and in the connection form.
KEY_HEADER_EXTRA = "key_header"
#: The real API family's spelling, sent by its public clients (docs/api-decisions.md).
REAL_FAMILY_KEY_HEADER = "X-Eflow-API-Key"
#: An HTTP field name: RFC 9110 ``token`` characters, bounded.
_HEADER_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,64}\Z")
#: Names the key cannot travel in: ones the session sets itself or that frame the message.
_RESERVED_HEADERS = frozenset(
    {"accept", "content-type", "content-length", "host", "transfer-encoding", "connection"}
)
CONNECT_TIMEOUT_S = 10.0
#: The one status after which a non-idempotent request is re-sent: a 429 is the rate limiter
#: refusing the request before it was handled. Any 5xx may come after the create was applied
#: (a proxy's 502/504, a 500 thrown after the insert, a 503 from a draining instance), so a
#: create is never re-sent on one: the caller reconciles instead (safe side for creates).
SAFE_RESEND_STATUSES = frozenset({429})
#: Longest ``Retry-After`` honoured, in seconds: the spec's backoff ceiling.
RETRY_AFTER_CAP_S = 30.0
#: Connection extras that set ``requests`` transport options (the names providers-http reads);
#: every other extra (portal, region, ...) stays out of the session and is never sent.
TRANSPORT_EXTRAS = ("stream", "cert", "proxies", "proxy", "verify", "verify_ssl", "trust_env")


@dataclass(frozen=True)
class Request:
    """One request as the hook built it: everything :meth:`Transport.send` needs.

    :param method: HTTP method (upper case).
    :param path: path after the base URL (its portal already checked against the key's).
    :param query: query string (``page``/``page_size`` of a paged pull), or ``None``.
    :param data: the JSON body, encoded, or ``None`` (no body).
    :param idempotent: whether it may be re-sent after it may have arrived.
    :param reporting: whether it holds one of the network's reporting-concurrency slots while
        in flight (``/networks/reporting/*``).
    :param granular: whether each attempt counts against the granular-query quota (the body
        names a granular column).
    :param policy: attempts and backoff.
    :param timeout_s: read timeout in seconds (the connect timeout is at most
        :data:`CONNECT_TIMEOUT_S`).
    :param cancel: set when nobody waits for the answer any more (no further retries).
    """

    method: str
    path: str
    query: Mapping[str, Any] | None
    data: bytes | None
    idempotent: bool
    reporting: bool
    granular: bool
    policy: RetryPolicy
    timeout_s: float
    cancel: threading.Event | None = None

    @property
    def what(self) -> str:
        """``METHOD /path``, for errors and warnings."""
        return f"{self.method} {self.path}"

    @property
    def shown(self) -> str:
        """Path and query, for the debug log."""
        return f"{self.path}?{urlencode(self.query)}" if self.query else self.path

    @property
    def cancelled(self) -> bool:
        """Whether the caller stopped waiting (a closed paged pull)."""
        return self.cancel is not None and self.cancel.is_set()

    def page(self, number: int, size: int) -> Request:
        """The same request for one page of a paged pull (paging travels in the query)."""
        return replace(self, query={"page": number, "page_size": size})


@dataclass(frozen=True)
class Reply:
    """A 2xx answer: status, whole body, the retries it took, and what was asked."""

    status: int
    content: bytes
    retries: int
    what: str

    def json(self) -> Any:
        """The parsed body (``None`` when empty).

        :raises AffiliateNetworkError: the body is not JSON.
        """
        if not self.content:
            return None
        try:
            return orjson.loads(self.content)
        except orjson.JSONDecodeError:
            raise AffiliateNetworkError(f"{self.what}: the response is not JSON") from None

    def object(self) -> dict[str, Any]:
        """The body of an endpoint that answers one JSON object (``{}`` when empty).

        :raises AffiliateNetworkError: the body is not JSON, or JSON but not an object.
        """
        doc = self.json()
        if doc is None:
            return {}
        if not isinstance(doc, dict):
            raise AffiliateNetworkError(
                f"{self.what}: the response is a JSON {type(doc).__name__}, not an object"
            )
        return doc


def read_body(response: requests.Response) -> bytes:
    """The whole body in one read: ``response.content`` joins 10 kB chunks, holding a multi-MB
    page twice and costing a Python-level loop per chunk.
    """
    try:
        return response.raw.read(decode_content=True) or b""
    except urllib3.exceptions.ReadTimeoutError as exc:
        raise requests.exceptions.ReadTimeout(str(exc)) from None
    except urllib3.exceptions.HTTPError as exc:  # ProtocolError, DecodeError, ...
        raise requests.exceptions.ChunkedEncodingError(str(exc)) from None
    finally:
        response.close()  # after a full read this only returns the connection to the pool


def key_header_name(value: Any, conn_id: str) -> str:
    """The header the API key travels in, from the connection extra :data:`KEY_HEADER_EXTRA`.

    Unset, ``None`` or blank: :data:`API_KEY_HEADER`. Otherwise a legal HTTP field name (RFC
    9110 token characters, at most 64) that the session does not set itself; surrounding
    blanks are dropped. Header names are case-insensitive, so the spelling is kept as given.

    :param value: the extra's value.
    :param conn_id: the connection, for the error.
    :raises ConnectionConfigError: naming the extra, never its value (it may be the API key
        typed into the wrong field).
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return API_KEY_HEADER
    name = value.strip() if isinstance(value, str) else ""
    if not _HEADER_TOKEN.match(name) or name.lower() in _RESERVED_HEADERS:
        raise ConnectionConfigError(
            f"connection {conn_id!r}: extra {KEY_HEADER_EXTRA!r} must be an HTTP header name "
            "(1 to 64 letters, digits or !#$%&'*+-.^_`|~; not Accept, Content-Type, "
            f"Content-Length, Host, Transfer-Encoding or Connection), e.g. {API_KEY_HEADER!r} "
            f"(the default) or {REAL_FAMILY_KEY_HEADER!r}"
        )
    return name


def new_session(
    api_key: str,
    extras: Mapping[str, Any],
    adapter: requests.adapters.HTTPAdapter | None,
    key_header: str = API_KEY_HEADER,
) -> requests.Session:
    """A ``requests`` session with the key header and the connection's transport extras.

    The key travels in ``key_header`` (default ``X-Svc-Api-Key``; :func:`key_header_name`),
    never as basic auth. ``verify``/``verify_ssl``,
    ``proxies``/``proxy``, ``cert``, ``stream`` and ``trust_env`` are read as providers-http
    reads them; no other extra reaches the session. One adapter (one connection pool) per
    session: a session is used by one thread at a time.
    """
    session = requests.Session()
    session.auth = None
    session.proxies = extras.get("proxies", extras.get("proxy")) or {}
    session.stream = extras.get("stream", False)
    session.verify = extras.get("verify", extras.get("verify_ssl", True))
    session.cert = extras.get("cert")
    session.trust_env = extras.get("trust_env", True)
    mounted = adapter or TCPKeepAliveAdapter(
        idle=120, count=20, interval=30, pool_connections=1, pool_maxsize=1
    )
    session.mount("http://", mounted)
    session.mount("https://", mounted)
    session.headers.update({key_header: api_key, "Accept": "application/json"})
    return session


class Transport:
    """Sends requests to one base URL with one API key: session pool, retries, throttle.

    :param base_url: URL every path is appended to (ends in ``/v1``).
    :param api_key: the portal's API key (already registered with the secrets masker).
    :param key_header: the header the key travels in (:func:`key_header_name`).
    :param extras: the connection's transport extras (see :data:`TRANSPORT_EXTRAS`).
    :param adapter: ``requests`` adapter mounted on every session (default: TCP keep-alive).
    :param throttle: the hook's rate-limit throttle.
    :param budget: the network's quota shared with every other process (paces requests,
        caps reporting concurrency, counts granular queries).
    :param sleep: how waits are made (injectable to record them).
    :param clock: monotonic clock in seconds.
    :param rng: source of jitter.
    :param log: the hook's logger.
    """

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        key_header: str = API_KEY_HEADER,
        extras: Mapping[str, Any],
        adapter: requests.adapters.HTTPAdapter | None,
        throttle: RateLimitThrottle,
        budget: SharedBudget,
        sleep: Callable[[float], None],
        clock: Callable[[], float],
        rng: random.Random,
        log: TaskLog,
    ) -> None:
        self.base_url = base_url
        self._api_key = api_key
        self.key_header = key_header
        self._extras = {k: extras[k] for k in TRANSPORT_EXTRAS if k in extras}
        self._adapter = adapter
        self._throttle = throttle
        self.budget = budget
        self._sleep = sleep
        self._clock = clock
        self._rng = rng
        self.log = log
        self._sessions: queue.LifoQueue[requests.Session] = queue.LifoQueue()

    # ------------------------------------------------------------------ sessions
    def new_session(self) -> requests.Session:
        """A new session carrying the key header and the transport extras."""
        return new_session(self._api_key, self._extras, self._adapter, self.key_header)

    @contextlib.contextmanager
    def session(self) -> Iterator[requests.Session]:
        """Borrow a pooled session for one request, so no two threads share one."""
        try:
            session = self._sessions.get_nowait()
        except queue.Empty:
            session = self.new_session()
        try:
            yield session
        finally:
            self._sessions.put(session)

    def close(self) -> None:
        """Close the pooled sessions (new ones are made on demand)."""
        while True:
            try:
                self._sessions.get_nowait().close()
            except queue.Empty:
                break

    def scrub(self, text: str) -> str:
        """``text`` with the API key replaced by ``***``."""
        return text.replace(self._api_key, "***") if self._api_key else text

    def error_message(self, content: bytes, reason: str | None, status: int) -> str:
        """The server's ``error``, falling back to ``Error`` (spec, "Errors")."""
        try:
            doc = orjson.loads(content)
        except orjson.JSONDecodeError:
            doc = None
        if isinstance(doc, dict):
            message = doc.get("error") or doc.get("Error")
            if message:
                return self.scrub(str(message))
        return reason or f"HTTP {status}"

    # ------------------------------------------------------------------ sending
    def send(self, request: Request) -> Reply:
        """Send ``request`` with its retry policy; return the 2xx reply or raise.

        :raises GranularQuotaError: a granular query that the network's rolling-hour quota has
            no room for; nothing was sent.
        :raises OutcomeUnknownError: a non-idempotent request may have been applied.
        :raises TransportError: no answer after the last attempt.
        :raises AffiliateNetworkError: the error class of the final HTTP status.
        """
        attempt = 0
        while True:
            attempt += 1
            if request.granular:  # each attempt may be counted by the server: count each here too
                self.budget.take_granular(1, request.what)
            lease = self.budget.acquire(reporting=request.reporting)
            failure: requests.RequestException | None = None
            try:
                self._throttle.acquire()
                started = self._clock()
                try:
                    status, reason, headers, content = self._exchange(request)
                except requests.RequestException as exc:
                    self._throttle.release(remaining=None, status=None)
                    failure = exc
            finally:
                self.budget.release(lease)  # answered (or failed): no longer in flight
            if failure is not None:
                self._give_up_on_exception(failure, request, attempt, started)
                self._sleep(request.policy.backoff(attempt, self._rng.random()))
                continue
            self.budget.observe_limit(headers.get("X-RateLimit-Limit"))
            retry_after = self._account(request, status, headers, started, attempt)
            if 200 <= status < 300:
                return Reply(status, content, attempt - 1, request.what)
            message = self.error_message(content, reason, status)
            del content
            delay = self._retry_delay(request, status, message, retry_after, attempt)
            if delay is None:
                if is_retryable_status(status):  # the error says it was retried, and how often
                    plural = "s" if attempt != 1 else ""
                    message = f"{message} ({request.what}: gave up after {attempt} attempt{plural})"
                error = error_for_status(status, message)
                error.method, error.path = request.method, request.path
                raise error
            self._sleep(delay)

    def _exchange(self, request: Request) -> tuple[int, str | None, Mapping[str, str], bytes]:
        """One HTTP exchange: status, reason, headers and the whole body."""
        data = request.data
        with self.session() as session:
            # allow_redirects=False: requests would forward the key header to any host a
            # redirect names.
            response = session.request(
                request.method,
                self.base_url + request.path,
                params=request.query,
                data=data,
                headers={"Content-Type": "application/json"} if data is not None else None,
                timeout=(min(CONNECT_TIMEOUT_S, request.timeout_s), request.timeout_s),
                allow_redirects=False,
                stream=True,
            )
            content = read_body(response)
        return response.status_code, response.reason, response.headers, content

    def _give_up_on_exception(
        self,
        exc: requests.RequestException,
        request: Request,
        attempt: int,
        started: float,
    ) -> None:
        """Raise when a request that got no answer may not (or need not) be sent again."""
        kind = "timeout" if isinstance(exc, requests.Timeout) else "connection error"
        max_attempts = request.policy.max_attempts
        self.log.debug(
            "%s %s -> %s after %.3fs (attempt %d/%d)",
            request.method,
            request.shown,
            kind,
            self._clock() - started,
            attempt,
            max_attempts,
        )
        # The requests exception holds the prepared request (and so the key header): it is
        # summarised, never chained.
        detail = self.scrub(f"{type(exc).__name__}: {exc}")
        if not request.idempotent and not was_never_sent(exc):
            raise OutcomeUnknownError(
                f"{request.what}: {kind} after the request was sent; the server may "
                f"have applied it. It was not re-sent: check the current state before "
                f"trying again ({detail})"
            ) from None
        if attempt >= max_attempts or request.cancelled:
            raise TransportError(
                f"{request.what}: {kind} on attempt {attempt} of {max_attempts} ({detail})"
            ) from None

    def _account(
        self,
        request: Request,
        status: int,
        headers: Mapping[str, str],
        started: float,
        attempt: int,
    ) -> float | None:
        """Feed the throttle, log the exchange; the ``Retry-After`` to honour (capped)."""
        remaining_header = headers.get("X-RateLimit-Remaining") or ""
        remaining = int(remaining_header) if remaining_header.isdigit() else None
        retry_after = (
            parse_retry_after(headers.get("Retry-After")) if is_retryable_status(status) else None
        )
        if retry_after is not None and retry_after > RETRY_AFTER_CAP_S:
            self.log.warning(
                "%s: %d with Retry-After %.0f s, capped at %.0f s (the spec's backoff ceiling)",
                request.what,
                status,
                retry_after,
                RETRY_AFTER_CAP_S,
            )
            retry_after = RETRY_AFTER_CAP_S
        self._throttle.release(
            remaining=remaining, status=status, retry_after=retry_after, sent_at=started
        )
        self.log.debug(
            "%s %s -> %d in %.3fs (attempt %d/%d)",
            request.method,
            request.shown,
            status,
            self._clock() - started,
            attempt,
            request.policy.max_attempts,
        )
        return retry_after

    def _retry_delay(
        self,
        request: Request,
        status: int,
        message: str,
        retry_after: float | None,
        attempt: int,
    ) -> float | None:
        """Seconds to wait before re-sending after an error status; None: raise it."""
        if not is_retryable_status(status):
            return None
        if not request.idempotent and status not in SAFE_RESEND_STATUSES:
            raise OutcomeUnknownError(
                f"{request.what}: {status} {message}; the server may have applied "
                "it. It was not re-sent: check the current state before trying again",
                status,
            )
        if attempt < request.policy.max_attempts and not request.cancelled:
            if retry_after is not None:
                return retry_after
            return request.policy.backoff(attempt, self._rng.random())
        self.log.warning(
            "%s: giving up after %d attempts, last status %d", request.what, attempt, status
        )
        return None
