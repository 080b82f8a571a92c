"""The hook's transport: sessions, the API key header, retries, throttling and error mapping.

One :class:`Transport` per hook, built once the connection is read. It knows nothing of the
API's endpoints: :class:`~affiliate_network.hooks.affiliate_network.AffiliateNetworkHook`
builds paths and bodies and calls :meth:`Transport.send`. The retry rules (what may be re-sent
after a timeout, a dropped connection, a 429 or a 5xx) are described in the hook's module
docstring and :mod:`affiliate_network.hooks._retry`.
"""

from __future__ import annotations

import contextlib
import queue
import random
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import orjson
import requests
import urllib3
from requests_toolbelt.adapters.socket_options import TCPKeepAliveAdapter

from affiliate_network.exceptions import (
    OutcomeUnknownError,
    TransportError,
    error_for_status,
)
from affiliate_network.hooks._budget import SharedBudget
from affiliate_network.hooks._ratelimit import RateLimitThrottle
from affiliate_network.hooks._retry import (
    RetryPolicy,
    is_retryable_status,
    parse_retry_after,
    was_never_sent,
)
from affiliate_network.report_columns import granular_columns
from affiliate_network.tasklog import TaskLog

API_KEY_HEADER = "X-Svc-Api-Key"
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
class Reply:
    """A 2xx answer: status, whole body, and the retries it took."""

    status: int
    content: bytes
    retries: int


@dataclass(frozen=True)
class _Request:
    method: str
    path: str
    url: str
    params: Mapping[str, Any] | None
    data: bytes | None
    headers: dict[str, str] | None
    timeouts: tuple[float, float]
    shown: str  # path and query, for the debug log


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


