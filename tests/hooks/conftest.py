"""Fixtures of the hook tests: connections to the sandbox, a recording clock, a hook factory."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

import pytest
import structlog
from structlog.testing import capture_logs

from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook


class FakeTime:
    """A clock that only moves when the hook sleeps: records every wait, never blocks.

    Injected as the hook's ``sleep`` and ``clock`` so backoff and Retry-After sequences are
    observed exactly and tests stay fast.
    """

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def clock(self) -> float:
        return self.now


@pytest.fixture
def fake_time() -> FakeTime:
    return FakeTime()


@pytest.fixture
def affiliate_id(sandbox) -> str:
    """An affiliate id that has a key in the sandbox."""
    return sorted(sandbox.keys["affiliate"], key=int)[0]


@pytest.fixture
def affiliate_conn(sandbox, make_connection, affiliate_id) -> str:
    return make_connection(
        "affiliate_network_affiliate",
        host=sandbox.base_url,
        key=sandbox.keys["affiliate"][affiliate_id],
        portal="affiliate",
    )


@pytest.fixture
def make_hook() -> Callable[..., AffiliateNetworkHook]:
    """Build hooks with test-sized retry delays (real sleeps, a few ms) unless overridden."""
    hooks: list[AffiliateNetworkHook] = []

    def _make(conn_id: str = "affiliate_network_default", **kwargs) -> AffiliateNetworkHook:
        kwargs.setdefault("base_delay", 0.01)
        kwargs.setdefault("max_delay", 0.05)
        kwargs.setdefault("jitter", 0.0)
        hook = AffiliateNetworkHook(conn_id, **kwargs)
        hooks.append(hook)
        return hook

    yield _make
    for hook in hooks:
        hook.close()


class DebugLogs:
    """Every log line at DEBUG: the hook's (structlog, as Airflow 3 hooks log) and stdlib
    loggers' (urllib3, requests) alike.
    """

    def __init__(self, events: list[dict], caplog: pytest.LogCaptureFixture) -> None:
        self._events = events
        self._caplog = caplog

    def text(self) -> str:
        lines = [str(event) for event in self._events]
        lines += [record.getMessage() for record in self._caplog.records]
        lines.append(self._caplog.text)
        return "\n".join(lines)


@pytest.fixture
def debug_logs(caplog) -> Iterator[DebugLogs]:
    """Capture all logs at DEBUG for one test (create hooks after requesting it)."""
    caplog.set_level(logging.DEBUG)
    saved = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
    try:
        with capture_logs() as events:
            yield DebugLogs(events, caplog)
    finally:
        structlog.configure(**saved)


@pytest.fixture
def requests_to(sandbox) -> Callable[..., list[dict]]:
    """``requests_to(path_suffix, method=None)``: sandbox request-log entries for that path."""

    def _select(path_suffix: str, method: str | None = None) -> list[dict]:
        return [
            entry
            for entry in sandbox.requests_log()
            if entry["path"].endswith(path_suffix) and (method is None or entry["method"] == method)
        ]

    return _select
