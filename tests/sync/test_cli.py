"""``affiliate-network-sync validate|plan``: exit codes and output (nothing is ever sent)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from affiliate_network.sync.cli import main
from affiliate_network.sync.ledger import Ledger
from affiliate_network.sync.loader import load_desired_state


def _applied(state: Path, ledger_path: Path) -> Ledger:
    """A ledger that records every object of ``state`` as applied (a plan with no changes)."""
    ledger = Ledger(ledger_path)
    for obj in load_desired_state(state).all_objects():
        ledger.record_applied(
            obj.ledger_key,
            network_id=1 if obj.create_only else obj.network_id,
            definition=obj.body(),
            hash_=obj.definition_hash(),
        )
    return ledger


def test_validate_valid_file_exits_zero(example_doc, write_state, capsys):
    assert main(["validate", str(write_state(example_doc))]) == 0
    assert "valid (1 offer_groups" in capsys.readouterr().out


def test_validate_invalid_file_exits_one_with_located_errors(example_doc, write_state, capsys):
    example_doc["scrub_rates"][0]["scrub_rate_status"] = "approved"
    path = write_state(example_doc)
    assert main(["validate", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"{path}:" in err
    assert "field 'scrub_rate_status'" in err


def test_plan_shows_the_diff_and_detailed_exit_code(example_doc, write_state, tmp_path, capsys):
    path = write_state(example_doc)
    ledger = _applied(path, tmp_path / "ledger.json")
    assert main(["plan", str(path), "--ledger", str(ledger.path), "--detailed-exitcode"]) == 0
    assert "0 to create, 0 to update" in capsys.readouterr().out

    example_doc["offer_groups"][0]["daily_click_cap"] = 10_000
    changed = write_state(example_doc)
    assert main(["plan", str(changed), "--ledger", str(ledger.path), "--detailed-exitcode"]) == 2
    out = capsys.readouterr().out
    assert "~ daily_click_cap: 0 -> 10000" in out
    assert "0 to create, 1 to update" in out


def test_a_blocked_plan_exits_non_zero_without_any_flag(example_doc, write_state, tmp_path, capsys):
    # An intent without an id (a create whose outcome is unknown): the sync would stop on it, so
    # a script or CI job running `plan` must stop too. It exited 0 before.
    path = write_state(example_doc)
    rate = load_desired_state(path).section("scrub_rates")[0]
    ledger = Ledger(tmp_path / "ledger.json")
    ledger.record_intent(rate.ledger_key, definition=rate.body(), hash_=rate.definition_hash())
    assert main(["plan", str(path), "--ledger", str(ledger.path)]) == 3
    assert main(["plan", str(path), "--ledger", str(ledger.path), "--detailed-exitcode"]) == 3
    captured = capsys.readouterr()
    assert "UNKNOWN OUTCOME" in captured.out
    assert "blocked: 1 object(s)" in captured.err


def test_the_installed_script_exits_three_on_a_blocked_plan(example_doc, write_state, tmp_path):
    # As a CI job runs it: the console script in a process of its own, exit status read by the
    # shell (the in-process test above calls main()).
    path = write_state(example_doc)
    rate = load_desired_state(path).section("scrub_rates")[0]
    ledger = Ledger(tmp_path / "ledger.json")
    ledger.record_intent(rate.ledger_key, definition=rate.body(), hash_=rate.definition_hash())
    script = Path(sys.executable).parent / "affiliate-network-sync"
    proc = subprocess.run(
        [str(script), "plan", str(path), "--ledger", str(ledger.path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "blocked: 1 object(s)" in proc.stderr
    ok = subprocess.run(
        [str(script), "validate", str(path)], capture_output=True, text=True, timeout=120
    )
    assert ok.returncode == 0, ok.stderr


def test_the_ledger_is_named_by_path_or_by_connection_not_both(example_doc, write_state, capsys):
    # --conn-id was silently ignored next to --ledger; argparse now refuses the pair (exit 2).
    path = write_state(example_doc)
    with pytest.raises(SystemExit) as exit_:
        main(["plan", str(path), "--ledger", "ledger.json", "--conn-id", "other"])
    assert exit_.value.code == 2
    assert "not allowed with argument --ledger" in capsys.readouterr().err


def test_plan_finds_the_networks_ledger_under_the_data_base(
    example_doc, write_state, tmp_path, monkeypatch, capsys
):
    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook

    path = write_state(example_doc)
    monkeypatch.setenv("AFFILIATE_NETWORK_DATA_BASE", str(tmp_path))
    # Two connections written by different people to one network, and the default one to
    # another network: the ledger is the network's, not the connection's.
    for conn_id, host in [
        ("other", "https://API.Example.com:443/v1/"),
        ("same_network", "https://api.example.com/v1"),
        ("affiliate_network_default", "https://api.elsewhere.example/v1"),
    ]:
        conn = {"conn_type": "affiliate_network", "host": host, "password": "k" * 16}
        monkeypatch.setenv(
            f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({**conn, "extra": {"portal": "network"}})
        )
    network = AffiliateNetworkHook("other").network.slug
    _applied(path, tmp_path / "sync" / f"ledger-{network}.json")
    assert main(["plan", str(path), "--conn-id", "other", "--detailed-exitcode"]) == 0
    assert main(["plan", str(path), "--conn-id", "same_network", "--detailed-exitcode"]) == 0
    assert main(["plan", str(path), "--detailed-exitcode"]) == 2  # the default connection's
    assert "0 to create, 0 to update" in capsys.readouterr().out


def test_plan_reads_a_ledger_still_named_by_its_connection(
    example_doc, write_state, tmp_path, monkeypatch
):
    path = write_state(example_doc)
    monkeypatch.setenv("AFFILIATE_NETWORK_DATA_BASE", str(tmp_path))
    conn = {"conn_type": "affiliate_network", "host": "https://api.example.com/v1"}
    monkeypatch.setenv(
        "AIRFLOW_CONN_OTHER",
        json.dumps({**conn, "password": "k" * 16, "extra": {"portal": "network"}}),
    )
    _applied(path, tmp_path / "sync" / "ledger-other.json")
    assert main(["plan", str(path), "--conn-id", "other", "--detailed-exitcode"]) == 0
