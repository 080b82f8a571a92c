"""Fixtures of the on-hold operator tests (the sandbox's window, truth and a rules file)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.operators.onhold_support import RULES


@pytest.fixture
def window(sandbox) -> tuple[str, str]:
    catalog = sandbox.catalog()
    return catalog["first_date"], catalog["last_date"]


@pytest.fixture
def rules_file(tmp_path) -> Path:
    path = tmp_path / "onhold_rules_test.yaml"
    path.write_text(RULES)
    return path


@pytest.fixture
def truth(sandbox, window) -> dict[str, set[str]]:
    """Planted on-hold ids per pattern."""
    planted = sandbox.planted(*window)["on_hold_conversion_ids"]
    return {name: set(ids) for name, ids in planted.items()}
