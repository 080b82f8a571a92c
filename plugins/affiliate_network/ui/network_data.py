"""What the network page shows, read from the files the DAGs write and from what Airflow says
(no network; the app passes Airflow's answers in, so this module runs without Airflow).

From the output base (a local folder; ``file://`` too; an object-store base is a note):

* ``conversions/date=YYYY-MM-DD``: read through :mod:`affiliate_network.partitions` only
  (:func:`~affiliate_network.partitions.manifest.complete_manifest`: the one completeness rule;
  :func:`~affiliate_network.partitions.summary.partition_summary`: the per-status counts and
  money per currency the manifest carries). A request reads no row data of a version 2
  manifest; ``_reconciliation.json`` beside it gives the verdict.
* ``onhold_review/<dag>/<run>/``: each review run, as its ``outcome-*.json`` record says what it
  was (:mod:`affiliate_network.helpers.run_records`: wrote, dry run, stopped by a guardrail,
  failed), its newest ``decisions-attempt-N.jsonl`` what it decided, money per currency.
* ``sync/ledger-<network>.json`` and ``sync_runs/<dag>/<run>/outcome-*.json``: the offer sync's
  ledger and its runs (a dry run's plan included); with the desired state, the next plan.
* each connection's quota store, read in its own folder.

From Airflow (the app asks; ``None`` here: not asked, shown as unknown): the runs of the DAGs
(:class:`AirflowRun`: state and dates) and the human-review requests it holds
(:class:`HumanRequest`: "waiting" is those, never the audit's ``review`` rows).

Access: ``may_read(dag_id)`` decides every run, file and request shown; a run's DAG is the one
its record names (a run folder without a record: the DAG folder its writer names under
``onhold_review/``, relative to the base). The reviewers' ``_state/<conn>`` is listed only to a
reader of every review DAG of that connection.

Money stays :class:`~decimal.Decimal` per currency (JSON: its text), never added across
currencies. A file that cannot be read is a note (``problems``), never an error hiding the rest.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from affiliate_network.helpers.run_records import RECORD_NAME

#: Days the page covers by default (ending today, UTC, unless asked otherwise).
DEFAULT_DAYS = 30
#: Differing cells listed per day (the comparison file has them all).
MAX_CELLS = 20
#: Review rows listed as answered.
MAX_ROWS = 200
COMPARISON = "_reconciliation.json"
_ATTEMPT = re.compile(r"^(decisions|human)-attempt-(\d+)\.jsonl$")
_RUN_DAY = re.compile(r"(\d{4}-\d{2}-\d{2})")
#: The sections and the folder each owns under the base.
SECTION_FOLDERS = {"reports": "conversions", "review": "onhold_review", "sync": "sync"}


def money_text(value: Decimal) -> str:
    """A Decimal as plain text without exponent or trailing zeros (``12.5``, ``0``)."""
    text = format(value.normalize(), "f") if value else "0"
    return "0" if text in ("-0", "") else text


def as_decimal(value: Any) -> Decimal | None:
    """A money value from JSON (text, int or float: its ``str``) as Decimal; ``None`` if not."""
    if value is None or isinstance(value, bool):
        return None
    try:
        return Decimal(str(value))
    except (InvalidOperation, ValueError):
        return None


@dataclass
class Money:
    """Amounts per currency; never added across currencies."""

    by_currency: dict[str, Decimal] = field(default_factory=dict)

    def add(self, currency: str | None, amount: Decimal | None) -> None:
        """Add ``amount`` to its own currency (``?`` when the row names none)."""
        if amount is None:
            return
        key = currency or "?"
        self.by_currency[key] = self.by_currency.get(key, Decimal(0)) + amount

    def merge(self, other: Money) -> None:
        for currency, amount in other.by_currency.items():
            self.add(currency, amount)

    def to_json(self) -> dict[str, str]:
        return {c: money_text(v) for c, v in sorted(self.by_currency.items())}


@dataclass(frozen=True)
class AirflowRun:
    """A DAG run as Airflow's API has it.

    :param day: the day it is about (its data interval's start, else its logical date or
        run-after date), ISO.
    """

    dag_id: str
    run_id: str
    state: str
    day: str | None = None
    start_date: str | None = None
    end_date: str | None = None
    run_type: str | None = None


@dataclass(frozen=True)
class HumanRequest:
    """A human-in-the-loop request Airflow holds unanswered (HITL detail)."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1
    subject: str = ""
    created_at: str | None = None


