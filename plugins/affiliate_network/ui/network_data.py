"""What the network page shows, read from the files the DAGs write (no Airflow, no network).

Everything comes from the output base (:func:`affiliate_network.settings.paths.default_data_base`,
or the Airflow Variable the DAGs read; the caller passes the resolved folder):

* ``conversions/date=YYYY-MM-DD/_manifest.json``: a complete partition and its row count; its
  Parquet files (exactly the ones the manifest names) give rows, conversions and payout by
  status and currency;
* ``_reconciliation.json`` beside the manifest: the verdict and the differing cells;
* ``onhold_review/<dag>/<run>/decisions-attempt-N.jsonl`` and ``human-attempt-N.jsonl``: the
  review's decisions by rule with money per currency, the requests waiting, who answered;
* ``sync/ledger-<conn>.json``: the offer sync's ledger; with the desired state
  (``include/offer_state.yaml``) it gives the plan the next sync would run, computed here
  without asking the network, and whether it is blocked;
* the quota store's JSON files (``quota_dir``): granular queries spent in the rolling hour.

The reader is tolerant: a file it cannot read becomes a note on the page (``problems``), never
an error that hides the rest; fields it does not know are passed through. Money stays
:class:`~decimal.Decimal` per currency (JSON: its text) and two currencies are never added.
Only local paths: an object-store base is reported as not readable here.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

#: Days the page covers (ending with the newest landed day, or today).
DEFAULT_DAYS = 30
#: Differing cells listed per day (the comparison file has them all).
MAX_CELLS = 20
#: Review rows listed as waiting or answered.
MAX_ROWS = 200
_MANIFEST = "_manifest.json"
_COMPARISON = "_reconciliation.json"
_DATE_DIR = re.compile(r"^date=(\d{4}-\d{2}-\d{2})$")
_ATTEMPT = re.compile(r"^(decisions|human)-attempt-(\d+)\.jsonl$")
_RUN_DAY = re.compile(r"(\d{4}-\d{2}-\d{2})")


def money_text(value: Decimal) -> str:
    """A Decimal as plain text without exponent or trailing zeros (``12.5``, ``0``)."""
    text = format(value.normalize(), "f")
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

    def to_json(self) -> dict[str, str]:
        return {c: money_text(v) for c, v in sorted(self.by_currency.items())}


@dataclass
class PageData:
    """The page's content, JSON-ready through :meth:`to_json`.

    :param base: the output base read.
    :param first: first day covered.
    :param last: last day covered.
    """

    base: str
    first: dt.date
    last: dt.date
    days: list[dict[str, Any]] = field(default_factory=list)
    review: dict[str, Any] = field(default_factory=dict)
    sync: list[dict[str, Any]] = field(default_factory=list)
    quota: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "base": self.base,
            "first": self.first.isoformat(),
            "last": self.last.isoformat(),
            "days": self.days,
            "review": self.review,
            "sync": self.sync,
            "quota": self.quota,
            "problems": self.problems,
        }


def _read_json(path: Path, problems: list[str]) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        problems.append(f"{path}: unreadable ({type(err).__name__}: {err})")
        return None


# --- landed days ------------------------------------------------------------------------------


def landed_day(partition: Path, problems: list[str]) -> dict[str, Any] | None:
    """One complete partition: rows, conversions and payout by status and currency.

    :param partition: ``<base>/conversions/date=YYYY-MM-DD``.
    :param problems: where unreadable files are noted.
    :returns: ``None`` when the folder has no manifest (not complete: not shown as landed).
    """
    manifest_path = partition / _MANIFEST
    if not manifest_path.is_file():
        return None
    manifest = _read_json(manifest_path, problems)
    if not isinstance(manifest, dict):
        return None
    day: dict[str, Any] = {
        "date": _DATE_DIR.match(partition.name).group(1),  # type: ignore[union-attr]
        "rows": int(manifest.get("row_count") or 0),
        "checksum": manifest.get("content_checksum"),
        "pulled_at": manifest.get("pulled_at"),
        "run_id": (manifest.get("request") or {}).get("run_id") or manifest.get("run_id"),
        "manifest": str(manifest_path),
        "format": manifest.get("format"),
        "by_status": {},
    }
    files = [partition / str(f.get("name")) for f in manifest.get("files") or []]
    if manifest.get("format") == "parquet" and files:
        try:
            day["by_status"] = _status_table(files)
        except Exception as err:  # a bad file is a note on the page, the rest still shows
            problems.append(f"{partition}: Parquet unreadable ({type(err).__name__}: {err})")
    comparison = partition / _COMPARISON
    if comparison.is_file():
        doc = _read_json(comparison, problems)
        if isinstance(doc, dict):
            day["reconciliation"] = reconciliation_summary(doc, comparison)
    return day


def _status_table(files: list[Path]) -> dict[str, dict[str, Any]]:
    """``{status: {rows, conversions, events, payout: {currency: text}}}`` of the named files."""
    import pyarrow.parquet as pq

    out: dict[str, dict[str, Any]] = {}
    payout: dict[str, Money] = defaultdict(Money)
    for path in files:
        names = set(pq.read_schema(path).names)
        wanted = [c for c in ("status", "is_event", "currency_id", "payout") if c in names]
        table = pq.read_table(path, columns=wanted)
        columns = {c: table.column(c).to_pylist() for c in wanted}
        for i in range(table.num_rows):
            status = str(columns.get("status", [None] * table.num_rows)[i] or "unknown")
            entry = out.setdefault(status, {"rows": 0, "conversions": 0, "events": 0})
            entry["rows"] += 1
            is_event = bool(columns["is_event"][i]) if "is_event" in columns else False
            entry["events" if is_event else "conversions"] += 1
            if "payout" in columns:
                currency = columns["currency_id"][i] if "currency_id" in columns else None
                value = columns["payout"][i]
                payout[status].add(currency, value if isinstance(value, Decimal) else None)
    for status, entry in out.items():
        entry["payout"] = payout[status].to_json()
    return dict(sorted(out.items()))


def reconciliation_summary(doc: Mapping[str, Any], path: Path) -> dict[str, Any]:
    """The verdict, the differing cells (at most :data:`MAX_CELLS`) and the totals as written.

    Tolerant of the totals' shape: flat (one currency) or per currency; passed through as is.
    """
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
        "file": str(path),
    }


def landed_days(
    base: Path, first: dt.date, last: dt.date, problems: list[str]
) -> list[dict[str, Any]]:
    """Every day from ``first`` to ``last``: its landed partition, or ``landed: false``."""
    root = base / "conversions"
    days = []
    day = first
    while day <= last:
        found = landed_day(root / f"date={day.isoformat()}", problems)
        days.append({"date": day.isoformat(), "landed": False} if found is None else found)
        if found is not None:
            found["landed"] = True
        day += dt.timedelta(days=1)
    return days


def newest_landed(base: Path) -> dt.date | None:
    """The newest day with a manifest under ``conversions/`` (where the page ends)."""
    root = base / "conversions"
    if not root.is_dir():
        return None
    dates = []
    for child in root.iterdir():
        match = _DATE_DIR.match(child.name)
        if match and (child / _MANIFEST).is_file():
            dates.append(dt.date.fromisoformat(match.group(1)))
    return max(dates, default=None)


# --- the on-hold review -----------------------------------------------------------------------


def _read_jsonl(path: Path, problems: list[str]) -> list[dict[str, Any]]:
    rows = []
    try:
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except ValueError as err:
                    problems.append(f"{path} line {number}: not JSON ({err})")
                    continue
                if isinstance(row, dict):
                    rows.append(row)
    except OSError as err:
        problems.append(f"{path}: unreadable ({err})")
    return rows


def _latest_attempts(run_dir: Path) -> dict[str, Path]:
    """The newest ``decisions`` and ``human`` attempt files of one run folder."""
    best: dict[str, tuple[int, Path]] = {}
    for child in run_dir.iterdir():
        match = _ATTEMPT.match(child.name)
        if match:
            kind, attempt = match.group(1), int(match.group(2))
            if kind not in best or attempt > best[kind][0]:
                best[kind] = (attempt, child)
    return {kind: path for kind, (_, path) in best.items()}


def _run_day(run_id: str, folder: Path) -> str:
    """The day a run happened: the date in its run id, else its folder's modification day."""
    match = _RUN_DAY.search(run_id)
    if match:
        return match.group(1)
    return dt.datetime.fromtimestamp(folder.stat().st_mtime, dt.UTC).date().isoformat()


