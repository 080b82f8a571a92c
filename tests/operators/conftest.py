"""Operator tests read rules from a copy of include/ (tests/support/onhold_fixtures.py)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _operator_tests_include(rules_include) -> Path:
    """Every operator test reads rules from a copy of include/ (tests here write their own)."""
    return rules_include
