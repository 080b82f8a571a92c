"""Fixtures of the reports tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook


@pytest.fixture
def hook(sandbox, make_connection, tmp_path) -> Iterator[AffiliateNetworkHook]:
    """A network-portal hook on the test's sandbox, with a quota store of the test's own (the
    granular count starts at zero and is this hook's)."""
    conn = make_connection(
        "recon_network",
        host=sandbox.base_url,
        key=sandbox.keys["network"],
        quota_dir=str(tmp_path / "quota"),
    )
    h = AffiliateNetworkHook(conn)
    yield h
    h.close()
