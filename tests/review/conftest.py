"""Review job test fixtures (window, truth, rules file: tests/support/onhold_fixtures.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from affiliate_network_sandbox.testing import start_sandbox


@pytest.fixture(autouse=True)
def _review_tests_include(rules_include: Path) -> Path:
    """Every review test reads rules from a copy of include/ (set_review writes its settings)."""
    return rules_include


@pytest.fixture(scope="module")
def world(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A sandbox of its own for the module, started with the module's ``WORLD`` arguments."""
    with start_sandbox(**request.module.WORLD) as sandbox:
        yield sandbox


@pytest.fixture
def conn(world: Any, make_connection: Any, request: pytest.FixtureRequest) -> str:
    """A network connection to ``world``, reset to its seeded state; named after the module."""
    world.reset()
    name = "afn_" + request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
    return make_connection(name, host=world.base_url, key=world.keys["network"])
