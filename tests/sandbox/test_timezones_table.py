"""The sandbox serves its own copy of the API's timezone table: it must equal the provider's.

Two copies on purpose (the sandbox distribution needs nothing of the provider), like
``choices.GRANULAR_COLUMNS`` and ``report_columns.GRANULAR_COLUMNS``.
"""

from __future__ import annotations

from affiliate_network.api import timezones as provider
from affiliate_network_sandbox import timezones as sandbox


def test_the_sandbox_and_the_provider_hold_the_same_timezone_table() -> None:
    assert sandbox.TIMEZONES == provider.TIMEZONES
    assert list(sandbox.TIMEZONES) == list(range(1, 100))
    assert sandbox.TIMEZONES[provider.UTC_ID] == "UTC"


def test_what_the_sandbox_serves_agrees_with_the_provider_table(sandbox) -> None:
    """``GET /meta/timezones`` of the sandbox, read by the provider's comparison: no difference."""
    import requests

    answer = requests.get(f"{sandbox.base_url}/meta/timezones", timeout=30)
    assert answer.status_code == 200
    assert provider.compare_with_api(answer.json()["timezones"]) == []
