"""The on-hold review's settings of a test: keys of the rules file's ``review:`` section."""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path
from typing import Any

from affiliate_network.settings.paths import INCLUDE_DIR_ENV, PROJECT_ROOT, include_dir
from demo import demo_include


def include_with_review(folder: Path, **settings: Any) -> Path:
    """``folder`` as a copy of the demo's include folder (the project's, with the sandbox's
    desired offer state: :func:`demo.demo_include`) whose ``onhold_rules.yaml`` sets
    ``settings`` in its ``review:`` section; returns it (make it the include folder with
    :data:`INCLUDE_DIR_ENV`)."""
    if not folder.exists():
        demo_include(PROJECT_ROOT / "include", folder)
    rules = folder / "onhold_rules.yaml"
    text = old = rules.read_text()
    for key, value in settings.items():
        text, found = re.subn(rf"(?m)^  {key}: .*$", f"  {key}: {json.dumps(value)}", text)
        assert found == 1, f"review.{key} is not in {rules}"
    if text != old:  # whole, at once: tests run reviews in threads and subprocesses
        spare = rules.with_name(f".{rules.name}.{os.getpid()}.{threading.get_ident()}")
        spare.write_text(text)
        spare.replace(rules)
    return folder


def set_review(**settings: Any) -> None:
    """Set ``settings`` in the ``review:`` section of the include folder's onhold_rules.yaml:
    a test's copy of the folder (the ``rules_include`` fixture), never the project's."""
    folder = include_dir()
    assert folder.resolve() != (PROJECT_ROOT / "include").resolve(), "use rules_include"
    include_with_review(folder, **settings)


__all__ = ["INCLUDE_DIR_ENV", "include_with_review", "set_review"]