def review_summary(
    base: Path, first: dt.date, last: dt.date, problems: list[str]
) -> dict[str, Any]:
    """Decisions per day and rule with money at stake per currency; waiting and answered rows.

    A run's newest ``decisions-attempt-N.jsonl`` holds its decisions; ``review`` rows wait
    for a person until a ``human-attempt-N.jsonl`` of the same run records the answers
    (``responded_by``: who answered; empty when the request timed out).
    """
    root = base / "onhold_review"
    runs: list[dict[str, Any]] = []
    per_day_rule: dict[tuple[str, str], dict[str, Any]] = {}
    waiting: list[dict[str, Any]] = []
    answered: list[dict[str, Any]] = []
    if root.is_dir():
        for dag_dir in sorted(p for p in root.iterdir() if p.is_dir() and p.name[0] != "_"):
            for run_dir in sorted(p for p in dag_dir.iterdir() if p.is_dir()):
                files = _latest_attempts(run_dir)
                if "decisions" not in files:
                    continue
                day = _run_day(run_dir.name, run_dir)
                if not first.isoformat() <= day <= last.isoformat():
                    continue
                rows = _read_jsonl(files["decisions"], problems)
                human = _read_jsonl(files["human"], problems) if "human" in files else None
                runs.append(_run_entry(dag_dir.name, run_dir.name, day, rows, human, files))
                for row in rows:
                    _count(per_day_rule, day, row)
                if human is None:
                    waiting += [
                        _row_view(r, dag_dir.name, run_dir.name)
                        for r in rows
                        if r.get("action") == "review"
                    ]
                else:
                    answered += [_row_view(r, dag_dir.name, run_dir.name) for r in human]
    by_day = [
        {**entry, "money": {a: m.to_json() for a, m in sorted(entry["money"].items())}}
        for _, entry in sorted(per_day_rule.items())
    ]
    return {
        "runs": runs,
        "by_day_rule": by_day,
        "waiting": waiting[:MAX_ROWS],
        "waiting_count": len(waiting),
        "answered": answered[:MAX_ROWS],
        "answered_count": len(answered),
    }


