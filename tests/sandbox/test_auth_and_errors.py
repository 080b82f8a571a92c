"""The spec's Authentication section and every row of its Errors table."""

from __future__ import annotations

import pytest

from tests.support.sandbox_api import CONVERSIONS, day_body


def test_missing_key_is_401_unable_to_authenticate(api, day):
    resp = api.call("POST", CONVERSIONS, key=None, json=day_body(day))
    assert resp.status_code == 401
    assert resp.json() == {"Error": "Unable to authenticate request"}


@pytest.mark.parametrize("key", ["not-a-key", "revoked"])
def test_invalid_or_revoked_key_is_401_no_authentication_method(api, day, key):
    resp = api.call("POST", CONVERSIONS, key=key, json=day_body(day))
    assert resp.status_code == 401
    assert resp.json() == {"Error": "No authentication method found"}


@pytest.mark.parametrize("header", ["X-Svc-Api-Key", "X-Svc-API-Key", "x-svc-api-key"])
def test_header_name_is_case_insensitive(api, sandbox, day, header):
    resp = api.call(
        "POST", CONVERSIONS, key=None, json=day_body(day), headers={header: sandbox.keys["network"]}
    )
    assert resp.status_code == 200


def test_affiliate_key_on_network_endpoint_is_403_out_of_realm(api, sandbox, day):
    aff_key = next(iter(sandbox.keys["affiliate"].values()))
    resp = api.call("POST", CONVERSIONS, key=aff_key, json=day_body(day))
    assert resp.status_code == 403
    assert resp.json() == {"Error": "Out of realm"}


@pytest.mark.parametrize("role", ["network", "marketplace"])
def test_other_portal_keys_on_affiliate_endpoint_are_403(api, role):
    resp = api.call(
        "POST", "/affiliates/encode", key=role, json={"type": "tracking_link_affiliate", "ids": [1]}
    )
    assert resp.status_code == 403
    assert resp.json() == {"Error": "Out of realm"}


def test_each_portal_key_works_on_its_own_portal(api, sandbox):
    adv_key = next(iter(sandbox.keys["advertiser"].values()))
    aff_key = next(iter(sandbox.keys["affiliate"].values()))
    assert api.call("GET", "/networks").status_code == 200
    assert api.call("GET", "/affiliates/affiliate", key=aff_key).status_code == 200
    assert api.call("GET", "/advertisers/advertiser", key=adv_key).status_code == 200
    assert api.call("GET", "/partners/connections", key="marketplace").status_code == 200
    assert api.call("GET", "/partners/connections", key=adv_key).status_code == 403


def test_restricted_network_key_reads_but_gets_403_on_writes(api, catalog, day):
    assert (
        api.call("POST", CONVERSIONS, key="network_restricted", json=day_body(day)).status_code
        == 200
    )
    cid = catalog["network_channel_ids"][0]
    resp = api.call(
        "PUT",
        f"/networks/channels/{cid}",
        key="network_restricted",
        json={"name": "x", "status": "active"},
    )
    assert resp.status_code == 403
    assert "Error" in resp.json()
    # Nothing was written.
    assert api.sb.objects("channels") == {}


def test_eu_keys_only_on_eu_base_and_default_keys_only_on_default(api, sandbox, day):
    eu_key = sandbox.keys["eu"]["network"]
    assert api.call("POST", CONVERSIONS, eu=True, json=day_body(day)).status_code == 200
    assert api.call("POST", CONVERSIONS, key=eu_key, json=day_body(day)).status_code == 401
    resp = api.call("POST", CONVERSIONS, eu=True, key=sandbox.keys["network"], json=day_body(day))
    assert resp.status_code == 401
    assert resp.json() == {"Error": "No authentication method found"}


def test_eu_world_has_its_own_data(api, day):
    default = api.conversions(day_body(day), page_size=5).json()["conversions"]
    eu = api.call("POST", CONVERSIONS, eu=True, json=day_body(day), params={"page_size": 5}).json()
    assert {c["conversion_id"] for c in default}.isdisjoint(
        {c["conversion_id"] for c in eu["conversions"]}
    )
    assert eu["conversions"][0]["relationship"]["offer"]["network_id"] == 2


def test_router_404_uses_capital_error(api):
    resp = api.call("GET", "/networks/does/not/exist")
    assert resp.status_code == 404
    assert list(resp.json()) == ["Error"]


