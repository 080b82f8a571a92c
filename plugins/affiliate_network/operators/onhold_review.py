"""On-hold review: decide held conversions with rules, apply safely, ask a human about the rest.

Three pieces, used by the ``affiliate_onhold_review`` DAG:

* :class:`OnHoldReviewOperator` pulls the conversions of a lookback window, keeps those whose
  CURRENT on-hold state (the LAST ``relationship.on_hold_snapshots`` entry) is ``on_hold``,
  decides them with ``include/onhold_rules.yaml``, checks the guardrails before the first write,
  applies approvals and rejections in chunks (re-checking right before each chunk which are still
  on hold, reading back after), and writes one audit file per attempt.
* :func:`build_review_requests` turns the ``review`` decisions of that audit file into one
  human-in-the-loop request per rule (subject + markdown body listing the conversions).
* :class:`OnHoldReviewApplyOperator` applies the human's choice for each request, with the same
  re-check / chunk / read-back path, so rerunning it never writes twice.
"""

from __future__ import annotations

import datetime as dt
import heapq
import json
import re
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator, ObjectStoragePath

from affiliate_network.exceptions import AffiliateNetworkError, ConfigValidationError
from affiliate_network.paths import DATA_BASE_VARIABLE, default_data_base, include_dir
from affiliate_network.review.fields import on_hold_conversion_id, on_hold_since, on_hold_status

if TYPE_CHECKING:
    from airflow.sdk import Context

    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
    from affiliate_network.review.engine import Evaluation, RuleSet

#: PATCH status per rule action (the rejection value is configurable: the spec does not show it).
APPROVED = "approved"
DEFAULT_REJECT_STATUS = "rejected"
ON_HOLD = "on_hold"

#: Options a reviewer picks from, per rule, in the Airflow UI ("Required actions").
OPTION_APPROVE = "Approve all"
OPTION_REJECT = "Reject all"
OPTION_KEEP = "Keep on hold"
REVIEW_OPTIONS = [OPTION_APPROVE, OPTION_REJECT, OPTION_KEEP]
#: HITL form field: conversion ids (comma/space separated) to leave on hold whatever the choice.
KEEP_PARAM = "keep_on_hold"
#: Conversions listed in one request body (the choice applies to all of the rule's conversions).
BODY_ROWS = 50

#: Fields copied from a conversion into the audit so a reviewer sees what was decided.
_AUDIT_FIELDS = ("payout", "sale_amount", "conversion_unix_timestamp")
#: Fields and relationship members kept from each pulled conversion besides what rules read.
_KEEP_FIELDS = ("conversion_id", "transaction_id", *_AUDIT_FIELDS)
_KEEP_MEMBERS = ("on_hold_snapshots", "affiliate", "offer")


class GuardrailError(AffiliateNetworkError):
    """A safety ceiling (reject share/count, approved payout) was crossed: nothing was written."""


def resolve_data_base(explicit: str | None = None) -> str:
    """Output base: argument, else Variable ``affiliate_network_data_base``, else env/default."""
    if explicit:
        return explicit
    from airflow.sdk import Variable

    return Variable.get(DATA_BASE_VARIABLE, default=None) or default_data_base()


def _as_bool(value: Any, name: str) -> bool:
    """Template-rendered booleans arrive as strings unless the DAG renders native objects."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "1", "yes", "on"):
        return True
    if isinstance(value, str) and value.strip().lower() in ("false", "0", "no", "off", ""):
        return False
    raise ConfigValidationError(f"{name} must be a boolean, got {value!r}")


def check_reject_status(status: str) -> None:
    """Fail before anything is pulled or approved, not halfway through the writes."""
    from affiliate_network.hooks.affiliate_network import ON_HOLD_STATUS_FORM

    if not isinstance(status, str) or not ON_HOLD_STATUS_FORM.match(status):
        raise ConfigValidationError(
            f"reject_status {status!r} is not a status word (lowercase letters and '_', "
            f"e.g. 'rejected')"
        )


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", text).strip("_") or "run"


def _chunks(items: Sequence[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


# ---------------------------------------------------------------------------------------------
# Audit file: JSON Lines, written atomically (temp name, then rename)
# ---------------------------------------------------------------------------------------------


def audit_dir(base: str, dag_id: str, run_id: str) -> ObjectStoragePath:
    """``<base>/onhold_review/<dag_id>/<run_id>/`` (the run id made path-safe)."""
    return ObjectStoragePath(base) / "onhold_review" / _safe_name(dag_id) / _safe_name(run_id)


def write_jsonl_atomic(path: ObjectStoragePath, rows: Iterable[dict[str, Any]]) -> int:
    """Write rows as JSON Lines to a temporary sibling, then rename it onto ``path``.

    A reader never sees a half-written file: either the previous version or the new one.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
    count = 0
    with tmp.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, sort_keys=True, default=str) + "\n")
            count += 1
    tmp.rename(path)
    return count


