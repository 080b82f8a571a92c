"""Helpers for the sync tests: the example desired state as a dict, and a writer for variants."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from demo import SANDBOX_OFFER_STATE

#: The sandbox's example desired state (include/offer_state.yaml is a template).
EXAMPLE = SANDBOX_OFFER_STATE


@pytest.fixture
def example_doc() -> dict[str, Any]:
    """A fresh, mutable copy of the sandbox's example (``demo/include/offer_state.yaml``)."""
    return copy.deepcopy(yaml.safe_load(EXAMPLE.read_text()))


@pytest.fixture
def write_state(tmp_path: Path) -> Callable[[dict[str, Any]], Path]:
    """Write a desired-state dict to a YAML file (keys in insertion order) and return its path."""
    counter = {"n": 0}

    def _write(doc: dict[str, Any]) -> Path:
        counter["n"] += 1
        path = tmp_path / f"state-{counter['n']}.yaml"
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        return path

    return _write