def test_endpoint_404_uses_lowercase_error(api):
    resp = api.call("GET", "/networks/offerurls/999999")
    assert resp.status_code == 404
    assert resp.json() == {"error": "Can't find entry in the database"}


def test_non_integer_path_id_is_endpoint_404(api):
    resp = api.call("GET", "/networks/offerurls/abc")
    assert resp.status_code == 404
    assert resp.json() == {"error": "Can't find entry in the database"}


def test_wrong_method_is_405_with_capital_error(api):
    resp = api.call("GET", CONVERSIONS)
    assert resp.status_code == 405
    assert list(resp.json()) == ["Error"]
    assert "POST" in resp.headers["Allow"]


def test_router_errors_come_before_auth(api):
    assert api.call("GET", "/networks/nope", key=None).status_code == 404
    assert api.call("DELETE", CONVERSIONS, key=None).status_code == 405


def test_validation_failure_is_400_invalid_parameters(api):
    resp = api.conversions({"from": "yesterday", "to": "2026-01-01"})
    assert resp.status_code == 400
    body = resp.json()
    assert list(body) == ["error"]
    assert body["error"].startswith("Invalid parameters.")


def test_invalid_json_body_is_400(api):
    resp = api.call(
        "POST", CONVERSIONS, data=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert resp.status_code == 400
    assert resp.json()["error"].startswith("Invalid parameters.")


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ({"to": "2026-01-01"}, "from missing"),
        ({"from": "2026-01-02", "to": "2026-01-01"}, "to before from"),
        ({"from": "2026-01-01", "to": "2026-01-01", "timezone_id": 100}, "unknown timezone"),
        ({"from": "2026-01-01", "to": "2026-01-01", "currency_id": "XYZ"}, "unknown currency"),
        ({"from": "2026-01-01", "to": "2026-01-01", "show_events": "yes"}, "non-boolean"),
        (
            {
                "from": "2026-01-01",
                "to": "2026-01-01",
                "query": {"filters": [{"resource_type": "planet", "filter_id_value": "x"}]},
            },
            "unknown filter type",
        ),
    ],
)
def test_conversion_report_validation(api, body, why):
    assert api.conversions(body).status_code == 400, why


@pytest.mark.parametrize(
    ("status", "field"), [(500, "error"), (503, "Error"), (504, "Error"), (429, "Error")]
)
def test_server_errors_via_faults(api, sandbox, day, status, field):
    sandbox.set_faults(fail_hard=status)
    resp = api.conversions(day_body(day))
    assert resp.status_code == status
    assert list(resp.json()) == [field]
    sandbox.clear_faults()
    assert api.conversions(day_body(day)).status_code == 200


def test_every_response_carries_rate_limit_header(api, day):
    for resp in (
        api.conversions(day_body(day)),
        api.call("GET", "/networks/nope"),
        api.call("POST", CONVERSIONS, key=None, json=day_body(day)),
    ):
        assert resp.headers["X-RateLimit-Remaining"].isdigit()


@pytest.mark.parametrize("header", ["X-Eflow-API-Key", "x-eflow-api-key"])
def test_the_real_familys_header_is_an_alias_of_the_key_header(api, sandbox, day, header):
    body = day_body(day)
    ok = api.call(
        "POST", CONVERSIONS, key=None, json=body, headers={header: sandbox.keys["network"]}
    )
    assert ok.status_code == 200
    assert ok.json()["paging"]["total_count"] > 0
    wrong = api.call("POST", CONVERSIONS, key=None, json=body, headers={header: "not-a-key"})
    assert wrong.status_code == 401
    assert wrong.json() == {"Error": "No authentication method found"}


def test_with_both_headers_the_specs_header_is_read(api, sandbox, day):
    good, bad = sandbox.keys["network"], "not-a-key"
    both = {"X-Svc-Api-Key": bad, "X-Eflow-API-Key": good}
    assert (
        api.call("POST", CONVERSIONS, key=None, json=day_body(day), headers=both).status_code == 401
    )
    both = {"X-Svc-Api-Key": good, "X-Eflow-API-Key": bad}
    assert (
        api.call("POST", CONVERSIONS, key=None, json=day_body(day), headers=both).status_code == 200
    )