@dataclass(frozen=True)
class QuotaSource:
    """One connection's quota: its store's folder and budget, or why it cannot be read.

    :param directory: the file store's folder (``None``: not a file store, see ``note``).
    """

    conn_id: str
    scope: str | None = None
    budget: int | None = None
    window_s: float | None = None
    directory: Path | None = None
    note: str | None = None


@dataclass
class PageData:
    """The page's content, JSON-ready through :meth:`to_json`."""

    first: dt.date
    last: dt.date
    today: dt.date
    days: list[dict[str, Any]] = field(default_factory=list)
    review: dict[str, Any] = field(default_factory=dict)
    sync: dict[str, Any] = field(default_factory=dict)
    quota: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    shown: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "first": self.first.isoformat(),
            "last": self.last.isoformat(),
            "today": self.today.isoformat(),
            "days": self.days,
            "review": self.review,
            "sync": self.sync,
            "quota": self.quota,
            "problems": self.problems,
            "shown": self.shown,
        }


def local_base(base: str | Path) -> Path | None:
    """The base as a local folder (``file://`` stripped); ``None`` for an object store."""
    text = str(base)
    if text.startswith("file://"):
        return Path(text[len("file://") :])
    if "://" in text:
        return None
    return Path(text)


def _read_json(path: Path, problems: list[str], base: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        problems.append(f"{_rel(path, base)}: unreadable ({type(err).__name__})")
        return None


def _rel(path: Path, base: Path) -> str:
    """A path relative to the base (the page never shows the server's folders)."""
    try:
        return path.relative_to(base).as_posix()
    except ValueError:
        return path.name


def _read_jsonl(path: Path, problems: list[str], base: Path) -> list[dict[str, Any]]:
    rows = []
    try:
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except ValueError:
                    problems.append(f"{_rel(path, base)} line {number}: not JSON")
                    continue
                if isinstance(row, dict):
                    rows.append(row)
    except OSError as err:
        problems.append(f"{_rel(path, base)}: unreadable ({type(err).__name__})")
    return rows


# --- landed days ------------------------------------------------------------------------------


def landed_day(base: Path, day: dt.date, problems: list[str]) -> dict[str, Any] | None:
    """One complete partition's figures, from its manifest (no row data for version 2).

    :returns: ``None`` when the day has no complete partition.
    """
    from affiliate_network.exceptions import StorageError
    from affiliate_network.partitions.manifest import complete_manifest, partition_path
    from affiliate_network.partitions.summary import partition_summary

    partition = partition_path(str(base), "conversions", date=day.isoformat())
    manifest = complete_manifest(partition)
    if manifest is None:
        return None
    rel = f"conversions/date={day.isoformat()}"
    entry: dict[str, Any] = {
        "rows": manifest.row_count,
        "pulled_at": manifest.pulled_at,
        "run_id": manifest.run_id or (manifest.request or {}).get("run_id"),
        "format": manifest.format,
        "manifest_version": manifest.manifest_version,
        "files": {"manifest": f"{rel}/_manifest.json"},
    }
    try:
        summary = partition_summary(partition)
    except (StorageError, OSError, ValueError) as err:
        problems.append(f"{rel}: figures unreadable ({type(err).__name__})")
        summary = None
    by_status: dict[str, Any] = {}
    totals = {"rows": 0, "conversions": 0, "events": 0}
    money = {"conversions": Money(), "events": Money()}
    for status, cell in ((summary or {}).get("by_status") or {}).items():
        amount = cell.get("amount") or {}
        by_status[status] = {
            "rows": cell["rows"],
            "conversions": cell["conversions"],
            "events": cell["events"],
            "payout": dict(amount.get("conversions") or {}),
            "events_payout": dict(amount.get("events") or {}),
        }
        for key in totals:
            totals[key] += cell[key]
        for part in ("conversions", "events"):
            for currency, text in (amount.get(part) or {}).items():
                money[part].add(currency, as_decimal(text))
    entry["by_status"] = by_status
    entry["totals"] = {**totals, **{f"{k}_payout": m.to_json() for k, m in money.items()}}
    comparison = Path(str(base)) / rel / COMPARISON
    if comparison.is_file():
        doc = _read_json(comparison, problems, base)
        if isinstance(doc, dict):
            entry["reconciliation"] = reconciliation_summary(doc, f"{rel}/{COMPARISON}")
            entry["files"]["reconciliation"] = f"{rel}/{COMPARISON}"
    return entry


def reconciliation_summary(doc: Mapping[str, Any], rel: str) -> dict[str, Any]:
    """The verdict, the differing cells (at most :data:`MAX_CELLS`) and the totals as written."""
    differing = doc.get("differing")
    if not isinstance(differing, list):
        cells = doc.get("cells") or []
        differing = [c for c in cells if isinstance(c, dict) and c.get("beyond_tolerance")]
    return {
        "reconciled": doc.get("reconciled"),
        "compared_at": doc.get("compared_at"),
        "cells": len(doc.get("cells") or []),
        "differing_count": len(differing),
        "differing": differing[:MAX_CELLS],
        "totals": doc.get("totals"),
        "file": rel,
    }


def landed_days(
    base: Path,
    first: dt.date,
    last: dt.date,
    today: dt.date,
    problems: list[str],
    runs: Mapping[str, AirflowRun] | None,
) -> list[dict[str, Any]]:
    """Every day from ``first`` to ``last`` with its state: ``landed``, ``failed`` (its run
    failed, nothing landed), ``running``, ``not yet due`` (the day is not over), ``missing``.

    :param runs: the reports DAG's runs by day (``None``: Airflow not asked).
    """
    days = []
    day = first
    while day <= last:
        iso = day.isoformat()
        run = None if runs is None else runs.get(iso)
        entry = landed_day(base, day, problems)
        out: dict[str, Any] = {"date": iso, "landed": entry is not None, **(entry or {})}
        if entry is not None:
            state = "landed"
        elif run is not None and run.state == "failed":
            state = "failed"
        elif run is not None and run.state in ("running", "queued"):
            state = "running"
        elif day >= today:
            state = "not yet due"
        else:
            state = "missing"
        out["state"] = state
        if run is not None:
            out["run"] = {"run_id": run.run_id, "state": run.state}
        days.append(out)
        day += dt.timedelta(days=1)
    return days


# --- run records (review and sync) --------------------------------------------------------------


def _records(folder: Path, problems: list[str], base: Path) -> list[dict[str, Any]]:
    """The run records in one run folder, newest attempt last."""
    found = []
    for child in folder.iterdir():
        match = RECORD_NAME.match(child.name)
        if match:
            doc = _read_json(child, problems, base)
            if isinstance(doc, dict) and doc.get("dag_id"):
                found.append((int(match.group("attempt")), child.name, doc))
    return [doc for *_, doc in sorted(found, key=lambda t: (t[0], t[1]))]


def run_dag_id(run_dir: Path, base: Path, problems: list[str]) -> str | None:
    """The DAG that wrote a run folder: what its records name (all must agree), else the DAG
    folder its writer names, relative to the base (``onhold_review/<dag>/<run>``)."""
    names = {str(r["dag_id"]) for r in _records(run_dir, problems, base)}
    if len(names) > 1:
        problems.append(f"{_rel(run_dir, base)}: records of several DAGs; not shown")
        return None
    if names:
        return names.pop()
    rel = run_dir.relative_to(base).parts
    return rel[1] if len(rel) == 3 and rel[0] == "onhold_review" else None


def _latest_attempts(run_dir: Path) -> dict[str, Path]:
    best: dict[str, tuple[int, Path]] = {}
    for child in run_dir.iterdir():
        match = _ATTEMPT.match(child.name)
        if match:
            kind, attempt = match.group(1), int(match.group(2))
            if kind not in best or attempt > best[kind][0]:
                best[kind] = (attempt, child)
    return {kind: path for kind, (_, path) in best.items()}


def _outcome(
    record: Mapping[str, Any] | None,
    rows: list[dict[str, Any]],
    airflow: AirflowRun | None,
) -> dict[str, Any]:
    """What the run was: its record's word, else read from the audit rows' reasons; a run that
    Airflow says failed, and that recorded no stop, is failed."""
    if record is not None:
        outcome, detail = str(record.get("outcome")), record.get("detail")
    else:
        decided = [r for r in rows if r.get("action") in ("approve", "reject")]
        reasons = {str(r.get("reason") or "") for r in decided}
        if decided and all(x.startswith("dry run") for x in reasons):
            outcome = "dry_run"
            detail = (
                "a guardrail would stop a real run"
                if any("guardrail" in x for x in reasons)
                else None
            )
        elif any(x.startswith("guardrail tripped") for x in reasons):
            outcome, detail = "stopped", "a guardrail (the task log says which)"
        else:
            outcome, detail = "wrote", None
    if airflow is not None and airflow.state == "failed" and outcome not in ("stopped", "failed"):
        outcome, detail = "failed", detail or "the task log says why"
    if airflow is not None and airflow.state in ("running", "queued") and record is None:
        outcome = "running"
    return {"outcome": outcome, "detail": detail}


def review_summary(
    base: Path,
    first: dt.date,
    last: dt.date,
    problems: list[str],
    may_read: Callable[[str], bool],
    runs: Mapping[tuple[str, str], AirflowRun] | None,
    waiting: list[HumanRequest] | None,
    review_dags: Iterable[str],
) -> dict[str, Any]:
    """Review runs per day (what each was, its decisions and money per currency), the day's
    totals of what was written, the requests Airflow holds, and who answered."""
    root = base / "onhold_review"
    out_runs: list[dict[str, Any]] = []
    answered: list[dict[str, Any]] = []
    conns: dict[str, set[str]] = defaultdict(set)  # conn id -> review DAGs writing for it
    known_dags: set[str] = set(review_dags)
    if root.is_dir():
        for dag_dir in sorted(p for p in root.iterdir() if p.is_dir() and p.name[0] not in "_."):
            for run_dir in sorted(p for p in dag_dir.iterdir() if p.is_dir()):
                records = _records(run_dir, problems, base)
                dag_id = run_dag_id(run_dir, base, problems)
                if dag_id is None:
                    continue
                known_dags.add(dag_id)
                for r in records:
                    if r.get("conn_id"):
                        conns[str(r["conn_id"])].add(dag_id)
                if not may_read(dag_id):
                    continue
                entry = _review_run(base, run_dir, dag_id, records, runs, problems)
                if entry is None or not first.isoformat() <= entry["date"] <= last.isoformat():
                    continue
                out_runs.append(entry)
                answered += entry.pop("_answered")
    out_runs.sort(key=lambda r: (r["date"], r["dag_id"], r["run_id"]))
    by_day: dict[str, dict[str, Any]] = {}
    for run in out_runs:
        day = by_day.setdefault(run["date"], {"date": run["date"], "runs": 0, "written": {}})
        day["runs"] += 1
        for action, money in run["written_money"].items():
            total = day["written"].setdefault(action, {"count": 0, "money": Money()})
            total["count"] += run["written"].get(action, 0)
            total["money"].merge(Money({c: Decimal(v) for c, v in money.items()}))
    days = [
        {**d, "written": {a: {"count": t["count"], "money": t["money"].to_json()}
                          for a, t in sorted(d["written"].items())}}
        for _, d in sorted(by_day.items())
    ]  # fmt: skip
    held = None
    if waiting is not None:
        held = [vars(h) for h in waiting if h.dag_id in known_dags and may_read(h.dag_id)]
    state = [
        {"conn_id": conn, "file": f"onhold_review/_state/{_conn_dir(conn)}/human_decisions.jsonl"}
        for conn, dags in sorted(conns.items())
        if dags
        and all(may_read(d) for d in dags)
        and (root / "_state" / _conn_dir(conn) / "human_decisions.jsonl").is_file()
    ]
    return {
        "runs": out_runs,
        "days": days,
        "waiting": held,
        "waiting_count": None if held is None else len(held),
        "answered": answered[:MAX_ROWS],
        "answered_count": len(answered),
        "state": state,
    }


def _conn_dir(conn_id: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in conn_id) or "conn"


def _review_run(
    base: Path,
    run_dir: Path,
    dag_id: str,
    records: list[dict[str, Any]],
    runs: Mapping[tuple[str, str], AirflowRun] | None,
    problems: list[str],
) -> dict[str, Any] | None:
    files = _latest_attempts(run_dir)
    record = records[-1] if records else None
    if "decisions" not in files and record is None:
        return None
    run_id = str(record["run_id"]) if record else run_dir.name
    airflow = None if runs is None else runs.get((dag_id, run_id))
    rows = _read_jsonl(files["decisions"], problems, base) if "decisions" in files else []
    human = _read_jsonl(files["human"], problems, base) if "human" in files else None
    decided: dict[str, int] = {}
    decided_money: dict[str, Money] = defaultdict(Money)
    written: dict[str, int] = {}
    written_money: dict[str, Money] = defaultdict(Money)
    for row in rows:
        action = str(row.get("action") or "?")
        amount = as_decimal(row.get("payout"))
        decided[action] = decided.get(action, 0) + 1
        decided_money[action].add(row.get("currency_id"), amount)
        if row.get("applied") is True:
            written[action] = written.get(action, 0) + 1
            written_money[action].add(row.get("currency_id"), amount)
    outcome = _outcome(record, rows, airflow)
    if outcome["outcome"] != "wrote":
        written, written_money = {}, defaultdict(Money)
    day = (airflow.day if airflow and airflow.day else None) or _run_day(run_id, run_dir)
    task_id = str(record["task_id"]) if record and record.get("task_id") else None
    rel_files = {k: _rel(v, base) for k, v in sorted(files.items())}
    if record is not None:
        rel_files["outcome"] = _rel(run_dir / _record_file(record), base)
    return {
        "dag_id": dag_id,
        "run_id": run_id,
        "task_id": task_id,
        "date": day,
        "state": None if airflow is None else airflow.state,
        **outcome,
        "decided": decided,
        "decided_money": {a: m.to_json() for a, m in sorted(decided_money.items())},
        "written": written,
        "written_money": {a: m.to_json() for a, m in sorted(written_money.items())},
        "answered": human is not None,
        "files": rel_files,
        "_answered": [_row_view(r, dag_id, run_id) for r in (human or [])],
    }


def _record_file(record: Mapping[str, Any]) -> str:
    from affiliate_network.helpers.run_records import record_name

    return record_name(str(record.get("task_id") or "task"), int(record.get("attempt") or 1))


def _run_day(run_id: str, folder: Path) -> str:
    """The day a run is about: the date in its run id, else its folder's modification day."""
    match = _RUN_DAY.search(run_id)
    if match:
        return match.group(1)
    return dt.datetime.fromtimestamp(folder.stat().st_mtime, dt.UTC).date().isoformat()


def _row_view(row: Mapping[str, Any], dag_id: str, run_id: str) -> dict[str, Any]:
    keys = (
        "rule_id", "on_hold_conversion_id", "affiliate_name", "offer_name", "payout",
        "currency_id", "human_choice", "responded_by", "applied", "reason",
    )  # fmt: skip
    view = {k: row.get(k) for k in keys if k in row}
    payout = as_decimal(row.get("payout"))
    if payout is not None:
        view["payout"] = money_text(payout)
    return {"dag_id": dag_id, "run_id": run_id, **view}


# --- the offer sync ---------------------------------------------------------------------------


def sync_summary(
    base: Path,
    offer_state: Path | None,
    problems: list[str],
    may_read: Callable[[str], bool],
    sync_dag: str,
    runs: Mapping[tuple[str, str], AirflowRun] | None,
) -> dict[str, Any]:
    """The sync's runs (what each was; a dry run's plan), and per ledger its objects and the
    plan the next sync would run (:func:`affiliate_network.sync.plan.build_plan`)."""
    folder = base / "sync"
    out: dict[str, Any] = {"runs": [], "ledgers": []}
    runs_root = base / "sync_runs"  # beside sync/: a dry run leaves sync/ as it was
    if runs_root.is_dir():
        for dag_dir in sorted(p for p in runs_root.iterdir() if p.is_dir()):
            for run_dir in sorted(p for p in dag_dir.iterdir() if p.is_dir()):
                for record in _records(run_dir, problems, base):
                    dag_id = str(record["dag_id"])
                    if not may_read(dag_id):
                        continue
                    run_id = str(record.get("run_id"))
                    airflow = None if runs is None else runs.get((dag_id, run_id))
                    summary = record.get("summary") or {}
                    out["runs"].append({
                        "dag_id": dag_id,
                        "run_id": run_id,
                        "task_id": record.get("task_id"),
                        "attempt": record.get("attempt"),
                        "conn_id": record.get("conn_id"),
                        "network": summary.get("network"),
                        "at": record.get("at"),
                        "state": None if airflow is None else airflow.state,
                        **_outcome(record, [], airflow),
                        "plan": {k: summary.get(k) for k in ("counts", "changes", "blocked")
                                 if k in summary} or None,
                        "applied": len(summary.get("applied") or []),
                        "file": _rel(run_dir / _record_file(record), base),
                    })  # fmt: skip
    out["runs"].sort(key=lambda r: (str(r.get("at")), r["run_id"]))
    if not may_read(sync_dag) or not folder.is_dir():
        return out
    for path in sorted(folder.glob("ledger-*.json")):
        doc = _read_json(path, problems, base)
        if not isinstance(doc, dict):
            continue
        objects = doc.get("objects") or {}
        states: dict[str, int] = {}
        applied_at = []
        for entry in objects.values():
            if isinstance(entry, dict):
                states[str(entry.get("state") or "?")] = (
                    states.get(str(entry.get("state") or "?"), 0) + 1
                )
                if entry.get("applied_at"):
                    applied_at.append(str(entry["applied_at"]))
        network = path.name[len("ledger-") : -len(".json")]
        item: dict[str, Any] = {
            "network": network,
            "conn_ids": sorted({str(r["conn_id"]) for r in out["runs"]
                                if r.get("network") == network and r.get("conn_id")}),
            "file": _rel(path, base),
            "target": doc.get("target"),
            "objects": len(objects),
            "states": states,
            "last_applied_at": max(applied_at, default=None),
            "blocked": states.get("intent", 0) > 0,
        }  # fmt: skip
        if offer_state is not None and offer_state.is_file():
            item.update(_plan(offer_state, path, problems, base))
        out["ledgers"].append(item)
    return out


def _plan(offer_state: Path, ledger_path: Path, problems: list[str], base: Path) -> dict[str, Any]:
    from affiliate_network.exceptions import AffiliateNetworkError
    from affiliate_network.sync.ledger import Ledger
    from affiliate_network.sync.loader import load_desired_state
    from affiliate_network.sync.plan import build_plan

    try:
        plan = build_plan(load_desired_state(offer_state), Ledger.load(str(ledger_path)))
    except AffiliateNetworkError as err:
        problems.append(f"sync plan for {_rel(ledger_path, base)}: {err}")
        return {"plan": None}
    summary = plan.summary()
    blocked = [{"key": i.key, "action": i.action, "message": i.message} for i in plan.blocked()]
    return {
        "plan": {"state_file": offer_state.name, **summary, "blocked": blocked},
        "blocked": bool(blocked),
    }


# --- quota ------------------------------------------------------------------------------------


def quota_headroom(sources: Iterable[QuotaSource]) -> list[dict[str, Any]]:
    """Granular queries left in the rolling window, per connection, each from its own store
    (read only: no lock, no write); a connection that cannot be read is a row saying why."""
    from affiliate_network.hooks._budget import granular_ages

    out = []
    for src in sorted(sources, key=lambda s: s.conn_id):
        entry: dict[str, Any] = {
            "network": src.conn_id,
            "budget": src.budget,
            "window_s": src.window_s,
            "note": src.note,
            "used": None,
            "left": None,
        }
        if src.note is None and src.directory is not None and src.scope is not None:
            ages = granular_ages(src.directory, src.scope, float(src.window_s or 0))
            if ages is None:
                entry["note"] = "the store's file cannot be read now (refresh)"
            else:
                entry["used"] = len(ages)
                entry["left"] = max(0, int(src.budget or 0) - len(ages))
        out.append(entry)
    return out


# --- everything -------------------------------------------------------------------------------


def read_page(
    base: str | Path,
    *,
    last: dt.date | None = None,
    days: int = DEFAULT_DAYS,
    today: dt.date | None = None,
    may_read: Callable[[str], bool] = lambda dag_id: True,
    section_dags: Mapping[str, str] | None = None,
    review_dags: Iterable[str] = (),
    runs: Iterable[AirflowRun] | None = None,
    waiting: list[HumanRequest] | None = None,
    offer_state: Path | None = None,
    quota: Iterable[QuotaSource] = (),
) -> PageData:
    """The page's content for ``days`` days ending with ``last`` (default: today, UTC).

    :param base: the output base (a local folder or ``file://``; an object store is a note).
    :param may_read: whether the user may read a DAG (the app: Airflow's auth manager).
    :param section_dags: the DAG owning each section (``reports``, ``review``, ``sync``).
    :param review_dags: every review DAG Airflow knows (beside those found in the files).
    :param runs: the DAGs' runs as Airflow has them (``None``: not asked).
    :param waiting: the human-review requests Airflow holds unanswered (``None``: not asked).
    :param offer_state: the desired-state file the sync plans from (``None``: no plan).
    :param quota: each connection's quota source.
    """
    from affiliate_network.ui.sections import SECTION_DAGS

    dags = {**SECTION_DAGS, **(section_dags or {})}
    today = today or dt.datetime.now(dt.UTC).date()
    end = last or today
    start = end - dt.timedelta(days=max(1, days) - 1)
    problems: list[str] = []
    local = local_base(base)
    if local is None:
        problems.append("the output base is an object store; this page reads local folders only")
        local = Path("/nonexistent")
    page = PageData(first=start, last=end, today=today, problems=problems)
    by_run = None if runs is None else {(r.dag_id, r.run_id): r for r in runs}
    if may_read(dags["reports"]):
        by_day = None
        if by_run is not None:
            by_day = {}
            for (dag_id, _), r in sorted(by_run.items(), key=lambda kv: str(kv[1].start_date)):
                if dag_id == dags["reports"] and r.day:
                    by_day[r.day] = r  # the newest run of the day wins
        page.days = landed_days(local, start, end, today, problems, by_day)
        page.shown.append("reports")
    page.review = review_summary(
        local, start, max(end, today), problems, may_read, by_run, waiting,
        {dags["review"], *review_dags},
    )  # fmt: skip
    if page.review["runs"] or may_read(dags["review"]):
        page.shown.append("review")
    page.sync = sync_summary(local, offer_state, problems, may_read, dags["sync"], by_run)
    if page.sync["runs"] or may_read(dags["sync"]):
        page.shown.append("sync")
    if page.shown:
        page.quota = quota_headroom(quota)
    return page
