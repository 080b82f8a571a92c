"""The network identity: spellings of one base URL are one network, a name joins two hosts,
and bad values are refused naming the extra (never quoting it)."""

from __future__ import annotations

import re

import pytest

from affiliate_network.exceptions import ConnectionConfigError
from affiliate_network.hooks._network_identity import network_identity, normalize_base_url


@pytest.mark.parametrize(
    "spelling",
    [
        "https://api.example.com/v1",
        "https://API.Example.COM/v1",
        "HTTPS://api.example.com:443/v1/",
        "https://api.example.com/v1//",
    ],
)
def test_spellings_of_one_url_are_one_network(spelling: str) -> None:
    assert normalize_base_url(spelling) == "https://api.example.com/v1"
    assert network_identity(spelling, {}, "c") == network_identity(
        "https://api.example.com/v1", {}, "c"
    )


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("https://api.example.com/v1", "http://api.example.com/v1"),  # another scheme
        ("https://api.example.com/v1", "https://api.example.com:8443/v1"),  # another port
        ("http://api.example.com:443/v1", "http://api.example.com/v1"),  # 443 is not http's
        ("https://api.example.com/v1", "https://api.example.com/V1"),  # the path keeps its case
        ("http://127.0.0.1:8080/v1", "http://localhost:8080/v1"),  # two names, unproven
    ],
)
def test_different_urls_are_different_networks(one: str, other: str) -> None:
    assert network_identity(one, {}, "c") != network_identity(other, {}, "c")


def test_a_name_joins_two_hosts_and_separates_two_networks_behind_one() -> None:
    by_ip = network_identity("http://127.0.0.1:8080/v1", {"network": "Sandbox"}, "a")
    by_name = network_identity("http://localhost:8080/v1", {"network": "sandbox"}, "b")
    assert by_ip == by_name
    assert by_ip.explicit
    assert by_ip.slug.startswith("sandbox-")
    other = network_identity("http://localhost:8080/v1", {"network": "second"}, "c")
    assert other != by_name


def test_a_url_as_the_name_joins_the_connections_that_spell_it() -> None:
    named = network_identity(
        "http://127.0.0.1:8080/v1", {"network": "http://LOCALHOST:8080/v1/"}, "a"
    )
    assert named == network_identity("http://localhost:8080/v1", {}, "b")
    assert named.slug.startswith("localhost_8080-")


def test_the_older_extra_is_the_same_setting() -> None:
    old = network_identity("https://a.example/v1", {"quota_network": "acme"}, "a")
    assert old == network_identity("https://b.example/v1", {"network": "acme"}, "b")
    same = {"quota_network": "acme", "network": "ACME"}
    assert network_identity("https://a.example/v1", same, "a") == old


@pytest.mark.parametrize(
    ("extras", "says"),
    [
        ({"network": "acme", "quota_network": "other"}, "name different networks"),
        ({"network": "no spaces please"}, "extra 'network' must be a name"),
        ({"network": "ftp://files.example/v1"}, "not an http(s) URL"),
    ],
)
def test_bad_values_are_refused_naming_the_extra(extras, says) -> None:
    with pytest.raises(ConnectionConfigError, match=re.escape(says)) as info:
        network_identity("https://api.example.com/v1", extras, "conn_x")
    assert "conn_x" in str(info.value)
    for value in extras.values():
        assert value not in str(info.value)  # it may be a key typed into the wrong field
