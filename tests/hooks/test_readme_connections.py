"""Every connection the README or a docs page tells a user to export is one the hook accepts,
and the EU examples agree with the connection form: an ``eu_base_url`` ending in ``/v1`` that EU
requests go to (issue 19). The examples live in docs/hook.md since the README became a front
page (issue 27); every page is read, so an example added anywhere is checked too."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from affiliate_network import get_provider_info
from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_EXPORT = re.compile(r"export (AIRFLOW_CONN_\w+)='([^']+)'")


def _docs_text() -> str:
    return "\n".join(page.read_text() for page in DOCS)


def _examples() -> list[tuple[str, str]]:
    found = [
        (name, value)
        for name, value in _EXPORT.findall(_docs_text())
        if "affiliate_network" in value or value.startswith("affiliate-network://")
    ]
    assert len(found) >= 7, "the docs' connection examples moved: update this test"
    return found


@pytest.mark.parametrize(("name", "value"), _examples(), ids=[n for n, _ in _examples()])
def test_a_readme_connection_is_accepted_by_the_hook(monkeypatch, name: str, value: str) -> None:
    value = value.replace("<url-encoded key>", "k3y").replace("\n", " ")
    monkeypatch.setenv(name, value)
    hook = AffiliateNetworkHook(name.removeprefix("AIRFLOW_CONN_").lower())
    try:
        base = hook.base_url
        assert base.startswith("https://")
        assert base.endswith("/v1")
        if '"region": "eu"' in value:
            eu = re.search(r'"eu_base_url": "([^"]+)"', value)
            assert eu is not None
            assert base == eu.group(1)
    finally:
        hook.close()


def test_the_connection_form_asks_for_an_eu_base_url_ending_in_v1() -> None:
    (conn_type,) = get_provider_info()["connection-types"]
    fields = conn_type["conn-fields"]
    assert "ends in /v1" in fields["eu_base_url"]["description"]
    # The runbook once said "ending in /eu/v1" (the sandbox's path) where the form says /v1.
    text = _docs_text()
    assert "ending in `/eu/v1`" not in text
    values = re.findall(r'"eu_base_url": "([^"]+)"', text)
    assert values
    assert all(v.endswith("/v1") and "/eu/v1" not in v for v in values)
