"""Fixtures of the on-hold operator and review job tests: the sandbox's window, truth, a copy
of include/ and a rules file (registered for the whole suite by tests/conftest.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from affiliate_network.settings.paths import INCLUDE_DIR_ENV, include_dir
from tests.support.onhold_support import RULES


@pytest.fixture
def window(sandbox) -> tuple[str, str]:
    catalog = sandbox.catalog()
    return catalog["first_date"], catalog["last_date"]


@pytest.fixture
def rules_include(tmp_path, monkeypatch) -> Path:
    """A copy of include/ as the include folder: the review reads rules files from there only
    (``review.rules_files``), so a test's own rules file goes into it (see ``review_op``)."""
    folder = tmp_path / "include"
    folder.mkdir(exist_ok=True)
    for src in include_dir().glob("*.yaml"):
        shutil.copyfile(src, folder / src.name)
    monkeypatch.setenv(INCLUDE_DIR_ENV, str(folder))
    return folder


@pytest.fixture
def rules_file(rules_include) -> Path:
    path = rules_include / "onhold_rules_test.yaml"
    path.write_text(RULES)
    return path


@pytest.fixture
def truth(sandbox, window) -> dict[str, set[str]]:
    """Planted on-hold ids per pattern."""
    planted = sandbox.planted(*window)["on_hold_conversion_ids"]
    return {name: set(ids) for name, ids in planted.items()}
