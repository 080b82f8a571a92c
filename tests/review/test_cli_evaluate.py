"""``affiliate-network-rules evaluate`` on what the package lands, in every format (issue 19).

A day is landed from the sandbox by the package's own landing code, as Parquet and as gzip JSON
Lines, and exported as JSON rows (``relationship`` then arrives as a string, as from DuckDB or
pandas). The command, run as a subprocess on each, must decide every conversion exactly as the
rules engine decides the same day's records pulled directly from the API.
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
from affiliate_network.partitions.read import read_partition
from affiliate_network.reports.landing import land_conversion_day
from affiliate_network.reports.pull import ConversionPull
from affiliate_network.rules.engine import RuleSet

PROJECT_RULES = Path(__file__).resolve().parents[2] / "include" / "onhold_rules.yaml"
SCRIPT = Path(sys.executable).with_name("affiliate-network-rules")


def land(hook: AffiliateNetworkHook, base: Path, day: dt.date, fmt: str) -> Path:
    pull = ConversionPull(day, 67, show_events=True)
    summary = land_conversion_day(
        hook, str(base), pull, format=fmt,
        page_size=500, consistency_retries=1, log=logging.getLogger("test"),
    )  # fmt: skip
    return Path(summary["path"])


def rules_reading_relationship(records: list[dict], out: Path) -> Path:
    """The project's rules behind three that read ``relationship.*`` members of this day."""
    first = records[0]["relationship"]
    doc = yaml.safe_load(PROJECT_RULES.read_text())
    doc["rules"] = [
        {"id": "rel-affiliate", "description": "one affiliate", "action": "reject",
         "when": {"field": "relationship.affiliate.network_affiliate_id",
                  "eq": first["affiliate"]["network_affiliate_id"]}},
        {"id": "rel-offer", "description": "one offer", "action": "review",
         "when": {"field": "relationship.offer.network_offer_id",
                  "in": [first["offer"]["network_offer_id"]]}},
        {"id": "rel-snapshot", "description": "on hold", "action": "approve",
         "when": {"field": "relationship.on_hold_snapshots.status", "exists": True}},
        *doc["rules"],
    ]  # fmt: skip
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    return out


@pytest.fixture(scope="module")
def landed(sandbox_server, tmp_path_factory) -> dict:
    """One day landed in each format, the same day pulled directly, and rules for it."""
    from tests.support.connections import conn_env_name

    sandbox = sandbox_server
    sandbox.reset()  # default data, no faults
    tmp = tmp_path_factory.mktemp("evaluate")
    day = dt.date.fromisoformat(sandbox.catalog()["last_date"])
    conn = json.dumps({
        "conn_type": "affiliate_network", "host": sandbox.base_url,
        "password": sandbox.keys["network"], "extra": {"portal": "network"},
    })  # fmt: skip
    with pytest.MonkeyPatch.context() as env:
        env.setenv(conn_env_name("evaluate_cli"), conn)
        hook = AffiliateNetworkHook("evaluate_cli")
        try:
            parquet = land(hook, tmp / "parquet", day, "parquet")
            jsonl = land(hook, tmp / "jsonl", day, "jsonl")
            pulled = list(hook.iter_conversions(
                from_date=day, to_date=day, timezone_id=67, show_events=True))  # fmt: skip
        finally:
            hook.close()
    rules = rules_reading_relationship(pulled, tmp / "rules.yaml")
    now = dt.datetime.combine(day, dt.time(), dt.UTC).timestamp() + 80 * 3600
    return {"parquet": parquet, "jsonl": jsonl, "pulled": pulled, "rules": rules, "now": now,
            "tmp": tmp}  # fmt: skip


def engine_decisions(records: list[dict], rules: Path, now: float) -> dict[str, tuple]:
    evaluation = RuleSet.from_file(rules).evaluate(records, now=now)
    out = {}
    for index, record in enumerate(records):
        decision = evaluation.for_index(index)
        out[record["conversion_id"]] = (
            (decision.rule_id, decision.action) if decision else (None, "hold")
        )
    return out


def cli_decisions(records: Path, landed: dict, name: str) -> dict[str, tuple]:
    out = landed["tmp"] / f"decisions-{name}.jsonl"
    done = subprocess.run(
        [str(SCRIPT), "evaluate", str(landed["rules"]), "--records", str(records),
         "--now", str(landed["now"]), "--decisions", str(out)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    decided = {d["conversion_id"]: (d["rule"], d["action"]) for d in lines}
    assert len(decided) == len(lines), "one line per record"
    return decided


def export_json_rows(partition: Path, out: Path) -> Path:
    """Rows of the landed Parquet as a JSON export writes them (``relationship`` a string)."""
    rows = read_partition(partition).to_pylist()
    assert isinstance(rows[0]["relationship"], str)
    with gzip.open(out, "wt") as handle:
        for row in rows:
            handle.write(json.dumps(row, default=str) + "\n")
    return out


def test_the_decisions_read_relationship_members(landed) -> None:
    # Guards the comparison below: the rules really decide on relationship.* for this day.
    expected = engine_decisions(landed["pulled"], landed["rules"], landed["now"])
    rules = {rule for rule, _ in expected.values()}
    assert {"rel-affiliate", "rel-offer"} <= rules
    assert len(expected) == len(landed["pulled"]) > 10


@pytest.mark.parametrize(
    "source", ["parquet partition", "parquet file", "jsonl partition", "json export"]
)
def test_evaluate_decides_landed_data_like_the_engine(landed, source: str) -> None:
    paths = {
        "parquet partition": lambda: landed["parquet"],
        "parquet file": lambda: next(landed["parquet"].glob("part-*.parquet")),
        "jsonl partition": lambda: landed["jsonl"],
        "json export": lambda: export_json_rows(
            landed["parquet"], landed["tmp"] / "export.jsonl.gz"
        ),
    }
    decided = cli_decisions(paths[source](), landed, source.replace(" ", "-"))
    assert decided == engine_decisions(landed["pulled"], landed["rules"], landed["now"])


def test_evaluate_reads_a_json_array_export(landed, tmp_path) -> None:
    rows = read_partition(landed["parquet"]).to_pylist()
    export = tmp_path / "rows.json"
    export.write_text(json.dumps(rows, default=str))
    decided = cli_decisions(export, landed, "array")
    assert decided == engine_decisions(landed["pulled"], landed["rules"], landed["now"])


def test_evaluate_names_a_path_with_nothing_to_read(landed, tmp_path) -> None:
    done = subprocess.run(
        [str(SCRIPT), "evaluate", str(landed["rules"]), "--records", str(tmp_path)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    assert str(tmp_path) in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("name", "content"),
    [("rows.jsonl", b'{"conversion_id": "a"}\n{not json\n'), ("part-00000.parquet", b"PAR1 no")],
)
def test_evaluate_names_a_file_it_cannot_read(landed, tmp_path, name: str, content: bytes) -> None:
    bad = tmp_path / name
    bad.write_bytes(content)
    done = subprocess.run(
        [str(SCRIPT), "evaluate", str(landed["rules"]), "--records", str(bad)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    assert f"{bad}: cannot be read" in done.stderr
    assert "Traceback" not in done.stderr
