"""Fixtures of the hook tests: connections to the sandbox, a recording clock, a hook factory."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

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


@pytest.fixture
def debug_logs(caplog, monkeypatch) -> pytest.LogCaptureFixture:
    """Capture every logger at DEBUG (the hook's own logger included)."""
    for name in ("airflow", "airflow.task", "airflow.task.hooks"):
        monkeypatch.setattr(logging.getLogger(name), "propagate", True)
    caplog.set_level(logging.DEBUG)
    return caplog


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
