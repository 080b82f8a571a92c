"""The sync ledger is the network's: one file whatever connection reaches it; a ledger still
named by its connection is adopted once, never silently dropped or merged."""

from __future__ import annotations

import json
import re

import pytest

from affiliate_network.exceptions import ConfigValidationError, SyncBlockedError
from affiliate_network.hooks._network_identity import network_identity
from affiliate_network.sync.ledger import Ledger, adopt_connection_ledger, default_ledger_path

NETWORK = network_identity("https://api.example.com/v1", {}, "c")


def _saved(path, target: str) -> Ledger:
    ledger = Ledger(path, target=target)
    ledger.record_applied("offers/a", network_id=1, definition={"name": "a"}, hash_="sha256:x")
    return ledger


def test_a_connection_ledger_is_renamed_to_the_networks_with_its_marker(tmp_path) -> None:
    # Written before ledgers were the network's: the base URL as typed is its target.
    old = tmp_path / "sync" / "ledger-affiliate_network_default.json"
    _saved(old, "https://API.example.com:443/v1/")
    new = default_ledger_path(NETWORK.slug, str(tmp_path))

    assert adopt_connection_ledger(new, "affiliate_network_default", str(tmp_path)) == new
    assert not old.exists()
    assert not (old.parent / f"{old.name}.synced").exists()
    ledger = Ledger.load(new, target=NETWORK.canonical)  # the same network, spelled otherwise
    assert ledger.get("offers/a")["network_id"] == 1
    assert json.loads((tmp_path / "sync" / f"ledger-{NETWORK.slug}.json.synced").read_text())
    # Once adopted, another connection to the network finds it; nothing left to adopt.
    assert adopt_connection_ledger(new, "second_conn", str(tmp_path)) == new


def test_two_ledgers_of_one_network_stop_the_sync(tmp_path) -> None:
    _saved(tmp_path / "sync" / "ledger-conn_a.json", "https://api.example.com/v1")
    new = default_ledger_path(NETWORK.slug, str(tmp_path))
    _saved(new, NETWORK.canonical)
    with pytest.raises(SyncBlockedError, match="both exist") as info:
        adopt_connection_ledger(new, "conn_a", str(tmp_path))
    assert "Nothing was sent" in str(info.value)
    assert (tmp_path / "sync" / "ledger-conn_a.json").exists()  # nothing moved


def test_a_ledger_of_another_network_is_refused(tmp_path) -> None:
    path = tmp_path / "ledger.json"
    _saved(path, "https://api.other.example/v1")
    with pytest.raises(
        ConfigValidationError, match=re.escape("not to url:https://api.example.com/v1")
    ):
        Ledger.load(path, target=NETWORK.canonical)
    _saved(path, "name:acme")
    with pytest.raises(ConfigValidationError):
        Ledger.load(path, target=NETWORK.canonical)
