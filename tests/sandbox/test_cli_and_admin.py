"""The CLI, start_sandbox/RunningSandbox, and the admin endpoints."""

from __future__ import annotations

import subprocess
import sys

import pytest
import requests

from affiliate_network_sandbox.testing import SandboxAdminError, start_sandbox


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.10", "example.com"])  # noqa: S104
def test_cli_refuses_non_loopback_without_the_flag(host):
    # The check happens before any socket is created, so nothing is bound.
    proc = subprocess.run(
        [sys.executable, "-m", "affiliate_network_sandbox", "--host", host, "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "--allow-non-loopback" in proc.stderr


def test_console_script_is_installed():
    proc = subprocess.run(
        [
            str(__import__("pathlib").Path(sys.executable).parent / "affiliate-network-sandbox"),
            "--help",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0
    assert "--allow-non-loopback" in proc.stdout
    assert "--conversions-per-day" in proc.stdout


def test_cli_rejects_a_bad_data_config():
    proc = subprocess.run(
        [sys.executable, "-m", "affiliate_network_sandbox", "--port", "0", "--on-hold-share", "2"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "on_hold_share" in proc.stderr


def test_start_sandbox_context_manager_starts_and_stops():
    with start_sandbox(
        seed=5, days=2, conversions_per_day=10, offers=2, affiliates=2, advertisers=1
    ) as sb:
        assert sb.url.startswith("http://127.0.0.1:")
        assert sb.base_url == sb.url + "/v1"
        assert sb.eu_base_url == sb.url + "/eu/v1"
        health = requests.get(sb.url + "/_sandbox/health", timeout=5).json()
        assert health["pid"] == sb.pid
        assert health["config"]["seed"] == 5
        assert health["config"]["conversions_per_day"] == 10
        assert set(sb.keys["affiliate"]) == {"2001", "2002"}
        process = sb.process
    assert process.poll() is not None


def test_start_sandbox_with_the_large_world_refined_by_flags():
    # --world large, then the other flags refine it (here: fewer conversions, two currencies).
    with start_sandbox(
        world="large", conversions_per_day=50, offer_currencies=["JPY", "KWD"], days=2
    ) as sb:
        cfg = requests.get(sb.url + "/_sandbox/config", timeout=5).json()
        assert (cfg["world"], cfg["affiliates"], cfg["offers"]) == ("large", 300, 60)
        assert (cfg["conversions_per_day"], cfg["offer_currencies"]) == (50, ["JPY", "KWD"])
        assert (cfg["late_share"], cfg["deletion_share"]) == (0.02, 0.002)
        currencies = {o["currency_id"] for o in sb.catalog()["offers"].values()}
        assert currencies == {"JPY", "KWD"}
        # A reset without a world keeps the startup world; naming one switches.
        assert sb.reset()["config"]["world"] == "large"
        assert sb.reset(world="small")["config"]["affiliates"] == 8


def test_cli_rejects_an_unknown_world():
    proc = subprocess.run(
        [sys.executable, "-m", "affiliate_network_sandbox", "--port", "0", "--world", "huge"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "--world" in proc.stderr


def test_start_sandbox_rejects_unknown_config():
    with pytest.raises(TypeError):
        start_sandbox(colour="red")


def test_keys_listing_shape(sandbox):
    keys = sandbox.keys
    for name in ("network", "marketplace", "network_restricted", "revoked"):
        assert isinstance(keys[name], str)
    assert keys["affiliate"]
    assert keys["advertiser"]
    assert set(keys["eu"]) >= {"network", "affiliate", "advertiser", "marketplace"}
    assert keys["eu"]["network"] != keys["network"]


def test_catalog_lists_existing_ids(sandbox):
    cat = sandbox.catalog()
    for name in (
        "network_offer_ids",
        "network_offer_group_ids",
        "network_offer_url_ids",
        "network_affiliate_ids",
        "network_advertiser_ids",
        "network_custom_payout_revenue_setting_ids",
        "labels",
        "network_channel_ids",
        "network_tracking_domain_ids",
        "transaction_ids",
        "on_hold_conversion_ids",
    ):
        assert cat[name], name
    assert cat["first_date"] <= cat["last_date"]
    assert len(cat["network_offer_ids"]) == 12
    eu = sandbox.catalog(region="eu")
    assert eu["network_id"] == 2


def test_reset_applies_overrides_on_top_of_the_startup_config(sandbox):
    out = sandbox.reset(offers=3, advertisers=1)
    assert out["config"]["offers"] == 3
    assert out["config"]["seed"] == 42
    assert len(sandbox.catalog()["network_offer_ids"]) == 3
    sandbox.reset()
    assert len(sandbox.catalog()["network_offer_ids"]) == 12


def test_reset_rejects_bad_overrides(sandbox):
    with pytest.raises(SandboxAdminError):
        sandbox.reset(colour="red")
    with pytest.raises(SandboxAdminError):
        sandbox.reset(on_hold_share=1.5)


def test_objects_of_unknown_kind_is_404(sandbox):
    with pytest.raises(SandboxAdminError):
        sandbox.objects("spaceships")


def test_truth_needs_dates(sandbox):
    with pytest.raises(SandboxAdminError):
        sandbox.admin("GET", "/_sandbox/truth/conversions")


def test_unknown_paths_outside_the_api_are_404(sandbox):
    resp = requests.get(sandbox.url + "/v2/networks", timeout=5)
    assert resp.status_code == 404
    assert "Error" in resp.json()
    assert requests.get(sandbox.url + "/_sandbox/nothing", timeout=5).status_code == 404


def test_documented_rate_limit_profile_survives_a_reset():
    # The public guide's network quota (600 requests per 30 s window, 20 per second) is a
    # startup choice; the default stays generous for tests. A reset keeps the chosen profile.
    with start_sandbox(rate_limit="documented") as sb:
        assert sb.admin("GET", "/_sandbox/rate_limit")["capacity"] == 600
        sb.reset(days=2)
        limit = sb.admin("GET", "/_sandbox/rate_limit")
        assert (limit["capacity"], limit["refill_per_second"]) == (600, 20.0)
    with start_sandbox() as sb:
        assert sb.admin("GET", "/_sandbox/rate_limit")["capacity"] == 2000


def test_cli_rejects_an_unknown_rate_limit_profile():
    proc = subprocess.run(
        [sys.executable, "-m", "affiliate_network_sandbox", "--port", "0", "--rate-limit", "x"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "--rate-limit" in proc.stderr
