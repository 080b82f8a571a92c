"""Plan against the ledger (create / update / unchanged / blocked) and the ledger's durability."""

from __future__ import annotations

import json

import pytest

from affiliate_network.exceptions import ConfigValidationError
from affiliate_network.sync.ledger import Ledger
from affiliate_network.sync.loader import load_desired_state
from affiliate_network.sync.plan import build_plan


def _record_everything(state, ledger: Ledger, scrub_id: int = 900) -> None:
    """Write the ledger as if every object had been applied."""
    for obj in state.all_objects():
        ledger.record_applied(
            obj.ledger_key,
            network_id=obj.network_id if not obj.create_only else scrub_id,
            definition=obj.body(),
            hash_=obj.definition_hash(),
        )


@pytest.fixture
def ledger(tmp_path) -> Ledger:
    return Ledger(tmp_path / "sync" / "ledger.json", target="http://127.0.0.1:1/v1")


def _plan(path, ledger, **kwargs):
    return build_plan(load_desired_state(path), ledger, **kwargs)


def test_empty_ledger_plans_whole_puts_and_creates(example_doc, write_state, ledger):
    plan = _plan(write_state(example_doc), ledger)
    actions = {item.key: item.action for item in plan.items}
    group_key = f"offer_groups/{example_doc['offer_groups'][0]['key']}"
    rate_key = f"scrub_rates/{example_doc['scrub_rates'][0]['key']}"
    assert actions[group_key] == "update"
    assert actions[rate_key] == "create"
    group_item = next(i for i in plan.items if i.key == group_key)
    assert group_item.first_apply
    # The first apply shows every field that will be sent.
    assert {c.path for c in group_item.changes} >= {"daily_conversion_cap", "internal_notes"}


def test_everything_recorded_plans_nothing(example_doc, write_state, ledger):
    path = write_state(example_doc)
    _record_everything(load_desired_state(path), ledger)
    plan = _plan(path, ledger)
    assert {item.action for item in plan.items} == {"unchanged"}
    assert "0 to create, 0 to update" in plan.render()


def test_cap_change_is_one_update_with_a_field_level_diff(example_doc, write_state, ledger):
    _record_everything(load_desired_state(write_state(example_doc)), ledger)
    old = example_doc["offer_groups"][0]["daily_conversion_cap"]
    example_doc["offer_groups"][0]["daily_conversion_cap"] = old + 50
    plan = _plan(write_state(example_doc), ledger)
    changed = [item for item in plan.items if item.action != "unchanged"]
    assert len(changed) == 1
    assert changed[0].action == "update"
    assert [c.render() for c in changed[0].changes] == [
        f"~ daily_conversion_cap: {old} -> {old + 50}"
    ]
    assert f"~ daily_conversion_cap: {old} -> {old + 50}" in plan.render()


def test_nested_payout_change_diff_names_the_entry_field(example_doc, write_state, ledger):
    _record_everything(load_desired_state(write_state(example_doc)), ledger)
    example_doc["offers"][0]["payout_revenue"][0]["payout_amount"] = 99
    plan = _plan(write_state(example_doc), ledger)
    item = next(i for i in plan.items if i.action == "update")
    assert [c.path for c in item.changes] == ["payout_revenue[0].payout_amount"]


def test_force_sends_an_unchanged_put_object(example_doc, write_state, ledger):
    path = write_state(example_doc)
    _record_everything(load_desired_state(path), ledger)
    plan = _plan(path, ledger, force=[example_doc["offer_groups"][0]["key"]])
    assert [i.action for i in plan.items if i.section == "offer_groups"] == ["update"]


def test_intent_without_id_blocks_with_instructions(example_doc, write_state, ledger):
    path = write_state(example_doc)
    rate = load_desired_state(path).section("scrub_rates")[0]
    ledger.record_intent(rate.ledger_key, definition=rate.body(), hash_=rate.definition_hash())
    plan = _plan(path, ledger)
    item = next(i for i in plan.items if i.section == "scrub_rates")
    assert item.action == "unresolved"
    assert f'resolve_unknown={{"{rate.object_key}": <id found>}}' in item.message
    assert f"for offer {rate.network_offer_id}" in item.message


def test_resolve_unknown_records_an_id_or_creates_again(example_doc, write_state, ledger):
    path = write_state(example_doc)
    rate = load_desired_state(path).section("scrub_rates")[0]
    ledger.record_intent(rate.ledger_key, definition=rate.body(), hash_=rate.definition_hash())
    found = _plan(path, ledger, resolve_unknown={rate.object_key: 4321})
    item = next(i for i in found.items if i.section == "scrub_rates")
    assert (item.action, item.network_id) == ("record", 4321)
    absent = _plan(path, ledger, resolve_unknown={rate.object_key: "absent"})
    assert [i.action for i in absent.items if i.section == "scrub_rates"] == ["create"]


def test_changed_scrub_rate_after_creation_is_drift_not_create(example_doc, write_state, ledger):
    _record_everything(load_desired_state(write_state(example_doc)), ledger, scrub_id=77)
    example_doc["scrub_rates"][0]["scrub_rate_percentage"] = 40
    path = write_state(example_doc)
    plan = _plan(path, ledger)
    item = next(i for i in plan.items if i.section == "scrub_rates")
    assert item.action == "drift"
    assert item.network_id == 77
    assert [c.path for c in item.changes] == ["scrub_rate_percentage"]
    assert "accept_drift" in item.message
    accepted = _plan(path, ledger, accept_drift=[example_doc["scrub_rates"][0]["key"]])
    assert [i.action for i in accepted.items if i.section == "scrub_rates"] == ["record"]


def test_removed_definition_is_reported_as_orphan_never_deleted(example_doc, write_state, ledger):
    _record_everything(load_desired_state(write_state(example_doc)), ledger)
    key = example_doc["scrub_rates"][0]["key"]
    example_doc["scrub_rates"] = []
    plan = _plan(write_state(example_doc), ledger)
    assert plan.orphans == [f"scrub_rates/{key}"]
    assert "nothing is deleted" in plan.render()


def test_ledger_round_trips_and_leaves_no_temporary_files(example_doc, write_state, ledger):
    path = write_state(example_doc)
    _record_everything(load_desired_state(path), ledger)
    reloaded = Ledger.load(ledger.path, target=ledger.target)
    assert reloaded.to_dict() == ledger.to_dict()
    files = sorted(p.name for p in ledger.path.parent.iterdir())
    assert files == ["ledger.json", "ledger.json.synced"]
    document = json.loads(ledger.path.read_text())
    entry = document["objects"][f"offer_groups/{example_doc['offer_groups'][0]['key']}"]
    assert set(entry) >= {"state", "network_id", "hash", "definition", "applied_at"}


def test_ledger_of_another_network_is_refused(ledger):
    ledger.save()
    with pytest.raises(ConfigValidationError, match="records what was applied to"):
        Ledger.load(ledger.path, target="http://127.0.0.1:2/v1")


def test_corrupt_ledger_is_an_error_not_an_empty_ledger(tmp_path):
    path = tmp_path / "ledger.json"
    path.write_text("{not json")
    with pytest.raises(ConfigValidationError, match="unreadable sync ledger"):
        Ledger.load(path)


def test_offer_value_the_spec_does_not_document_is_a_plan_warning(example_doc, write_state, ledger):
    example_doc["offers"][0]["offer_status"] = "paused"
    plan = _plan(write_state(example_doc), ledger)
    item = next(i for i in plan.items if i.section == "offers")
    assert item.warnings == ("offer_status='paused' is not documented by the spec (seen: active)",)
    assert "warning: offer_status='paused'" in plan.render()