def _count(
    per_day_rule: dict[tuple[str, str], dict[str, Any]], day: str, row: Mapping[str, Any]
) -> None:
    rule = str(row.get("rule_id") or "?")
    entry = per_day_rule.setdefault(
        (day, rule), {"date": day, "rule_id": rule, "actions": {}, "money": {}}
    )
    action = str(row.get("action") or "?")
    entry["actions"][action] = entry["actions"].get(action, 0) + 1
    entry["money"].setdefault(action, Money()).add(
        row.get("currency_id"), as_decimal(row.get("payout"))
    )


def _run_entry(
    dag_id: str,
    run_id: str,
    day: str,
    rows: list[dict[str, Any]],
    human: list[dict[str, Any]] | None,
    files: Mapping[str, Path],
) -> dict[str, Any]:
    actions: dict[str, int] = {}
    money: dict[str, Money] = defaultdict(Money)
    for row in rows:
        action = str(row.get("action") or "?")
        actions[action] = actions.get(action, 0) + 1
        money[action].add(row.get("currency_id"), as_decimal(row.get("payout")))
    dry = [r for r in rows if r.get("reason") == "dry run"]
    return {
        "dag_id": dag_id,
        "run_folder": run_id,
        "date": day,
        "actions": actions,
        "money": {a: m.to_json() for a, m in sorted(money.items())},
        "dry_run": bool(dry)
        and len(dry) == sum(1 for r in rows if r.get("action") in ("approve", "reject")),
        "answered": human is not None,
        "files": {k: str(v) for k, v in sorted(files.items())},
    }


def _row_view(row: Mapping[str, Any], dag_id: str, run_folder: str) -> dict[str, Any]:
    keys = (
        "rule_id", "on_hold_conversion_id", "affiliate_name", "offer_name", "payout",
        "currency_id", "human_choice", "responded_by", "applied", "reason",
    )  # fmt: skip
    view = {k: row.get(k) for k in keys if k in row}
    payout = as_decimal(row.get("payout"))
    if payout is not None:
        view["payout"] = money_text(payout)
    return {"dag_id": dag_id, "run_folder": run_folder, **view}


# --- the offer sync ---------------------------------------------------------------------------


def sync_summary(base: Path, offer_state: Path | None, problems: list[str]) -> list[dict[str, Any]]:
    """Per ledger (one per network connection): objects, intents, last apply, and the plan.

    The plan is :func:`affiliate_network.sync.plan.build_plan` of the desired state against the
    ledger: what the next sync would send, computed here without asking the network. Blocked:
    an intent without an id or a drift the sync refuses to overwrite.
    """
    folder = base / "sync"
    out: list[dict[str, Any]] = []
    if not folder.is_dir():
        return out
    for path in sorted(folder.glob("ledger-*.json")):
        doc = _read_json(path, problems)
        if not isinstance(doc, dict):
            continue
        objects = doc.get("objects") or {}
        states: dict[str, int] = {}
        applied_at = []
        for entry in objects.values():
            if isinstance(entry, dict):
                state = str(entry.get("state") or "?")
                states[state] = states.get(state, 0) + 1
                if entry.get("applied_at"):
                    applied_at.append(str(entry["applied_at"]))
        item: dict[str, Any] = {
            "conn_id": path.name[len("ledger-") : -len(".json")],
            "ledger": str(path),
            "target": doc.get("target"),
            "objects": len(objects),
            "states": states,
            "last_applied_at": max(applied_at, default=None),
            "blocked": states.get("intent", 0) > 0,
        }
        if offer_state is not None and offer_state.is_file():
            item.update(_plan(offer_state, path, problems))
        out.append(item)
    return out


