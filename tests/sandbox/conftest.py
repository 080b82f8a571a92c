"""Fixtures of the sandbox contract tests (the client: tests/support/sandbox_api.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.sandbox_api import Api


@pytest.fixture
def api(sandbox: Any) -> Api:
    return Api(sandbox)


@pytest.fixture
def day(sandbox: Any) -> str:
    """The last day with data (UTC)."""
    return sandbox.catalog()["last_date"]


@pytest.fixture
def catalog(sandbox: Any) -> dict:
    return sandbox.catalog()
