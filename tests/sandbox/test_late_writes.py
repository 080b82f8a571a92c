"""Late writes: accepted on-hold status updates land after a delay, or (rarely) never.

Modelled on the service's documentation (asynchronous status updates, "up to a few seconds",
"rarely" lost); the numbers are sandbox settings (affiliate_network_sandbox/late_writes.py).
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from affiliate_network_sandbox.testing import SandboxAdminError, start_sandbox
from tests.support.sandbox_api import day_body

ONHOLD = "/networks/reporting/onhold"


def _held_ids(api, day: str, n: int) -> list[str]:
    rows = api.all_conversions(day_body(day))
    held = [r for r in rows if r["status"] == "pending"][:n]
    assert len(held) == n
    return [r["relationship"]["on_hold_snapshots"][0]["on_hold_conversion_id"] for r in held]


def _statuses(api, day: str, ids: list[str]) -> dict[str, str]:
    """Current status of each on-hold id, read by the on-hold id search."""
    terms = [{"search_type": "on_hold_conversion_id", "value": i} for i in ids]
    rows = api.all_conversions(day_body(day, query={"search_terms": terms}))
    return {
        r["relationship"]["on_hold_snapshots"][0]["on_hold_conversion_id"]: r["status"]
        for r in rows
    }


def _patch(api, ids: list[str], status: str = "approved") -> None:
    resp = api.call("PATCH", ONHOLD, json={"on_hold_conversion_ids": ids, "status": status})
    assert resp.status_code == 200, resp.text
    assert resp.json() == {"result": True}


def test_a_late_write_is_invisible_to_every_read_until_its_delay_has_passed(api, day, sandbox):
    ids = _held_ids(api, day, 3)
    pending_before = sandbox.truth(day, day)["on_hold_pending"]
    sandbox.set_late_writes(delay_s=0.6)
    _patch(api, ids)

    # Accepted, not landed: the report, the on-hold search and the admin truth show the old state.
    assert set(_statuses(api, day, ids).values()) == {"pending"}
    assert sandbox.truth(day, day)["on_hold_pending"] == pending_before
    assert sandbox.late_writes()["pending"] == 3

    time.sleep(0.7)
    assert _statuses(api, day, ids) == dict.fromkeys(ids, "approved")
    assert sandbox.truth(day, day)["on_hold_pending"] == pending_before - 3
    assert sandbox.late_writes() == {
        "delay_s": 0.6,
        "lost_share": 0.0,
        "seed": 0,
        "pending": 0,
        "landed": 3,
        "lost": 0,
    }


def test_lost_writes_are_drawn_per_id_and_send_so_a_resend_can_land(api, day, sandbox):
    ids = _held_ids(api, day, 40)
    sandbox.set_late_writes(lost_share=0.3, seed=7)
    _patch(api, ids)
    first = {i for i, s in _statuses(api, day, ids).items() if s == "pending"}
    assert 0 < len(first) < len(ids)  # some lost, the others landed at once (no delay)
    assert sandbox.late_writes()["lost"] == len(first)

    # Deterministic: the same requests after a reset lose the same ids.
    sandbox.reset()
    sandbox.set_late_writes(lost_share=0.3, seed=7)
    _patch(api, ids)
    assert {i for i, s in _statuses(api, day, ids).items() if s == "pending"} == first

    # A re-send is the id's next draw: re-sending what is still on hold lands it in a few rounds.
    still = sorted(first)
    for _ in range(10):
        if not still:
            break
        _patch(api, still)
        still = sorted(i for i, s in _statuses(api, day, still).items() if s == "pending")
    assert still == []
    assert set(_statuses(api, day, ids).values()) == {"approved"}


def test_late_writes_are_off_by_default_and_a_reset_turns_them_off(api, day, sandbox):
    assert sandbox.late_writes() == {
        "delay_s": 0.0,
        "lost_share": 0.0,
        "seed": 0,
        "pending": 0,
        "landed": 0,
        "lost": 0,
    }
    ids = _held_ids(api, day, 2)
    sandbox.set_late_writes(delay_s=60)
    _patch(api, ids)
    sandbox.reset()  # drops the pending updates with the rest of the state
    assert sandbox.late_writes()["delay_s"] == 0.0
    _patch(api, ids)
    assert _statuses(api, day, ids) == dict.fromkeys(ids, "approved")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"delay_s": -1}, "delay_s"),
        ({"delay_s": "2"}, "delay_s"),
        ({"delay_s": True}, "delay_s"),
        ({"lost_share": 1.5}, "lost_share"),
        ({"lost_share": None}, "lost_share"),
        ({"seed": 1.5}, "seed"),
        ({"delay": 1}, "delay"),
        ([1], "object"),
    ],
)
def test_late_writes_settings_are_validated_with_the_field_named(sandbox, body, field):
    with pytest.raises(SandboxAdminError, match="-> 400") as info:
        sandbox.admin("PUT", "/_sandbox/late-writes", json=body)
    assert field in str(info.value)
    assert sandbox.late_writes()["delay_s"] == 0.0  # nothing half-set


def test_cli_flags_set_late_writes_and_a_reset_returns_to_them():
    with start_sandbox(
        days=2, conversions_per_day=50, write_delay_s=1.5, lost_write_share=0.1
    ) as sb:
        expected = {"delay_s": 1.5, "lost_share": 0.1, "seed": 0}
        assert {k: sb.late_writes()[k] for k in expected} == expected
        sb.set_late_writes(delay_s=0)
        sb.reset()
        assert {k: sb.late_writes()[k] for k in expected} == expected


@pytest.mark.parametrize(
    ("flag", "value"), [("--write-delay-s", "-1"), ("--lost-write-share", "2")]
)
def test_cli_rejects_bad_late_write_flags(flag, value):
    proc = subprocess.run(
        [sys.executable, "-m", "affiliate_network_sandbox", "--port", "0", flag, value],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert flag in proc.stderr