def _plan(offer_state: Path, ledger_path: Path, problems: list[str]) -> dict[str, Any]:
    from affiliate_network.exceptions import AffiliateNetworkError
    from affiliate_network.sync.ledger import Ledger
    from affiliate_network.sync.loader import load_desired_state
    from affiliate_network.sync.plan import build_plan

    try:
        plan = build_plan(load_desired_state(offer_state), Ledger.load(ledger_path))
    except AffiliateNetworkError as err:
        problems.append(f"sync plan for {ledger_path}: {err}")
        return {"plan": None}
    summary = plan.summary()
    blocked = [{"key": i.key, "action": i.action, "message": i.message} for i in plan.blocked()]
    return {
        "plan": {"state_file": str(offer_state), **summary, "blocked": blocked},
        "blocked": bool(blocked),
    }


# --- quota ------------------------------------------------------------------------------------


def quota_headroom(
    directory: Path | None,
    networks: Mapping[str, tuple[str, int, float]],
) -> list[dict[str, Any]]:
    """Granular queries left in the rolling window, per network, from the file store.

    Read only (:func:`~affiliate_network.hooks._budget.granular_ages`: no lock, no write); a
    torn file shows as "unknown", the page is refreshed, not trusted for a write.

    :param directory: the quota store's folder (``None``: not a file store).
    :param networks: name -> (store scope, granular budget, window seconds).
    """
    from affiliate_network.hooks._budget import granular_ages

    out = []
    for name, (scope, budget, window_s) in sorted(networks.items()):
        entry: dict[str, Any] = {"network": name, "budget": budget, "window_s": window_s}
        ages = None if directory is None else granular_ages(directory, scope, window_s)
        used: int | None = 0 if directory is None else (None if ages is None else len(ages))
        entry["store"] = str(directory / f"{scope}.granular.json") if directory else None
        entry["used"] = used
        entry["left"] = None if used is None else max(0, budget - used)
        out.append(entry)
    return out


# --- everything -------------------------------------------------------------------------------


def read_page(
    base: str | Path,
    *,
    last: dt.date | None = None,
    days: int = DEFAULT_DAYS,
    offer_state: Path | None = None,
    quota_dir: Path | None = None,
    networks: Mapping[str, tuple[str, int, float]] | None = None,
    sections: Iterable[str] = ("reports", "review", "sync"),
) -> PageData:
    """The page's content for ``days`` days ending with ``last``.

    :param base: the output base (a local folder; a URL is reported, not read).
    :param last: the last day shown (default: the newest landed day, else today in UTC).
    :param days: how many days.
    :param offer_state: the desired-state file the sync plans from (``None``: no plan).
    :param quota_dir: the quota file store's folder.
    :param networks: name -> (store scope, granular budget, window seconds) for quota rows.
    :param sections: what the reader may see (``reports``, ``review``, ``sync``): the app
        passes only the DAGs the user may read.
    """

    allowed = set(sections)
    text = str(base)
    local = Path(text[len("file://") :] if text.startswith("file://") else text)
    problems: list[str] = []
    if "://" in text and not text.startswith("file://"):
        problems.append(f"{text}: an object-store base; this page reads local folders only")
        local = Path("/nonexistent")
    end = last or newest_landed(local) or dt.datetime.now(dt.UTC).date()
    start = end - dt.timedelta(days=max(1, days) - 1)
    page = PageData(base=text, first=start, last=end, problems=problems)
    if "reports" in allowed:
        page.days = landed_days(local, start, end, problems)
    if "review" in allowed:
        # Review runs are dated by when they ran: up to today, past the newest landed day.
        today = dt.datetime.now(dt.UTC).date()
        page.review = review_summary(local, start, max(end, today), problems)
    if "sync" in allowed:
        page.sync = sync_summary(local, offer_state, problems)
    if allowed and networks:
        page.quota = quota_headroom(quota_dir, networks)
    return page
