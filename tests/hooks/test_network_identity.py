"""The network identity: spellings of one base URL are one network, a name joins two hosts,
and bad values are refused naming the extra (never quoting it)."""

from __future__ import annotations

import ipaddress
import re
import unicodedata
from typing import Any
from urllib.parse import urlsplit

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

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


# --- one address, one key (issue 44, defect 4) -------------------------------------------------


@pytest.mark.parametrize(
    ("spellings", "key"),
    [
        (
            ["https://api.example.com./v1", "https://API.example.com/v1"],
            "https://api.example.com/v1",
        ),
        (
            [
                "https://[::1]",
                "https://[0:0:0:0:0:0:0:1]",
                "https://[::0001]:443",
                "https://[::1]/",
            ],
            "https://[::1]",
        ),
        (["https://[2001:db8::1]", "https://[2001:0db8:0000::0001]"], "https://[2001:db8::1]"),
        (["http://[::ffff:127.0.0.1]:8080", "http://127.0.0.1:8080/"], "http://127.0.0.1:8080"),
        (
            [
                "https://bücher.example/v1",
                "https://BÜCHER.example./v1",
                "https://XN--BCHER-KVA.example/v1",
            ],
            "https://xn--bcher-kva.example/v1",
        ),
    ],
)
def test_the_spellings_the_issue_names_are_one_network(spellings: list[str], key: str) -> None:
    assert {normalize_base_url(s) for s in spellings} == {key}
    assert len({network_identity(s, {}, "c").slug for s in spellings}) == 1


def test_a_host_that_reads_as_no_name_is_kept_as_written() -> None:
    assert normalize_base_url("https://a..b/v1") == "https://a..b/v1"
    assert normalize_base_url("https://faß.example") != normalize_base_url("https://fass.example")


#: Letters whose upper case is one letter (``ß`` is not: ``SS`` is another name), Greek too.
_LETTERS = "abcdefghijklmnopqrstuvwxyz0123456789üéçöñåø\u03b1\u03b2\u03b3"
_LABEL = st.text(_LETTERS, min_size=1, max_size=8)
_NAME = st.tuples(
    st.lists(_LABEL, min_size=0, max_size=3),
    st.text("abcdefghijklmnopqrstuvwxyzé", min_size=2, max_size=6),
)
_ADDRESS = st.one_of(
    st.tuples(st.just("v4"), st.integers(0, 2**32 - 1)),
    st.tuples(st.just("v6"), st.integers(0, 2**128 - 1)),
    st.tuples(st.just("name"), _NAME.map(lambda n: ".".join([*n[0], n[1]]))),
)


def _same_address(address: tuple[str, Any]) -> tuple[str, Any]:
    """The address an IPv4-mapped IPv6 address is (its IPv4 one); the others as they are."""
    kind, value = address
    if kind == "v6" and ipaddress.IPv6Address(value).ipv4_mapped is not None:
        return ("v4", int(ipaddress.IPv6Address(value).ipv4_mapped))
    return address


@st.composite
def _ipv6_spelling(draw: st.DrawFn, value: int) -> str:
    groups = [(value >> (16 * (7 - i))) & 0xFFFF for i in range(8)]
    dotted = draw(st.booleans())  # the last 32 bits as a dotted quad
    words = [
        draw(st.sampled_from([str.lower, str.upper]))(
            f"{g:0{draw(st.integers(len(f'{g:x}'), 4))}x}"
        )
        for g in (groups[:6] if dotted else groups)
    ]
    if dotted:
        words.append(str(ipaddress.IPv4Address(value & 0xFFFFFFFF)))
    zero_runs = [
        (i, j)
        for i in range(len(words))
        for j in range(i + 1, len(words) + 1)
        if all(int(w, 16) == 0 for w in words[i:j] if "." not in w)
        and "." not in "".join(words[i:j])
    ]
    if zero_runs and draw(st.booleans()):
        i, j = draw(st.sampled_from(zero_runs))
        return ":".join(words[:i]) + "::" + ":".join(words[j:])
    return ":".join(words)


