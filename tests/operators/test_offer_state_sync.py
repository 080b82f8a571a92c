"""Offer sync operators against the real sandbox: plan, apply, reruns, exactly-once creates."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from airflow.sdk.exceptions import AirflowFailException

from affiliate_network.exceptions import ConfigValidationError, OutcomeUnknownError
from affiliate_network.operators.offer_state_sync import (
    OfferCatalogSyncOperator,
    OfferGroupCapsSyncOperator,
    OfferPayoutSyncOperator,
    OfferStateSyncOperator,
    ScrubRateSyncOperator,
)
from affiliate_network.sync import spec_fields
from affiliate_network.sync.apply import SyncBlockedError
from affiliate_network.sync.ledger import Ledger
from demo import SANDBOX_OFFER_STATE
from tests.support.sandbox_reads import network_requests

EXAMPLE = SANDBOX_OFFER_STATE  # include/offer_state.yaml is a template
ALL_SECTIONS = ["offer_groups", "offers", "scrub_rates", "channels", "categories", "offer_urls"]
SCRUB_PATH = "/networks/custom/scrubrate"


@pytest.fixture
def doc() -> dict[str, Any]:
    return copy.deepcopy(yaml.safe_load(EXAMPLE.read_text()))


@pytest.fixture
def files(tmp_path):
    """Writes desired-state variants; gives the ledger path of the test."""

    class Files:
        ledger = tmp_path / "data" / "sync" / "ledger.json"

        def __init__(self) -> None:
            self.n = 0

        def state(self, doc: dict[str, Any]) -> str:
            self.n += 1
            path = tmp_path / f"offer_state_{self.n}.yaml"
            path.write_text(yaml.safe_dump(doc, sort_keys=False))
            return str(path)

    return Files()


def run(operator_cls, files, doc, **kwargs) -> dict[str, Any]:
    """Build and execute one operator the way a task would (no mocks: real hook, real HTTP)."""
    kwargs.setdefault("task_id", "sync")
    kwargs.setdefault("ledger_path", str(files.ledger))
    operator = operator_cls(state_file=files.state(doc), **kwargs)
    result = operator.execute(context={})
    # The summary must be JSON-serialisable (it becomes an XCom).
    json.dumps(result)
    return result


def writes(sandbox, path_part: str = "") -> list[dict[str, Any]]:
    return [
        e
        for e in network_requests(sandbox)
        if e["method"] in {"POST", "PUT", "PATCH"} and path_part in e["path"]
    ]


def stored(sandbox, kind: str) -> dict[str, Any]:
    """Objects of a kind the sandbox holds, keyed by str(id)."""
    return {str(k): v for k, v in sandbox.objects(kind).items()}


def test_apply_then_rerun_sends_zero_requests(sandbox, network_conn, files, doc):
    first = run(OfferStateSyncOperator, files, doc, sections=ALL_SECTIONS)
    assert len(first["applied"]) == 6
    assert first["counts"]["create"] == 1
    sandbox.clear_requests()

    second = run(OfferStateSyncOperator, files, doc, sections=ALL_SECTIONS)

    assert network_requests(sandbox) == []
    assert second["applied"] == []
    assert second["counts"]["unchanged"] == 6


def test_cap_change_sends_exactly_one_put_with_the_whole_object(sandbox, network_conn, files, doc):
    run(OfferStateSyncOperator, files, doc, sections=ALL_SECTIONS)
    group = doc["offer_groups"][0]
    group["daily_conversion_cap"] = 250
    group["weekly_payout_cap"] = 32000
    sandbox.clear_requests()

    summary = run(OfferGroupCapsSyncOperator, files, doc)

    sent = writes(sandbox)
    assert len(sent) == 1
    assert sent[0]["method"] == "PUT"
    assert sent[0]["path"].endswith(f"/networks/offergroups/{group['network_offer_group_id']}")
    body = sent[0]["body"] if isinstance(sent[0]["body"], dict) else json.loads(sent[0]["body"])
    assert set(body) == set(spec_fields.OFFER_GROUP_WHOLE_FIELDS)
    assert summary["applied"] == [
        {
            "key": f"offer_groups/{group['key']}",
            "action": "update",
            "network_id": group["network_offer_group_id"],
            "fields": ["daily_conversion_cap", "weekly_payout_cap"],
        }
    ]
    on_network = stored(sandbox, "offer_groups")[str(group["network_offer_group_id"])]
    assert on_network["daily_conversion_cap"] == 250
    assert on_network["weekly_payout_cap"] == 32000
    assert on_network["internal_notes"] == group["internal_notes"]


def test_payout_change_sends_one_offer_put_and_the_sandbox_shows_it(
    sandbox, network_conn, files, doc
):
    run(OfferStateSyncOperator, files, doc, sections=ALL_SECTIONS)
    offer = doc["offers"][0]
    offer["payout_revenue"][0]["payout_amount"] = 27.75
    sandbox.clear_requests()

    run(OfferPayoutSyncOperator, files, doc)

    sent = writes(sandbox)
    assert [(e["method"], e["path"].rsplit("/", 1)[-1]) for e in sent] == [
        ("PUT", str(offer["network_offer_id"]))
    ]
    on_network = stored(sandbox, "offers")[str(offer["network_offer_id"])]
    default = next(e for e in on_network["payout_revenue"] if e["is_default"])
    assert default["payout_amount"] == 27.75
    assert on_network["preview_url"] == offer["preview_url"]


def test_omitted_field_is_refused_before_anything_is_sent(sandbox, network_conn, files, doc):
    del doc["offer_groups"][0]["global_click_cap"]
    del doc["offer_groups"][0]["labels"]
    sandbox.clear_requests()

    with pytest.raises(ConfigValidationError, match="missing labels, global_click_cap"):
        run(OfferGroupCapsSyncOperator, files, doc)

    assert network_requests(sandbox) == []
    assert not files.ledger.exists()


def test_dry_run_sends_nothing_and_leaves_the_ledger_alone(sandbox, network_conn, files, doc):
    sandbox.clear_requests()
    summary = run(OfferStateSyncOperator, files, doc, sections=ALL_SECTIONS, dry_run="True")
    assert summary["dry_run"] is True
    assert summary["counts"]["update"] == 5
    assert summary["counts"]["create"] == 1
    assert network_requests(sandbox) == []
    assert not files.ledger.exists()


def test_scrub_rate_is_created_once_across_three_reruns(sandbox, network_conn, files, doc):
    sandbox.clear_requests()
    results = [run(ScrubRateSyncOperator, files, doc) for _ in range(3)]

    assert len(writes(sandbox, SCRUB_PATH)) == 1
    created = stored(sandbox, "custom_scrub_rates")
    assert len(created) == 1
    [(setting_id, setting)] = created.items()
    assert setting["scrub_rate_percentage"] == doc["scrub_rates"][0]["scrub_rate_percentage"]
    assert [r["counts"]["create"] for r in results] == [1, 0, 0]
    entry = Ledger.load(files.ledger).get(f"scrub_rates/{doc['scrub_rates'][0]['key']}")
    assert entry["state"] == "applied"
    assert str(entry["network_id"]) == setting_id


@pytest.fixture
def slow_conn(sandbox, make_connection) -> str:
    """The default connection with a 1 s read timeout (so a delayed response is 'unknown')."""
    return make_connection(
        "affiliate_network_default",
        host=sandbox.base_url,
        key=sandbox.keys["network"],
        timeout=1,
    )


def test_crash_between_post_and_ledger_write_stops_the_rerun(sandbox, slow_conn, files, doc):
    key = doc["scrub_rates"][0]["key"]
    # The sandbox applies the POST, then answers too late: the hook raises OutcomeUnknownError.
    sandbox.set_faults(apply_then_delay_paths=[SCRUB_PATH], apply_then_delay_s=3)
    with pytest.raises(OutcomeUnknownError, match=key):
        run(ScrubRateSyncOperator, files, doc)
    sandbox.clear_faults()
    assert len(stored(sandbox, "custom_scrub_rates")) == 1
    sandbox.clear_requests()

    with pytest.raises(SyncBlockedError) as blocked:
        run(ScrubRateSyncOperator, files, doc)

    message = str(blocked.value)
    assert "UNKNOWN OUTCOME" in message
    assert f"scrub_rates/{key}" in message
    assert doc["scrub_rates"][0]["name"] in message
    assert f'resolve_unknown={{"{key}": <id found>}}' in message
    assert writes(sandbox) == []


def test_resolving_the_unknown_outcome_with_the_id_found_continues_without_a_post(
    sandbox, slow_conn, files, doc
):
    key = doc["scrub_rates"][0]["key"]
    sandbox.set_faults(apply_then_delay_paths=[SCRUB_PATH], apply_then_delay_s=3)
    with pytest.raises(OutcomeUnknownError):
        run(ScrubRateSyncOperator, files, doc)
    sandbox.clear_faults()
    [found_id] = [int(i) for i in stored(sandbox, "custom_scrub_rates")]
    sandbox.clear_requests()

    summary = run(ScrubRateSyncOperator, files, doc, resolve_unknown={key: found_id})

    assert summary["applied"] == [
        {"key": f"scrub_rates/{key}", "action": "record", "network_id": found_id}
    ]
    assert Ledger.load(files.ledger).get(f"scrub_rates/{key}")["network_id"] == found_id
    again = run(ScrubRateSyncOperator, files, doc)
    assert again["counts"]["unchanged"] == 1
    assert writes(sandbox) == []
    assert len(stored(sandbox, "custom_scrub_rates")) == 1


def test_worker_death_before_the_answer_then_confirmed_absent_creates_it_once(
    sandbox, network_conn, files, doc
):
    # A worker that died right after writing the intent: the ledger holds an intent, no id.
    from affiliate_network.sync.loader import load_desired_state

    rate = load_desired_state(files.state(doc)).section("scrub_rates")[0]
    ledger = Ledger(files.ledger, target=sandbox.base_url)
    ledger.record_intent(rate.ledger_key, definition=rate.body(), hash_=rate.definition_hash())
    with pytest.raises(SyncBlockedError, match="UNKNOWN OUTCOME"):
        run(ScrubRateSyncOperator, files, doc)

    run(ScrubRateSyncOperator, files, doc, resolve_unknown=json.dumps({rate.object_key: "absent"}))

    assert len(writes(sandbox, SCRUB_PATH)) == 1
    assert len(stored(sandbox, "custom_scrub_rates")) == 1


def test_changed_scrub_rate_is_drift_and_never_created_again(sandbox, network_conn, files, doc):
    key = doc["scrub_rates"][0]["key"]
    run(ScrubRateSyncOperator, files, doc)
    doc["scrub_rates"][0]["scrub_rate_percentage"] = 40
    sandbox.clear_requests()

    with pytest.raises(SyncBlockedError) as blocked:
        run(ScrubRateSyncOperator, files, doc)

    message = str(blocked.value)
    assert "DRIFT" in message
    assert "~ scrub_rate_percentage: 15 -> 40" in message
    assert f'accept_drift=["{key}"]' in message
    assert writes(sandbox) == []
    # On-call fixed it by hand and accepts: the ledger follows, still nothing is sent.
    accepted = run(ScrubRateSyncOperator, files, doc, accept_drift=[key])
    assert [a["action"] for a in accepted["applied"]] == ["record"]
    assert run(ScrubRateSyncOperator, files, doc)["counts"]["unchanged"] == 1
    assert writes(sandbox) == []
    assert len(stored(sandbox, "custom_scrub_rates")) == 1


def test_catalog_sync_sets_channel_and_offer_url_status(sandbox, network_conn, files, doc):
    doc["channels"][0]["name"] = "Email newsletters"
    doc["categories"] = [{"key": "health", "name": "Health", "status": "active"}]
    summary = run(OfferCatalogSyncOperator, files, doc)

    assert {a["key"] for a in summary["applied"]} == {
        f"channels/{doc['channels'][0]['network_channel_id']}",
        "categories/health",
        f"offer_urls/{doc['offer_urls'][0]['key']}",
    }
    channel = stored(sandbox, "channels")[str(doc["channels"][0]["network_channel_id"])]
    assert channel["name"] == "Email newsletters"
    url_id = str(doc["offer_urls"][0]["network_offer_url_ids"][0])
    assert stored(sandbox, "offer_urls")[url_id]["url_status"] == "paused"
    assert [c["name"] for c in stored(sandbox, "categories").values()].count("Health") == 1
    sandbox.clear_requests()
    assert run(OfferCatalogSyncOperator, files, doc)["applied"] == []
    assert network_requests(sandbox) == []


def test_refused_create_drops_the_intent_so_a_fixed_rerun_creates_it(
    sandbox, network_conn, files, doc
):
    doc["scrub_rates"][0]["network_affiliate_id"] = 999_999  # no such affiliate: 400
    with pytest.raises(Exception, match="400"):
        run(ScrubRateSyncOperator, files, doc)
    assert Ledger.load(files.ledger).get(f"scrub_rates/{doc['scrub_rates'][0]['key']}") is None


def test_ledger_is_never_shared_between_networks(sandbox, network_conn, files, doc):
    run(OfferGroupCapsSyncOperator, files, doc)
    document = json.loads(files.ledger.read_text())
    document["target"] = "https://api.other-network.example/v1"
    files.ledger.write_text(json.dumps(document))
    with pytest.raises(ConfigValidationError, match="records what was applied to"):
        run(OfferGroupCapsSyncOperator, files, doc)


def test_a_lost_ledger_stops_the_sync_before_any_create(sandbox, network_conn, files, doc):
    # Issue 12.1: a ledger that vanished (wrong data base for a moment, a deleted file) used to
    # read as empty, and the create-once scrub rate was POSTed a second time.
    run(ScrubRateSyncOperator, files, doc)
    assert len(stored(sandbox, "custom_scrub_rates")) == 1
    files.ledger.unlink()
    sandbox.clear_requests()
    with pytest.raises(SyncBlockedError, match="the sync ledger is missing") as blocked:
        run(ScrubRateSyncOperator, files, doc)
    assert isinstance(blocked.value, AirflowFailException)
    assert writes(sandbox) == []
    assert len(stored(sandbox, "custom_scrub_rates")) == 1
    # On-call checked the network and accepts starting over: deleting the marker unblocks it.
    Path(f"{files.ledger}.synced").unlink()
    run(ScrubRateSyncOperator, files, doc)
    assert len(writes(sandbox, SCRUB_PATH)) == 1


def test_a_first_sync_writes_the_marker_beside_the_ledger(sandbox, network_conn, files, doc):
    assert not Path(f"{files.ledger}.synced").exists()
    run(ScrubRateSyncOperator, files, doc)
    marker = json.loads(Path(f"{files.ledger}.synced").read_text())
    assert marker["ledger"] == str(files.ledger)
    # The network the ledger describes (its identity: the normalized base URL, whatever the
    # spelling of the connection that synced it).
    assert marker["target"] == f"url:{sandbox.base_url}"
