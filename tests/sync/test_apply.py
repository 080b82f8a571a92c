"""The sync job library called directly, without Airflow: plan, apply with a hook on the
sandbox, then plan again. The example state goes out once; a second apply sends nothing."""

from __future__ import annotations

from pathlib import Path

from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
from affiliate_network.sync.apply import apply_sections
from affiliate_network.sync.ledger import Ledger
from affiliate_network.sync.loader import load_desired_state
from affiliate_network.sync.plan import build_plan
from affiliate_network.sync.spec_fields import WHOLE_FIELDS
from demo import SANDBOX_OFFER_STATE as EXAMPLE

SECTIONS = list(WHOLE_FIELDS)


def _writes(sandbox) -> list[tuple[str, str]]:
    return [
        (e["method"], e["path"])
        for e in sandbox.requests_log()
        if e["method"] in ("POST", "PUT", "PATCH") and "/reporting/" not in e["path"]
    ]


def test_apply_then_apply_again_sends_each_object_once(
    sandbox, network_conn: str, tmp_path: Path
) -> None:
    state = load_desired_state(EXAMPLE)
    hook = AffiliateNetworkHook(network_conn)
    try:
        ledger = Ledger.load(tmp_path / "ledger.json", target=hook.base_url)
        plan = build_plan(state, ledger)
        planned = [i for i in plan.for_sections(SECTIONS) if i.action != "unchanged"]
        assert planned, "the example state has something to send to a fresh sandbox"
        done = apply_sections(plan, SECTIONS, hook, ledger)
        assert len(done) == len(planned)
        first = _writes(sandbox)
        assert len(first) >= len(planned)
        # Scrub rates are created exactly once, and each got its network id in the ledger.
        creates = [w for w in first if w[0] == "POST" and "scrub" in w[1]]
        assert creates
        assert len(creates) == len([i for i in planned if i.section == "scrub_rates"])

        # The same state again, from the ledger on disk: nothing to do, nothing sent.
        again = Ledger.load(tmp_path / "ledger.json", target=hook.base_url)
        plan2 = build_plan(load_desired_state(EXAMPLE), again)
        assert [i.key for i in plan2.for_sections(SECTIONS) if i.action != "unchanged"] == []
        assert apply_sections(plan2, SECTIONS, hook, again) == []
        assert _writes(sandbox) == first
    finally:
        hook.close()