@st.composite
def _name_spelling(draw: st.DrawFn, name: str) -> str:
    labels = []
    for label in name.split("."):
        if not label.isascii() and draw(st.booleans()):
            label = "xn--" + label.encode("punycode").decode("ascii")
        elif draw(st.booleans()):
            label = unicodedata.normalize("NFD", label)
        labels.append("".join(draw(st.sampled_from([str.lower, str.upper]))(c) for c in label))
    return ".".join(labels) + draw(st.sampled_from(["", "."]))


@st.composite
def _spelling(draw: st.DrawFn, address: tuple[str, Any], scheme: str, port: int | None) -> str:
    kind, value = address
    if kind == "v4":
        host = str(ipaddress.IPv4Address(value))
        if draw(st.booleans()):  # its IPv4-mapped IPv6 spelling
            host = f"[{draw(_ipv6_spelling(0xFFFF00000000 | value))}]"
    elif kind == "v6":
        host = f"[{draw(_ipv6_spelling(value))}]"
    else:
        host = draw(_name_spelling(value))
    default = {"http": 80, "https": 443}[scheme]
    port_text = draw(st.sampled_from(["", f":{default}"])) if port is None else f":{port}"
    slash = draw(st.sampled_from(["", "/", "//"]))
    return f"{draw(st.sampled_from([scheme, scheme.upper()]))}://{host}{port_text}/v1{slash}"


PROPERTY = settings(max_examples=200, deadline=None, derandomize=True)


@PROPERTY
@given(
    address=_ADDRESS,
    scheme=st.sampled_from(["http", "https"]),
    port=st.one_of(st.none(), st.integers(1024, 65535)),
    data=st.data(),
)
def test_every_spelling_of_one_address_is_one_key(
    address: tuple[str, Any], scheme: str, port: int | None, data: st.DataObject
) -> None:
    """Property: IP literals however written (zero padding, case, ``::``, a dotted quad, the
    IPv4-mapped form), host names however written (case, trailing dot, punycode or Unicode,
    composed or not), the default port written or not: one identity, one slug."""
    spellings = [data.draw(_spelling(address, scheme, port)) for _ in range(4)]
    keys = {network_identity(s, {}, "c") for s in spellings}
    assert len(keys) == 1, (spellings, keys)
    assert len({k.slug for k in keys}) == 1


@PROPERTY
@given(
    one=_ADDRESS,
    other=_ADDRESS,
    scheme=st.sampled_from(["http", "https"]),
    data=st.data(),
)
def test_two_addresses_are_two_keys(
    one: tuple[str, Any], other: tuple[str, Any], scheme: str, data: st.DataObject
) -> None:
    """Property: two different addresses (an IPv4-mapped IPv6 address is its IPv4 one), however
    each is written, are two networks."""
    assume(_same_address(one) != _same_address(other))
    first = network_identity(data.draw(_spelling(one, scheme, None)), {}, "c")
    second = network_identity(data.draw(_spelling(other, scheme, None)), {}, "c")
    assert first != second
    assert first.slug != second.slug


def test_spellings_of_one_address_key_one_quota_lease_and_ledger(
    sandbox, make_connection, tmp_path
) -> None:
    """Connections to the sandbox by its address written three ways share the quota scope,
    the write lease and the sync ledger; the one that can be dialled here reaches it."""
    from affiliate_network.hooks._budget import scope_of
    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
    from affiliate_network.review.lease import lease_path
    from affiliate_network.sync.ledger import default_ledger_path

    port = urlsplit(sandbox.base_url).port
    hooks = []
    for n, host in enumerate(
        [
            f"http://127.0.0.1:{port}/v1",
            f"http://[::ffff:127.0.0.1]:{port}/v1/",
            f"HTTP://[0:0:0:0:0:ffff:7f00:1]:{port}/v1",
        ]
    ):
        conn = make_connection(f"address_{n}", host=host, key=sandbox.keys["network"])
        hooks.append(AffiliateNetworkHook(conn))
    assert len({hook.network for hook in hooks}) == 1
    assert len({scope_of(hook.network, hook.portal) for hook in hooks}) == 1
    assert len({str(lease_path(str(tmp_path), hook.network.slug)) for hook in hooks}) == 1
    assert len({default_ledger_path(hook.network.slug, str(tmp_path)) for hook in hooks}) == 1
    ok, _ = hooks[0].test_connection()
    assert ok