def read_jsonl(path: str | ObjectStoragePath) -> list[dict[str, Any]]:
    """Rows of a JSON Lines audit file."""
    target = path if isinstance(path, ObjectStoragePath) else ObjectStoragePath(path)
    with target.open("r", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


# ---------------------------------------------------------------------------------------------
# Writing on-hold statuses: re-check, chunk, PATCH, read back
# ---------------------------------------------------------------------------------------------


@dataclass
class ApplyOutcome:
    """What happened to each on-hold id handed to :class:`OnHoldWriter`.

    :param applied: on-hold id -> status sent (and confirmed, unless in ``mismatches``).
    :param skipped: on-hold id -> why it was not sent (e.g. ``no longer on hold: approved``).
    :param mismatches: on-hold id -> state read back after the write when it is not the status
        sent (the write may be applied asynchronously).
    :param chunks: PATCH requests sent.
    """

    applied: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    mismatches: dict[str, str | None] = field(default_factory=dict)
    chunks: int = 0


class OnHoldWriter:
    """Applies statuses to on-hold ids, never sending an id that is no longer on hold.

    :param hook: the network hook.
    :param from_date: first day of the window the conversions were pulled from.
    :param to_date: last day of that window (searches by on-hold id use it too).
    :param timezone_id: timezone of the window.
    :param chunk_size: on-hold ids per PATCH.
    :param log: logger of the calling operator.
    """

    def __init__(
        self,
        hook: AffiliateNetworkHook,
        *,
        from_date: str,
        to_date: str,
        timezone_id: int,
        chunk_size: int,
        log: Any,
    ) -> None:
        self.hook = hook
        self.from_date = from_date
        self.to_date = to_date
        self.timezone_id = timezone_id
        self.chunk_size = chunk_size
        self.log = log

    def current_states(self, on_hold_ids: Sequence[str]) -> dict[str, str | None]:
        """Current on-hold state of each id (``None`` when the search does not return it)."""
        states: dict[str, str | None] = dict.fromkeys(on_hold_ids)
        for chunk in _chunks(list(on_hold_ids), self.chunk_size):
            terms = [{"search_type": "on_hold_conversion_id", "value": i} for i in chunk]
            for record in self.hook.iter_conversions(
                from_date=self.from_date,
                to_date=self.to_date,
                timezone_id=self.timezone_id,
                search_terms=terms,
                page_size=max(len(chunk), 1),
            ):
                oh_id = on_hold_conversion_id(record)
                if oh_id in states:
                    states[oh_id] = on_hold_status(record)
        return states

    def apply(
        self, on_hold_ids: Sequence[str], status: str, outcome: ApplyOutcome | None = None
    ) -> ApplyOutcome:
        """Send ``status`` for every id still on hold, chunk by chunk, then read back.

        :param outcome: filled as chunks go (so a caller still has it when a chunk fails).
        """
        outcome = outcome if outcome is not None else ApplyOutcome()
        for chunk in _chunks(list(dict.fromkeys(on_hold_ids)), self.chunk_size):
            # Right before the write: a rerun, a person or the network may have decided some.
            states = self.current_states(chunk)
            still = [i for i in chunk if states.get(i) == ON_HOLD]
            for i in chunk:
                if states.get(i) != ON_HOLD:
                    outcome.skipped[i] = f"no longer on hold: {states.get(i) or 'not found'}"
            if not still:
                continue
            result = self.hook.set_on_hold_status(still, status)
            outcome.chunks += 1
            self.log.info(
                "PATCH on-hold %s: %d ids (chunk %d), result=%s",
                status,
                len(still),
                outcome.chunks,
                result,
            )
            for i in still:
                outcome.applied[i] = status
            # Read back: the PATCH may report success before the change is visible.
            after = self.current_states(still)
            for i in still:
                if after.get(i) != status:
                    outcome.mismatches[i] = after.get(i)
        if outcome.mismatches:
            self.log.warning(
                "%d on-hold ids still show another state after PATCH %s (asynchronous or ignored "
                "write); the next run re-checks them: %s",
                len(outcome.mismatches),
                status,
                ", ".join(sorted(outcome.mismatches)[:20]),
            )
        return outcome


def _outcome_reasons(outcomes: dict[str, ApplyOutcome], into: dict[str, tuple[bool, str]]) -> None:
    """On-hold id -> (applied, why) for the audit."""
    for status, outcome in outcomes.items():
        for i in outcome.applied:
            if i in outcome.mismatches:
                seen = outcome.mismatches[i] or "not found"
                into[i] = (True, f"sent {status}; read back shows {seen}")
            else:
                into[i] = (True, f"{status}; confirmed by read-back")
        for i, why in outcome.skipped.items():
            into[i] = (False, why)


# ---------------------------------------------------------------------------------------------
# The review operator
# ---------------------------------------------------------------------------------------------


class OnHoldReviewOperator(BaseOperator):
    """Decide on-hold conversions with a rules file and apply the clear cases.

    Pulls conversions of the last ``lookback_days`` days, keeps those whose current on-hold state
    (the last ``relationship.on_hold_snapshots`` entry) is ``on_hold`` and, optionally, that have
    been on hold for ``min_age_hours``. Rules are evaluated over all of them (aggregates count
    every candidate), first match wins. Guardrails are checked before the first write. Approvals
    and rejections are then sent in chunks of ``chunk_size``; right before each chunk the ids are
    searched again and only those still on hold are sent; after each chunk they are read back.
    ``review`` decisions wait for a human (see :func:`build_review_requests`); ``hold`` and
    unmatched conversions stay on hold.

    One audit file per attempt (JSON Lines, written atomically) lists every decision: conversion
    id, on-hold id, rule id, action, the values the rule tested, applied or not and why. The
    return value (XCom) holds counts and the audit path only.

    :param rules_file: rules YAML (templated); relative names are looked up in the include dir.
    :param affiliate_network_conn_id: network-portal connection.
    :param lookback_days: days of conversions to consider, ending at ``to_date``.
    :param to_date: last day of the window, ``YYYY-MM-DD`` (templated); default: the run's
        logical date (or today) in UTC.
    :param timezone_id: timezone of the window (1 = UTC).
    :param min_age_hours: decide only conversions on hold for at least this long (younger ones
        still count in aggregates).
    :param chunk_size: on-hold ids per PATCH.
    :param dry_run: decide and write the audit, change nothing (templated; bool or "true"/"false").
    :param reject_status: PATCH status for rejections (the spec does not show it; default
        ``rejected``).
    :param max_reject_share: fail before any write when rejections / decided candidates exceed
        this share (0..1); ``None`` disables.
    :param max_reject_count: fail before any write when rejections exceed this count.
    :param max_approved_payout: fail before any write when the payout of approvals exceeds this.
    :param base_path: audit base (templated); default Variable ``affiliate_network_data_base``.
    :param page_size: conversion report page size (default: the connection's).
    """

    template_fields: Sequence[str] = ("rules_file", "to_date", "dry_run", "base_path")
    ui_color = "#fde9c9"

    def __init__(
        self,
        *,
        rules_file: str = "onhold_rules.yaml",
        affiliate_network_conn_id: str = "affiliate_network_default",
        lookback_days: int = 7,
        to_date: str | None = None,
        timezone_id: int = 1,
        min_age_hours: float = 0.0,
        chunk_size: int = 100,
        dry_run: bool | str = False,
        reject_status: str = DEFAULT_REJECT_STATUS,
        max_reject_share: float | None = 0.5,
        max_reject_count: int | None = 1000,
        max_approved_payout: float | None = None,
        base_path: str | None = None,
        page_size: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if lookback_days < 1:
            raise ConfigValidationError(f"lookback_days must be >= 1, got {lookback_days}")
        if not 1 <= chunk_size <= 2000:
            raise ConfigValidationError(f"chunk_size must be between 1 and 2000, got {chunk_size}")
        if min_age_hours < 0:
            raise ConfigValidationError(f"min_age_hours must be >= 0, got {min_age_hours}")
        if max_reject_share is not None and not 0 <= max_reject_share <= 1:
            raise ConfigValidationError(
                f"max_reject_share must be in [0, 1], got {max_reject_share}"
            )
        if max_reject_count is not None and max_reject_count < 0:
            raise ConfigValidationError(f"max_reject_count must be >= 0, got {max_reject_count}")
        if not reject_status or reject_status == APPROVED:
            raise ConfigValidationError(
                f"reject_status must be a rejecting status, got {reject_status!r}"
            )
        self.rules_file = rules_file
        self.affiliate_network_conn_id = affiliate_network_conn_id
        self.lookback_days = lookback_days
        self.to_date = to_date
        self.timezone_id = timezone_id
        self.min_age_hours = min_age_hours
        self.chunk_size = chunk_size
        self.dry_run = dry_run
        self.reject_status = reject_status
        self.max_reject_share = max_reject_share
        self.max_reject_count = max_reject_count
        self.max_approved_payout = max_approved_payout
        self.base_path = base_path
        self.page_size = page_size

    # -- helpers --------------------------------------------------------------------------------

    def _rules_path(self) -> Path:
        path = Path(self.rules_file)
        return path if path.is_absolute() else include_dir() / path

    def _window(self, context: Context) -> tuple[str, str]:
        if self.to_date:
            end = dt.date.fromisoformat(str(self.to_date))
        else:
            logical = context.get("logical_date") if context else None
            end = (logical or dt.datetime.now(dt.UTC)).astimezone(dt.UTC).date()
        start = end - dt.timedelta(days=self.lookback_days - 1)
        return start.isoformat(), end.isoformat()

    def _hook(self) -> AffiliateNetworkHook:
        from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook

        return AffiliateNetworkHook(affiliate_network_conn_id=self.affiliate_network_conn_id)

    def _pull_candidates(
        self, hook: AffiliateNetworkHook, ruleset: RuleSet, from_date: str, to_date: str
    ) -> tuple[list[dict[str, Any]], int]:
        """Conversions currently on hold in the window, projected to what rules and audit need."""
        keep = {*(p.split(".", 1)[0] for p in ruleset.prefetch), *_KEEP_FIELDS}
        members = {*ruleset.relationship_members(), *_KEEP_MEMBERS}
        pulled = 0
        candidates: list[dict[str, Any]] = []
        for record in hook.iter_conversions(
            from_date=from_date,
            to_date=to_date,
            timezone_id=self.timezone_id,
            show_conversions=True,
            show_events=False,
            page_size=self.page_size,
        ):
            pulled += 1
            if on_hold_status(record) != ON_HOLD or not on_hold_conversion_id(record):
                continue
            # Keep only the fields rules and audit read: memory stays bounded for big windows.
            compact = {k: record[k] for k in keep if k in record}
            rel = record.get("relationship")
            if isinstance(rel, dict):
                compact["relationship"] = {m: rel[m] for m in members if m in rel}
            candidates.append(compact)
        return candidates, pulled

    def _guardrails(
        self, evaluation: Evaluation, candidates: list[dict[str, Any]], eligible: int
    ) -> None:
        rejects = [d for d in evaluation.decisions if d.action == "reject"]
        problems = []
        if self.max_reject_count is not None and len(rejects) > self.max_reject_count:
            problems.append(f"{len(rejects)} rejections > max_reject_count {self.max_reject_count}")
        share = len(rejects) / eligible if eligible else 0.0
        if self.max_reject_share is not None and share > self.max_reject_share:
            problems.append(
                f"reject share {share:.1%} ({len(rejects)}/{eligible}) > max_reject_share "
                f"{self.max_reject_share:.1%}"
            )
        if self.max_approved_payout is not None:
            payout = sum(
                float(candidates[d.index].get("payout") or 0)
                for d in evaluation.decisions
                if d.action == "approve"
            )
            if payout > self.max_approved_payout:
                problems.append(
                    f"approved payout {payout:.2f} > max_approved_payout "
                    f"{self.max_approved_payout:.2f}"
                )
        if problems:
            top = Counter(d.rule_id for d in rejects).most_common(5)
            top_text = ", ".join(f"{rule} ({n})" for rule, n in top) or "none"
            raise GuardrailError(
                "On-hold review stopped before any write: "
                + "; ".join(problems)
                + f". Top rejecting rules: {top_text}. Check those rules (or the traffic), then "
                "rerun; raise the ceiling only if the volume is expected."
            )

    # -- execute --------------------------------------------------------------------------------

    def execute(self, context: Context) -> dict[str, Any]:
        from affiliate_network.review.engine import RuleSet

        dry_run = _as_bool(self.dry_run, "dry_run")
        check_reject_status(self.reject_status)
        rules_path = self._rules_path()
        ruleset = RuleSet.from_file(rules_path)  # validation happens before anything is pulled
        self.log.info("Rules %s: %d enabled rules", rules_path, len(ruleset.compiled))
        from_date, to_date = self._window(context)
        hook = self._hook()
        started = time.monotonic()
        candidates, pulled = self._pull_candidates(hook, ruleset, from_date, to_date)
        now = time.time()
        min_age_s = self.min_age_hours * 3600
        eligible = [
            i
            for i, record in enumerate(candidates)
            if min_age_s <= 0 or now - (on_hold_since(record) or now) >= min_age_s
        ]
        evaluation = ruleset.evaluate(candidates, now=now, eligible=eligible)
        self.log.info(
            "Window %s..%s: pulled %d conversions, %d on hold, %d old enough, decided %d "
            "in %.3f s CPU",
            from_date,
            to_date,
            pulled,
            len(candidates),
            len(eligible),
            len(evaluation.decisions),
            evaluation.cpu_seconds,
        )
        for rule in ruleset.rules:
            self.log.info(
                "  rule %-28s %-7s %6d", rule.id, rule.action, evaluation.per_rule.get(rule.id, 0)
            )

        run_id = str(
            (context or {}).get("run_id") or f"manual__{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S}"
        )
        ti = (context or {}).get("ti")
        attempt = getattr(ti, "try_number", None) or 1
        folder = audit_dir(resolve_data_base(self.base_path), self.dag_id, run_id)
        audit_path = folder / f"decisions-attempt-{attempt}.jsonl"
        rows = self._audit_rows(candidates, evaluation, ruleset)

        outcome_by_id: dict[str, tuple[bool, str]] = {}
        approve_ids = [r["on_hold_conversion_id"] for r in rows if r["action"] == "approve"]
        reject_ids = [r["on_hold_conversion_id"] for r in rows if r["action"] == "reject"]
        guardrail: str | None = None
        try:
            self._guardrails(evaluation, candidates, len(eligible))
        except GuardrailError as err:
            if not dry_run:
                self._finish_rows(rows, {}, "guardrail tripped: nothing written")
                write_jsonl_atomic(audit_path, rows)
                self.log.error("%s Audit: %s", err, audit_path)
                raise
            # A dry run reports the verdict instead of failing: on-call wants to see the decisions.
            guardrail = str(err)
            self.log.warning("Dry run: a real run would stop here. %s", err)

        summary_applied = {APPROVED: 0, self.reject_status: 0}
        mismatches = skipped = chunks = 0
        if dry_run:
            self._finish_rows(rows, {}, "dry run" if guardrail is None else "dry run; guardrail")
        else:
            # Intentions first: if the task dies mid-apply the audit still shows what was planned.
            self._finish_rows(rows, {}, "pending: not yet applied")
            write_jsonl_atomic(audit_path, rows)
            writer = OnHoldWriter(
                hook,
                from_date=from_date,
                to_date=to_date,
                timezone_id=self.timezone_id,
                chunk_size=self.chunk_size,
                log=self.log,
            )
            outcomes = {APPROVED: ApplyOutcome(), self.reject_status: ApplyOutcome()}
            try:
                for ids, status in ((approve_ids, APPROVED), (reject_ids, self.reject_status)):
                    if ids:
                        writer.apply(ids, status, outcomes[status])
            except Exception as err:
                # Record what did land before failing: the retry only re-sends what is on hold.
                _outcome_reasons(outcomes, outcome_by_id)
                self._finish_rows(
                    rows, outcome_by_id, f"not applied: failed ({type(err).__name__})"
                )
                write_jsonl_atomic(audit_path, rows)
                raise
            _outcome_reasons(outcomes, outcome_by_id)
            for status, outcome in outcomes.items():
                summary_applied[status] = len(outcome.applied)
                mismatches += len(outcome.mismatches)
                skipped += len(outcome.skipped)
                chunks += outcome.chunks
            self._finish_rows(rows, outcome_by_id, "not applied")
        count = write_jsonl_atomic(audit_path, rows)
        self.log.info("Audit: %d decisions -> %s", count, audit_path)

        per_action = evaluation.per_action
        return {
            "window": [from_date, to_date],
            "pulled": pulled,
            "on_hold": len(candidates),
            "eligible": len(eligible),
            "too_young": len(candidates) - len(eligible),
            "undecided": evaluation.unmatched,
            "decisions": per_action,
            "per_rule": dict(evaluation.per_rule),
            "applied": summary_applied,
            "skipped_not_on_hold": skipped,
            "readback_mismatches": mismatches,
            "patch_requests": chunks,
            "review_pending": per_action.get("review", 0),
            "dry_run": dry_run,
            "guardrail_tripped": guardrail is not None,
            "audit_path": str(audit_path),
            "elapsed_s": round(time.monotonic() - started, 3),
        }

    def _audit_rows(
        self, candidates: list[dict[str, Any]], evaluation: Evaluation, ruleset: RuleSet
    ) -> list[dict]:
        descriptions = {rule.id: rule.description for rule in ruleset.rules}
        rows = []
        for decision in evaluation.decisions:
            record = candidates[decision.index]
            rel = record.get("relationship") or {}
            row = {
                "conversion_id": record.get("conversion_id"),
                "on_hold_conversion_id": on_hold_conversion_id(record),
                "rule_id": decision.rule_id,
                "rule_description": descriptions.get(decision.rule_id, ""),
                "action": decision.action,
                "matched": decision.matched,
                "affiliate_id": (rel.get("affiliate") or {}).get("network_affiliate_id"),
                "offer_id": (rel.get("offer") or {}).get("network_offer_id"),
            }
            for key in _AUDIT_FIELDS:
                row[key] = record.get(key)
            rows.append(row)
        return rows

    def _finish_rows(
        self, rows: list[dict], outcomes: dict[str, tuple[bool, str]], default_reason: str
    ) -> None:
        for row in rows:
            action = row["action"]
            if action == "review":
                row["applied"], row["reason"] = False, "waiting for a human decision"
            elif action == "hold":
                row["applied"], row["reason"] = False, "rule says keep on hold"
            elif row["on_hold_conversion_id"] in outcomes:
                row["applied"], row["reason"] = outcomes[row["on_hold_conversion_id"]]
            else:
                row["applied"], row["reason"] = False, default_reason


# ---------------------------------------------------------------------------------------------
# Human in the loop
# ---------------------------------------------------------------------------------------------


def build_review_requests(summary: dict[str, Any], *, max_rows: int = BODY_ROWS) -> list[dict]:
    """One human-in-the-loop request per rule with ``review`` decisions in the run's audit.

    :param summary: the :class:`OnHoldReviewOperator` return value (counts + ``audit_path``).
    :param max_rows: conversions listed in each body (the choice covers all of the rule's).
    :return: ``[{"subject": ..., "body": ...}]`` ready for ``HITLOperator.partial().expand_kwargs``;
        empty when nothing waits for review or on a dry run.
    """
    if not summary or summary.get("dry_run") or not summary.get("review_pending"):
        return []
    rows = [r for r in read_jsonl(summary["audit_path"]) if r["action"] == "review"]
    by_rule: dict[str, list[dict]] = {}
    for row in rows:
        by_rule.setdefault(row["rule_id"], []).append(row)
    requests = []
    for rule_id, items in by_rule.items():
        description = items[0].get("rule_description") or ""
        payout = sum(float(r.get("payout") or 0) for r in items)
        lines = [
            f"**Rule `{rule_id}`** flagged **{len(items)}** on-hold conversions "
            f"(payout {payout:.2f}). {description}".strip(),
            "",
            f"Your choice applies to all {len(items)}. To leave some on hold, list their "
            f"conversion ids in `{KEEP_PARAM}`.",
            "",
            "| conversion | affiliate | offer | payout | sale | matched |",
            "|---|---|---|---|---|---|",
        ]
        shown = heapq.nlargest(max_rows, items, key=lambda r: float(r.get("payout") or 0))
        for r in shown:
            matched = ", ".join(f"{k}={v}" for k, v in (r.get("matched") or {}).items())
            lines.append(
                f"| `{r['conversion_id']}` | {r.get('affiliate_id')} | {r.get('offer_id')} | "
                f"{r.get('payout')} | {r.get('sale_amount')} | {matched} |"
            )
        if len(items) > max_rows:
            lines.append(f"\n… and {len(items) - max_rows} more (highest payout shown first).")
        lines.append(f"\nAudit file: `{summary['audit_path']}`")
        requests.append(
            {
                "subject": f"On-hold review: {len(items)} conversions flagged by rule {rule_id}",
                "body": "\n".join(lines),
            }
        )
    return requests


def _rule_of_subject(subject: str) -> str:
    return subject.rsplit(" rule ", 1)[-1].strip()


class OnHoldReviewApplyOperator(BaseOperator):
    """Apply the reviewers' choices: approve, reject or keep on hold, per rule.

    Safe to rerun: every id is re-checked right before its chunk and only ids still on hold are
    sent, so nothing is approved or rejected twice.

    :param summary: the review operator's summary (templated XCom: ``audit_path``, window).
    :param requests: the requests shown to reviewers (from :func:`build_review_requests`), in
        map-index order.
    :param responses: the human-in-the-loop operators' results, in the same order (each with
        ``chosen_options`` and ``params_input``).
    :param affiliate_network_conn_id: network-portal connection.
    :param reject_status: PATCH status for rejections.
    :param chunk_size: on-hold ids per PATCH.
    :param timezone_id: timezone of the window.
    """

    template_fields: Sequence[str] = ("summary", "requests", "responses")

    def __init__(
        self,
        *,
        summary: Any,
        requests: Any,
        responses: Any,
        affiliate_network_conn_id: str = "affiliate_network_default",
        reject_status: str = DEFAULT_REJECT_STATUS,
        chunk_size: int = 100,
        timezone_id: int = 1,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if not 1 <= chunk_size <= 2000:
            raise ConfigValidationError(f"chunk_size must be between 1 and 2000, got {chunk_size}")
        self.summary = summary
        self.requests = requests
        self.responses = responses
        self.affiliate_network_conn_id = affiliate_network_conn_id
        self.reject_status = reject_status
        self.chunk_size = chunk_size
        self.timezone_id = timezone_id

    def execute(self, context: Context) -> dict[str, Any]:
        check_reject_status(self.reject_status)
        summary = self.summary or {}
        requests = list(self.requests or [])
        responses = list(self.responses or [])
        if not requests or summary.get("dry_run"):
            self.log.info("No human review requests in this run.")
            return {"requests": 0, "applied": {}, "audit_path": None}
        if len(responses) != len(requests):
            raise AffiliateNetworkError(
                f"{len(requests)} review requests but {len(responses)} responses"
            )
        rows = [r for r in read_jsonl(summary["audit_path"]) if r["action"] == "review"]
        plan: dict[str, list[str]] = {APPROVED: [], self.reject_status: []}
        decided: dict[str, tuple[str, str]] = {}  # on-hold id -> (choice, responder)
        for request, response in zip(requests, responses, strict=True):
            rule_id = _rule_of_subject(request["subject"])
            chosen = (response or {}).get("chosen_options") or [OPTION_KEEP]
            params = (response or {}).get("params_input") or {}
            keep = set(re.split(r"[\s,;]+", str(params.get(KEEP_PARAM) or "").strip())) - {""}
            who = (response or {}).get("responded_by_user") or {}
            who_name = who.get("name") if isinstance(who, dict) else str(who)
            choice = chosen[0]
            self.log.info(
                "Rule %s: %s chose %r (keep on hold: %d)", rule_id, who_name, choice, len(keep)
            )
            for row in rows:
                if row["rule_id"] != rule_id:
                    continue
                oh_id = row["on_hold_conversion_id"]
                if choice == OPTION_KEEP or row["conversion_id"] in keep:
                    decided[oh_id] = (OPTION_KEEP, who_name or "")
                    continue
                status = APPROVED if choice == OPTION_APPROVE else self.reject_status
                plan[status].append(oh_id)
                decided[oh_id] = (choice, who_name or "")
        window = summary.get("window") or [None, None]
        writer = OnHoldWriter(
            self._hook(),
            from_date=window[0],
            to_date=window[1],
            timezone_id=self.timezone_id,
            chunk_size=self.chunk_size,
            log=self.log,
        )
        applied: dict[str, int] = {}
        outcomes: dict[str, tuple[bool, str]] = {}
        mismatches = 0
        for status, ids in plan.items():
            if not ids:
                continue
            outcome = writer.apply(ids, status)
            applied[status] = len(outcome.applied)
            mismatches += len(outcome.mismatches)
            for i in outcome.applied:
                seen = outcome.mismatches.get(i, status) if i in outcome.mismatches else status
                outcomes[i] = (True, f"{status} by reviewer; read back shows {seen or 'not found'}")
            for i, why in outcome.skipped.items():
                outcomes[i] = (False, why)
        human_rows = []
        for row in rows:
            oh_id = row["on_hold_conversion_id"]
            if oh_id not in decided:
                continue
            choice, who_name = decided[oh_id]
            ok, why = outcomes.get(oh_id, (False, "kept on hold by reviewer"))
            human_rows.append(
                {
                    **row,
                    "human_choice": choice,
                    "responded_by": who_name,
                    "applied": ok,
                    "reason": why,
                }
            )
        ti = (context or {}).get("ti")
        attempt = getattr(ti, "try_number", None) or 1
        folder = ObjectStoragePath(str(summary["audit_path"])).parent
        audit_path = folder / f"human-attempt-{attempt}.jsonl"
        write_jsonl_atomic(audit_path, human_rows)
        return {
            "requests": len(requests),
            "applied": applied,
            "kept_on_hold": sum(1 for c, _ in decided.values() if c == OPTION_KEEP),
            "readback_mismatches": mismatches,
            "audit_path": str(audit_path),
        }

    def _hook(self) -> AffiliateNetworkHook:
        from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook

        return AffiliateNetworkHook(affiliate_network_conn_id=self.affiliate_network_conn_id)


__all__ = [
    "KEEP_PARAM",
    "REVIEW_OPTIONS",
    "GuardrailError",
    "OnHoldReviewApplyOperator",
    "OnHoldReviewOperator",
    "OnHoldWriter",
    "build_review_requests",
    "read_jsonl",
    "write_jsonl_atomic",
]
