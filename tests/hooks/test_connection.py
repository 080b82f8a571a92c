"""Connections (JSON and URI forms, EU region), the portal guard and test_connection()."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from affiliate_network.exceptions import (
    AuthenticationError,
    ConnectionConfigError,
    PortalMismatchError,
)
from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook


def test_json_connection_reaches_the_sandbox(network_conn, make_hook, sandbox):
    hook = make_hook(network_conn)
    url_id = sandbox.catalog()["network_offer_url_ids"][0]
    assert hook.get_offer_url(url_id)["network_offer_url_id"] == url_id
    assert hook.portal == "network"
    assert hook.base_url == sandbox.base_url


def test_uri_connection_with_the_base_url_in_the_host(sandbox, monkeypatch, make_hook):
    key = quote(sandbox.keys["network"], safe="")
    host = quote(sandbox.base_url, safe="")
    monkeypatch.setenv(
        "AIRFLOW_CONN_AN_URI", f"affiliate-network://:{key}@{host}?portal=network&page_size=500"
    )
    hook = make_hook("an_uri")
    assert hook.base_url == sandbox.base_url
    assert hook.page_size == 500  # URI extras arrive as strings
    url_id = sandbox.catalog()["network_offer_url_ids"][0]
    assert hook.get_offer_url(url_id)["network_offer_url_id"] == url_id


def test_uri_connection_with_bare_host_and_scheme_in_schema(sandbox, monkeypatch, make_hook):
    hostport = sandbox.url.split("://", 1)[1]
    key = quote(sandbox.keys["network"], safe="")
    monkeypatch.setenv(
        "AIRFLOW_CONN_AN_URI2", f"affiliate-network://:{key}@{hostport}/http?portal=network"
    )
    hook = make_hook("an_uri2")
    assert hook.base_url == sandbox.base_url
    url_id = sandbox.catalog()["network_offer_url_ids"][0]
    assert hook.get_offer_url(url_id)["network_offer_url_id"] == url_id


def test_eu_region_selects_the_eu_base_url(sandbox, make_connection, make_hook, requests_to):
    eu_key = sandbox.keys["eu"]["network"]
    conn = make_connection(
        "an_eu", host=sandbox.base_url, key=eu_key, region="eu", eu_base_url=sandbox.eu_base_url
    )
    hook = make_hook(conn)
    assert hook.base_url == sandbox.eu_base_url
    assert hook.test_connection()[0] is True
    log = sandbox.requests_log()
    assert len(log) == 1
    assert "/eu/" in log[0]["path"]
    # The same EU key on the default base is refused: the region really decides where we go.
    default = make_connection("an_eu_wrong", host=sandbox.base_url, key=eu_key)
    with pytest.raises(AuthenticationError):
        list(make_hook(default).iter_tiered_commissions(page_size=1))


@pytest.mark.parametrize(
    ("host", "extra", "fragment"),
    [
        ("http://127.0.0.1:1/v1", {"portal": "nowhere"}, "extra 'portal'"),
        ("http://127.0.0.1:1/v1", {"portal": "network", "region": "eu"}, "eu_base_url"),
        ("http://127.0.0.1:1/v2", {"portal": "network"}, "must end in /v1"),
        ("http://127.0.0.1:1/v1", {"portal": "network", "page_size": 5000}, "page_size"),
        ("http://127.0.0.1:1/v1", {"portal": "network", "region": "mars"}, "region"),
    ],
)
def test_bad_connection_is_named(host, extra, fragment, make_connection, make_hook):
    extra = dict(extra)
    portal = extra.pop("portal")
    conn = make_connection("an_bad", host=host, key="a-long-enough-key", portal=portal, **extra)
    with pytest.raises(ConnectionConfigError) as info:
        make_hook(conn).get_offer_url(1)
    assert "an_bad" in str(info.value)
    assert fragment in str(info.value)


#: A real-looking API key, as a user would paste it into the wrong field.
PASTED_KEY = "sbx_net_9f2c4e81a7b03d56e1c8f0a2b4d6"


@pytest.mark.parametrize(
    ("field", "extra", "host", "allowed"),
    [
        ("portal", {"portal": PASTED_KEY}, None, "network"),
        ("portal", {"portal": PASTED_KEY.upper()}, None, "network"),
        ("region", {"region": PASTED_KEY}, None, "'eu'"),
        ("timeout", {"timeout": PASTED_KEY}, None, "0.001 to 3600"),
        ("page_size", {"page_size": PASTED_KEY}, None, "1 to 2000"),
        ("concurrency", {"concurrency": PASTED_KEY}, None, "1 to 10"),
        ("key_header", {"key_header": f"{PASTED_KEY} pasted"}, None, "X-Svc-Api-Key"),
        ("key_header", {"key_header": f"X-Key: {PASTED_KEY}"}, None, "X-Svc-Api-Key"),
        ("eu_base_url", {"region": "eu", "eu_base_url": PASTED_KEY}, None, "/v1"),
        ("eu_base_url", {"region": "eu", "eu_base_url": f"http://h/{PASTED_KEY}"}, None, "/v1"),
        ("host", {}, f"http://127.0.0.1:1/{PASTED_KEY}", "/v1"),
        ("host", {}, f"http://{PASTED_KEY}@127.0.0.1:1/v1", "password"),
    ],
)
def test_a_key_pasted_into_the_wrong_field_is_never_echoed(
    field, extra, host, allowed, make_connection, make_hook
):
    """The error names the field and what it accepts, never the value given."""
    extra = {"portal": "network", **extra}
    portal = extra.pop("portal")
    conn = make_connection(
        "an_pasted",
        host=host or "http://127.0.0.1:1/v1",
        key="the-password",
        portal=portal,
        **extra,
    )
    with pytest.raises(ConnectionConfigError) as info:
        make_hook(conn).get_offer_url(1)
    text = f"{info.value}\n{info.value!r}\n{info.value.args!r}"
    assert PASTED_KEY.lower() not in text.lower()
    assert PASTED_KEY[8:20] not in text  # not even a piece of it
    assert field in text
    assert allowed in text


def test_connection_extras_are_never_sent_as_headers(sandbox, make_connection, make_hook):
    # HttpHook would copy these into headers (and a non-string value would raise InvalidHeader).
    conn = make_connection(
        "an_extras", host=sandbox.base_url, key=sandbox.keys["network"], concurrency=2, page_size=10
    )
    hook = make_hook(conn)
    assert list(hook.iter_tiered_commissions())  # the sandbox has tiered commissions: it answered
    session = hook.get_conn()
    for name in ("portal", "region", "eu_base_url", "timeout", "page_size", "concurrency"):
        assert name not in {h.lower() for h in session.headers}
    assert session.auth is None


def test_portal_guard_names_both_portals_and_sends_nothing(affiliate_conn, make_hook, sandbox):
    hook = make_hook(affiliate_conn)
    sandbox.clear_requests()
    with pytest.raises(PortalMismatchError) as info:
        hook.iter_conversions(from_date="2024-01-01", to_date="2024-01-01", timezone_id=67)
    with pytest.raises(PortalMismatchError):
        hook.get_offer_url(1)
    message = str(info.value)
    assert "network portal" in message
    assert "affiliate portal" in message
    assert sandbox.requests_log() == []


def test_network_connection_cannot_call_affiliate_endpoints(network_conn, make_hook, sandbox):
    with pytest.raises(PortalMismatchError):
        make_hook(network_conn).encode_ids([1, 2])
    assert sandbox.requests_log() == []


@pytest.mark.parametrize("portal", ["network", "affiliate", "advertiser", "marketplace"])
def test_test_connection_true_for_every_portal(portal, sandbox, make_connection, make_hook):
    keys = sandbox.keys
    key = keys[portal] if isinstance(keys[portal], str) else next(iter(keys[portal].values()))
    conn = make_connection(f"an_ok_{portal}", host=sandbox.base_url, key=key, portal=portal)
    ok, message = make_hook(conn).test_connection()
    assert ok is True, message
    assert portal in message
    assert len(sandbox.requests_log()) == 1  # one cheap call, no retries


@pytest.mark.parametrize("portal", ["network", "affiliate", "advertiser", "marketplace"])
def test_test_connection_false_with_a_revoked_key(portal, sandbox, make_connection, make_hook):
    conn = make_connection(
        f"an_revoked_{portal}", host=sandbox.base_url, key=sandbox.keys["revoked"], portal=portal
    )
    ok, message = make_hook(conn).test_connection()
    assert ok is False
    assert "No authentication method found" in message
    assert sandbox.keys["revoked"] not in message


def test_test_connection_false_with_another_portals_key(sandbox, make_connection, make_hook):
    conn = make_connection("an_realm", host=sandbox.base_url, key=sandbox.keys["marketplace"])
    ok, message = make_hook(conn).test_connection()
    assert ok is False
    assert "Out of realm" in message


def test_test_connection_false_when_unreachable_or_misconfigured(make_connection, make_hook):
    unreachable = make_connection("an_down", host="http://127.0.0.1:9/v1", key="a-long-enough-key")
    ok, message = make_hook(unreachable).test_connection()
    assert ok is False
    assert "connection error" in message
    missing = make_connection("an_noportal", host="http://127.0.0.1:9/v1", key="k" * 20, portal="")
    ok, message = make_hook(missing).test_connection()
    assert ok is False
    assert "portal" in message
    ok, message = AffiliateNetworkHook("an_not_defined").test_connection()
    assert ok is False
    assert "not defined" in message


def test_airflow_resolves_the_connection_type_to_this_hook(network_conn):
    from airflow.sdk import BaseHook

    hook = BaseHook.get_connection(network_conn).get_hook()
    assert isinstance(hook, AffiliateNetworkHook)
    assert hook.affiliate_network_conn_id == network_conn
    ok, message = hook.test_connection()
    assert ok is True, message
    assert (hook.conn_type, hook.conn_name_attr, hook.default_conn_name) == (
        "affiliate_network",
        "affiliate_network_conn_id",
        "affiliate_network_default",
    )


@pytest.mark.parametrize(
    ("value", "sent"),
    [
        (None, "X-Svc-Api-Key"),  # the spec's, by default
        ("", "X-Svc-Api-Key"),  # a cleared form field
        ("X-Eflow-API-Key", "X-Eflow-API-Key"),  # the real API family's clients' spelling
        ("x-eflow-api-key", "x-eflow-api-key"),  # header names are case-insensitive
        (" X-Eflow-API-Key ", "X-Eflow-API-Key"),
    ],
)
def test_the_key_header_extra_names_the_header_the_key_travels_in(
    value, sent, sandbox, make_connection, make_hook
):
    """The sandbox accepts the spec's header and the real family's alias: a hook set to send
    either authenticates, and its session carries the key in that header only."""
    extra = {} if value is None else {"key_header": value}
    conn = make_connection(
        "an_key_header", host=sandbox.base_url, key=sandbox.keys["network"], **extra
    )
    hook = make_hook(conn)
    url_id = sandbox.catalog()["network_offer_url_ids"][0]
    assert hook.get_offer_url(url_id)["network_offer_url_id"] == url_id
    ok, message = hook.test_connection()
    assert ok is True, message
    session = hook.get_conn()
    key_headers = [h for h, v in session.headers.items() if v == sandbox.keys["network"]]
    assert key_headers == [sent]


def test_a_key_header_the_service_does_not_know_is_refused_by_the_service(
    sandbox, make_connection, make_hook
):
    """The extra really decides the header sent: a name the sandbox does not read is 401."""
    key = sandbox.keys["network"]
    conn = make_connection("an_key_header_x", host=sandbox.base_url, key=key, key_header="X-Key")
    with pytest.raises(AuthenticationError) as info:
        make_hook(conn).get_offer_url(sandbox.catalog()["network_offer_url_ids"][0])
    assert key not in f"{info.value}{info.value!r}"


@pytest.mark.parametrize(
    "value",
    [
        "X Eflow API Key",  # a space
        "X-Eflow-API-Key:",  # a colon ends a field name
        "X-Eflow\r\nX-Injected: 1",  # header injection
        "Content-Type",  # the session sets it
        "accept",
        "X-" + "k" * 63,  # longer than 64
        "Schlüssel",  # not a token character
        12,
        ["X-Eflow-API-Key"],
        True,
    ],
)
def test_a_key_header_that_is_not_a_header_name_is_refused_naming_the_extra(
    value, sandbox, make_connection, make_hook
):
    conn = make_connection(
        "an_key_header_bad", host=sandbox.base_url, key=sandbox.keys["network"], key_header=value
    )
    with pytest.raises(ConnectionConfigError) as info:
        make_hook(conn).get_offer_url(1)
    message = str(info.value)
    assert "an_key_header_bad" in message
    assert "extra 'key_header' must be an HTTP header name" in message
    assert "'X-Eflow-API-Key'" in message  # says what would do
    if isinstance(value, str) and value not in ("Content-Type", "accept"):  # named as reserved
        assert value not in message
    assert sandbox.requests_log() == []  # refused before anything is sent
