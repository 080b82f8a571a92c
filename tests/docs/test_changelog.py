"""CHANGELOG.md is by release, newest first, each release with its upgrade notes."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _sections() -> list[tuple[str, str]]:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    parts = re.split(r"^## (.+)$", text, flags=re.MULTILINE)
    return list(zip(parts[1::2], parts[2::2], strict=True))


def test_unreleased_first_then_versions_newest_first_down_to_pyprojects() -> None:
    titles = [title for title, _ in _sections()]
    assert titles[0] == "Unreleased"
    versions = [re.match(r"(\d+)\.(\d+)\.(\d+)", t) for t in titles[1:]]
    assert all(versions), titles
    numbers = [tuple(int(n) for n in m.groups()) for m in versions if m]
    assert numbers == sorted(numbers, reverse=True)
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert version in [m.group(0) for m in versions if m]


def test_every_release_has_upgrade_notes_and_changes() -> None:
    for title, body in _sections():
        subsections = re.findall(r"^### (.+)$", body, flags=re.MULTILINE)
        assert subsections == ["Upgrade notes", "Changes"], title
