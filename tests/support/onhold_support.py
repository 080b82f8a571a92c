"""Shared pieces of the on-hold operator tests: a rules file mapping each planted pattern to one
action, the operator factory, and readers of what the sandbox saw."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from affiliate_network.operators.onhold_review import OnHoldReviewOperator
from affiliate_network.rules.model import ReviewSettings
from tests.support.sandbox_reads import onhold_states

RULES = """\
lists:
  blocked: [blk-botnet-01, blk-botnet-02, blk-incent-07, blk-cookie-stuff, blk-adware-33,
            blk-proxy-farm]
rules:
  - id: blocked-sub1
    description: Blocklisted sub ID
    action: reject
    when: {field: sub1, in: $blocked}
  - id: duplicate-ip
    description: Three or more conversions from one IP within 24 hours
    action: reject
    when: {agg: {count_same: conversion_user_ip, within_hours: 24}, ge: 3}
  - id: ip-mismatch-approved
    description: Test rule approving the IP-mismatch pattern
    action: approve
    when: {field: ip_mismatch, eq: true}
  - id: outlier-review
    description: Big sale, ask a person
    action: review
    when: {field: sale_amount, ge: 5000}
  - id: fast-click-hold
    description: Keep fast clicks on hold
    action: hold
    when: {field: click_to_conversion_seconds, lt: 10}
"""

ONHOLD_PATH = "/v1/networks/reporting/onhold"


def after_the_data(window: tuple[str, str]) -> str:
    """An as_of once every conversion of the window exists and its 24 h aggregates are complete."""
    import datetime as dt

    return f"{dt.date.fromisoformat(window[1]) + dt.timedelta(days=2)}T00:00:00+00:00"


def in_include(rules_file: Path) -> str:
    """The name the review reads ``rules_file`` by: a file outside the include folder (a test's
    own, in tmp_path) is copied into it first. The include folder is then a test's copy
    (the ``rules_include`` fixture), never the project's."""
    from affiliate_network.settings.paths import PROJECT_ROOT, include_dir

    folder = include_dir()
    if Path(rules_file).parent.resolve() == folder.resolve():
        return Path(rules_file).name
    assert folder.resolve() != (PROJECT_ROOT / "include").resolve(), "use the rules_include fixture"
    name = f"onhold_rules_{Path(rules_file).stem}.yaml"
    shutil.copyfile(rules_file, folder / name)
    return name


#: The rules file's ``review:`` keys a test may give review_op like arguments.
REVIEW_KEYS = frozenset(ReviewSettings.model_fields)


def with_review(rules_file: Path, settings: dict[str, Any]) -> Path:
    """A copy of ``rules_file`` with a ``review:`` section of ``settings`` appended (its lines
    and name unchanged, so errors about the rules read as before), in a folder of its own."""
    text = Path(rules_file).read_text()
    text += ("" if text.endswith("\n") else "\n") + "review:\n"
    text += "".join(f"  {key}: {json.dumps(value)}\n" for key, value in settings.items())
    folder = Path(rules_file).parent / f"review-{hashlib.sha256(text.encode()).hexdigest()[:8]}"
    folder.mkdir(exist_ok=True)
    (folder / Path(rules_file).name).write_text(text)
    return folder / Path(rules_file).name


def review_op(rules_file: Path, window: tuple[str, str], tmp_path: Path, **kwargs: Any):
    """The review operator of a test; ``kwargs`` of :data:`REVIEW_KEYS` go to the rules file
    (a test window of 14 days, chunks of 50, no minimum age unless given)."""
    review = {"lookback_days": 14, "chunk_size": 50, "min_age_hours": 0}
    review.update({key: kwargs.pop(key) for key in list(kwargs) if key in REVIEW_KEYS})
    args: dict[str, Any] = {
        "task_id": "review",
        "rules_file": in_include(with_review(rules_file, review)),
        "to_date": window[1],
        "as_of": after_the_data(window),
        "base_path": str(tmp_path / "data"),
        **kwargs,
    }
    return OnHoldReviewOperator(**args)


def context(run_id: str = "test_run") -> dict[str, Any]:
    return {"run_id": run_id}


def patches(sandbox) -> list[dict]:
    return [
        e for e in sandbox.requests_log() if e["method"] == "PATCH" and e["path"] == ONHOLD_PATH
    ]


def states(network_conn: str, window: tuple[str, str]) -> dict[str, str | None]:
    """Current on-hold state of every held conversion of the window, read through the API."""
    return onhold_states(network_conn, window[0], window[1])
