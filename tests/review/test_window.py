"""The review window's timezone comes from the network setting (``include/network.yaml``); the
review has no default of its own (issue 11)."""

from __future__ import annotations

import shutil

import pytest

from affiliate_network.exceptions import ConfigValidationError
from affiliate_network.paths import include_dir
from affiliate_network.review.window import review_window

WINDOW = {
    "lookback_days": 7,
    "to_date": "2026-11-20",
    "as_of": "2026-11-21T00:00:00+00:00",
    "horizon_hours": 24,
}


def test_the_shipped_setting_gives_utc_67() -> None:
    window = review_window(timezone_id=None, **WINDOW)
    assert window.timezone_id == 67
    assert window.timezone == "UTC"


def test_the_networks_timezone_is_followed(monkeypatch, tmp_path) -> None:
    inc = tmp_path / "include"
    shutil.copytree(include_dir(), inc)
    text = (inc / "network.yaml").read_text()
    text = text.replace("timezone: UTC\ntimezone_id: 67", "timezone: America/New_York")
    (inc / "network.yaml").write_text(text)
    monkeypatch.setenv("AFFILIATE_NETWORK_INCLUDE_DIR", str(inc))
    window = review_window(timezone_id=None, **WINDOW)
    assert window.timezone_id == 80
    assert window.timezone == "America/New_York"
    # An explicit id is checked against the table, never trusted blindly.
    with pytest.raises(ConfigValidationError, match="timezone"):
        review_window(timezone_id=1000, **WINDOW)