def new_session(
    api_key: str, extras: Mapping[str, Any], adapter: requests.adapters.HTTPAdapter | None
) -> requests.Session:
    """A ``requests`` session with the key header and the connection's transport extras.

    The key travels in ``X-Svc-Api-Key``, never as basic auth. ``verify``/``verify_ssl``,
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
    session.headers.update({API_KEY_HEADER: api_key, "Accept": "application/json"})
    return session


class Transport:
    """Sends requests to one base URL with one API key: session pool, retries, throttle.

    :param base_url: URL every path is appended to (ends in ``/v1``).
    :param api_key: the portal's API key (already registered with the secrets masker).
    :param extras: the connection's transport extras (see :data:`TRANSPORT_EXTRAS`).
    :param adapter: ``requests`` adapter mounted on every session (default: TCP keep-alive).
    :param timeout_s: read timeout per request in seconds.
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
        extras: Mapping[str, Any],
        adapter: requests.adapters.HTTPAdapter | None,
        timeout_s: float,
        throttle: RateLimitThrottle,
        budget: SharedBudget,
        sleep: Callable[[float], None],
        clock: Callable[[], float],
        rng: random.Random,
        log: TaskLog,
    ) -> None:
        self.base_url = base_url
        self.timeout_s = timeout_s
        self._api_key = api_key
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
        return new_session(self._api_key, self._extras, self._adapter)

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
    def send(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
        idempotent: bool,
        policy: RetryPolicy,
        timeout: float | None = None,
        cancel: threading.Event | None = None,
    ) -> Reply:
        """Send one request with the retry policy; return the 2xx reply or raise.

        :param method: HTTP method.
        :param path: path after the base URL.
        :param params: query string.
        :param body: JSON body.
        :param idempotent: whether it may be re-sent after it may have arrived.
        :param policy: attempts and backoff.
        :param timeout: read timeout (default: :attr:`timeout_s`).
        :param cancel: set when nobody waits for the answer any more (no further retries).
        :raises GranularQuotaError: a granular query (a body naming a granular column) that
            the network's rolling-hour quota has no room for; nothing was sent.
        :raises OutcomeUnknownError: a non-idempotent request may have been applied.
        :raises TransportError: no answer after the last attempt.
        :raises AffiliateNetworkError: the error class of the final HTTP status.
        """
        data = orjson.dumps(body) if body is not None else None
        read_timeout = timeout or self.timeout_s
        request = _Request(
            method=method,
            path=path,
            url=self.base_url + path,
            params=params,
            data=data,
            headers={"Content-Type": "application/json"} if data is not None else None,
            timeouts=(min(CONNECT_TIMEOUT_S, read_timeout), read_timeout),
            shown=f"{path}?{urlencode(params)}" if params else path,
        )
        granular = isinstance(body, dict) and bool(granular_columns(body.get("columns")))
        attempt = 0
        while True:
            attempt += 1
            if granular:  # each attempt may be counted by the server: count each here too
                self.budget.take_granular(1, f"{method} {path}")
            lease = self.budget.acquire(path)
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
                self._give_up_on_exception(
                    failure, request, attempt, policy, idempotent, cancel, started
                )
                self._sleep(policy.backoff(attempt, self._rng.random()))
                continue
            self.budget.observe_limit(headers.get("X-RateLimit-Limit"))
            retry_after = self._account(request, status, headers, started, attempt, policy)
            if 200 <= status < 300:
                return Reply(status, content, attempt - 1)
            message = self.error_message(content, reason, status)
            del content
            delay = self._retry_delay(
                request, status, message, retry_after, attempt, policy, idempotent, cancel
            )
            if delay is None:
                error = error_for_status(status, message)
                error.method, error.path = method, path
                raise error
            self._sleep(delay)

    def _exchange(self, request: _Request) -> tuple[int, str | None, Mapping[str, str], bytes]:
        """One HTTP exchange: status, reason, headers and the whole body."""
        with self.session() as session:
            # allow_redirects=False: requests would forward X-Svc-Api-Key to any host a
            # redirect names.
            response = session.request(
                request.method,
                request.url,
                params=request.params,
                data=request.data,
                headers=request.headers,
                timeout=request.timeouts,
                allow_redirects=False,
                stream=True,
            )
            content = read_body(response)
        return response.status_code, response.reason, response.headers, content

    def _give_up_on_exception(
        self,
        exc: requests.RequestException,
        request: _Request,
        attempt: int,
        policy: RetryPolicy,
        idempotent: bool,
        cancel: threading.Event | None,
        started: float,
    ) -> None:
        """Raise when a request that got no answer may not (or need not) be sent again."""
        method, path = request.method, request.path
        kind = "timeout" if isinstance(exc, requests.Timeout) else "connection error"
        self.log.debug(
            "%s %s -> %s after %.3fs (attempt %d/%d)",
            method,
            request.shown,
            kind,
            self._clock() - started,
            attempt,
            policy.max_attempts,
        )
        # The requests exception holds the prepared request (and so the key header): it is
        # summarised, never chained.
        detail = self.scrub(f"{type(exc).__name__}: {exc}")
        if not idempotent and not was_never_sent(exc):
            raise OutcomeUnknownError(
                f"{method} {path}: {kind} after the request was sent; the server may "
                f"have applied it. It was not re-sent: check the current state before "
                f"trying again ({detail})"
            ) from None
        if attempt >= policy.max_attempts or (cancel is not None and cancel.is_set()):
            raise TransportError(
                f"{method} {path}: {kind} on attempt {attempt} of {policy.max_attempts} ({detail})"
            ) from None

    def _account(
        self,
        request: _Request,
        status: int,
        headers: Mapping[str, str],
        started: float,
        attempt: int,
        policy: RetryPolicy,
    ) -> float | None:
        """Feed the throttle, log the exchange; the ``Retry-After`` to honour (capped)."""
        remaining_header = headers.get("X-RateLimit-Remaining") or ""
        remaining = int(remaining_header) if remaining_header.isdigit() else None
        retry_after = (
            parse_retry_after(headers.get("Retry-After")) if is_retryable_status(status) else None
        )
        if retry_after is not None and retry_after > RETRY_AFTER_CAP_S:
            self.log.warning(
                "%s %s: %d with Retry-After %.0f s, capped at %.0f s (the spec's backoff ceiling)",
                request.method,
                request.path,
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
            policy.max_attempts,
        )
        return retry_after

    def _retry_delay(
        self,
        request: _Request,
        status: int,
        message: str,
        retry_after: float | None,
        attempt: int,
        policy: RetryPolicy,
        idempotent: bool,
        cancel: threading.Event | None,
    ) -> float | None:
        """Seconds to wait before re-sending after an error status; None: raise it."""
        if not is_retryable_status(status):
            return None
        method, path = request.method, request.path
        if not idempotent and status not in SAFE_RESEND_STATUSES:
            raise OutcomeUnknownError(
                f"{method} {path}: {status} {message}; the server may have applied "
                "it. It was not re-sent: check the current state before trying again",
                status,
            )
        if attempt < policy.max_attempts and not (cancel is not None and cancel.is_set()):
            if retry_after is not None:
                return retry_after
            return policy.backoff(attempt, self._rng.random())
        self.log.warning(
            "%s %s: giving up after %d attempts, last status %d", method, path, attempt, status
        )
        return None
