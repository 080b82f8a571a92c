"""Fixtures of the review job tests: the on-hold operator tests' window, truth and rules file."""

from __future__ import annotations

from tests.operators.conftest import (  # noqa: F401 - fixtures
    rules_file,
    rules_include,
    truth,
    window,
)
