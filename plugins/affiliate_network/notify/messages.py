"""What a notification says: what happened, what is at stake, what to do, where to read more.

Built from what Airflow hands a callback (the failed task's exception, the waiting human-review
task, a missed deadline's run), never from a connection: no message carries a key. Every text
also goes through Airflow's secret masker before it leaves (:func:`Message.text`).

A failure is told by the exception's class: :func:`failure_kind` registers its text and the
function that lists its facts by class *name* (no exception class is imported here).
"""

from __future__ import annotations

import dataclasses
import html
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any

#: Runbook anchors of docs/notifications.md, one per event.
ANCHORS = {
    "guardrail_tripped": "a-guardrail-tripped",
    "sync_blocked": "a-sync-is-blocked",
    "reconciliation_failed": "a-day-did-not-reconcile",
    "task_failed": "a-task-failed",
    "review_waiting": "a-review-request-is-waiting",
    "run_late": "a-run-is-late",
}
#: Items of a list shown in a message (ids, cells); the rest is counted.
MAX_ITEMS = 10
#: Characters of an exception message quoted in a message.
MAX_QUOTE = 1500


@dataclasses.dataclass(frozen=True)
class Message:
    """One notification.

    :param event: one of ``settings.NOTIFICATION_EVENTS``.
    :param title: one line (the e-mail subject).
    :param happened: what happened.
    :param at_stake: ids, counts and money, one fact a line.
    :param to_do: what a person does now.
    :param runbook: link to the runbook section.
    :param link: the task or run in the Airflow UI.
    :param where: ``{"dag_id", "run_id", "task_id", ...}`` of what it is about.
    """

    event: str
    title: str
    happened: str
    at_stake: tuple[str, ...]
    to_do: str
    runbook: str
    link: str = ""
    where: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def text(self) -> str:
        """Plain text, masked (the chat message and the e-mail body)."""
        lines = [self.title, "", f"What happened: {self.happened}", ""]
        if self.at_stake:
            lines += ["At stake:", *(f"- {fact}" for fact in self.at_stake), ""]
        lines += [f"What to do: {self.to_do}", f"Runbook: {self.runbook}"]
        if self.link:
            lines.append(f"In Airflow: {self.link}")
        return _masked("\n".join(lines))

    def html(self) -> str:
        """The text as HTML (the SMTP provider sends HTML e-mail)."""
        body = html.escape(self.text())
        return f'<pre style="font-family: inherit; white-space: pre-wrap">{body}</pre>'

    def fields(self) -> dict[str, Any]:
        """The message as JSON fields (``format: json`` webhooks), masked."""
        return {
            "event": self.event,
            "title": _masked(self.title),
            "happened": _masked(self.happened),
            "at_stake": [_masked(fact) for fact in self.at_stake],
            "to_do": _masked(self.to_do),
            "runbook": self.runbook,
            "link": self.link,
            **{key: _masked(str(value)) for key, value in self.where.items()},
            "text": self.text(),
        }


def _masked(text: str) -> str:
    """``text`` with every secret this process knows masked (Airflow's masker)."""
    from airflow.sdk.log import redact

    return str(redact(text))


def runbook_link(base: str, event: str) -> str:
    """``base#anchor`` of the event's runbook section."""
    return f"{base}#{ANCHORS.get(event, ANCHORS['task_failed'])}"


# -- failures ----------------------------------------------------------------------------------

#: ``(error, where) -> facts``: what is at stake, one line each (``where`` as in the message).
Facts = Callable[[BaseException, Mapping[str, Any]], list[str]]


@dataclasses.dataclass(frozen=True)
class FailureKind:
    """How a failure is told: the static text around the facts its function lists.

    :param event: the event (and runbook anchor) of ``settings.NOTIFICATION_EVENTS``.
    :param title: the title; ``{task}`` stands for the task's name.
    :param to_do: what the on-call person does.
    :param facts: lists what is at stake.
    :param named: the text starts with the exception's class name (a generic failure).
    """

    event: str
    title: str
    to_do: str
    facts: Facts
    named: bool = False

    def describe(self, context: Mapping[str, Any], error: BaseException, runbook: str) -> Message:
        where, link = _where(context)
        # A package error names its own next step and runbook entry (exceptions.next_step):
        # the generic kind tells that one, the specific kinds keep their fuller text.
        step = getattr(error, "next_step_text", None) if self.named else None
        untouched = getattr(error, "untouched", None) if self.named else None
        facts = [*self.facts(error, where), *([f"untouched: {untouched}"] if untouched else [])]
        return Message(
            event=self.event,
            title="[affiliate-network] " + self.title.format(task=_task_name(where)),
            happened=f"{type(error).__name__}: {_quote(error)}" if self.named else _quote(error),
            at_stake=tuple(facts),
            to_do=_error_step(error, step) if callable(step) else self.to_do,
            runbook=runbook_link(runbook, self.event),
            link=link,
            where=where,
        )


_KINDS: dict[str, FailureKind] = {}


def failure_kind(
    class_name: str, *, event: str, title: str, to_do: str
) -> Callable[[Facts], Facts]:
    """Register how a failure whose exception has (or derives from) ``class_name`` is told.

    The decorated function lists the facts; the rest of the message is this call's text.

    :param class_name: an exception class's name (matched along the class's MRO).
    :param event: the event (and runbook anchor).
    :param title: the title; ``{task}`` stands for the task's name.
    :param to_do: what the on-call person does.
    """

    def register(facts: Facts) -> Facts:
        _KINDS[class_name] = FailureKind(event, title, to_do, facts)
        return facts

    return register


def describe_failure(context: Mapping[str, Any], runbook: str) -> Message:
    """The message of a failed task (its ``on_failure_callback`` context).

    :param context: the task's context; ``exception`` is the error it failed with.
    :param runbook: base link of the runbook (``settings.runbook_url``).
    """
    error = context.get("exception")
    if not isinstance(error, BaseException):
        error = RuntimeError(str(error) if error else "unknown error")
    for cls in type(error).__mro__:
        kind = _KINDS.get(cls.__name__)
        if kind is not None:
            return kind.describe(context, error, runbook)
    return _TASK_FAILED.describe(context, error, runbook)


def _where(context: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """``({"dag_id", "run_id", "task_id", "map_index", "try_number"}, task log URL)``."""
    ti = context.get("ti") or context.get("task_instance")
    where: dict[str, Any] = {}
    for name in ("dag_id", "run_id", "task_id", "map_index", "try_number"):
        value = getattr(ti, name, None)
        if value is not None and not (name == "map_index" and value == -1):
            where[name] = value
    try:
        link = str(getattr(ti, "log_url", "") or "")
    except Exception:  # a context without the configuration the URL is built from
        link = ""
    return where, link


def _task_name(where: Mapping[str, Any]) -> str:
    index = where.get("map_index")
    name = f"{where.get('dag_id', '?')}.{where.get('task_id', '?')}"
    return f"{name}[{index}]" if index is not None else name


def _error_step(error: BaseException, step: Callable[[], object]) -> str:
    """The error's next step and its entry in docs/runbook.md (``runbook_anchor``)."""
    anchor = getattr(error, "runbook_anchor", None)
    return f"{step()}" + (f" (docs/runbook.md#{anchor})" if anchor else "")


def _quote(error: BaseException) -> str:
    # What happened, without the next step a task's failure path adds (told in "What to do").
    happened = getattr(error, "happened", None)
    text = (str(happened()) if callable(happened) else str(error)).strip()
    return text if len(text) <= MAX_QUOTE else text[:MAX_QUOTE] + " …"


def _sample(items: Sequence[Any], total: int | None = None) -> str:
    total = len(items) if total is None else total
    shown = ", ".join(str(item) for item in items[:MAX_ITEMS])
    more = total - min(len(items), MAX_ITEMS)
    return f"{shown} (and {more} more)" if more > 0 else shown


def _money(amount: float | Mapping[str, Any] | None, currencies: Iterable[str]) -> str:
    if amount is None:
        return "unknown"
    if isinstance(amount, Mapping):  # per currency: amounts of two currencies are never added
        return " + ".join(f"{_decimals(a)} {c}" for c, a in amount.items()) or "0.00"
    unit = "/".join(currencies)
    return f"{amount:,.2f}{f' {unit}' if unit else ''}"


def _decimals(amount: Any) -> str:
    """At least two decimals, up to four (ISO 4217's finest minor unit: 900.125 KWD)."""
    exponent = amount.normalize().as_tuple().exponent if isinstance(amount, Decimal) else -2
    places = min(4, max(2, -exponent)) if isinstance(exponent, int) else 2
    return f"{amount:,.{places}f}"


def _exception_facts(error: BaseException) -> list[str]:
    """Public fields of a package exception (counts, ids, cells), one line each."""
    facts = []
    skip = {"message", "status_code", "method", "path", "errors"}
    for name, value in vars(error).items():
        if name.startswith("_") or name in skip or value is None or value in ((), [], {}):
            continue
        if isinstance(value, list | tuple):
            facts.append(f"{name}: {_sample(list(value))}")
        elif isinstance(value, str | int | float | bool):
            facts.append(f"{name}: {value}")
        elif isinstance(value, Mapping):
            items = [f"{k}={v}" for k, v in list(value.items())[: MAX_ITEMS + 1]]
            facts.append(f"{name}: {_sample(items, len(value))}")
    return facts


def _run_and_fields(error: BaseException, where: Mapping[str, Any]) -> list[str]:
    run = f"run {where.get('run_id', '?')}, attempt {where.get('try_number', '?')}"
    return [run, *_exception_facts(error)]


_TASK_FAILED = FailureKind(
    event="task_failed",
    title="Task failed: {task}",
    to_do="Read the task log and the message above (package errors say what to do), fix "
    "the cause, then clear the task: every task of these DAGs is safe to clear and rerun.",
    facts=_run_and_fields,
    named=True,
)


@failure_kind(
    "GuardrailError",
    event="guardrail_tripped",
    title="Guardrail tripped: {task}, nothing was written",
    to_do="Check the top rejecting rules against the audit file (or the traffic). Fix the "
    "rule, or, only if the volume is expected, raise the ceiling "
    "(max_reject_share, max_reject_count, max_approved_payout in the rules file's review: "
    "section) and "
    'clear the task. A run with conf {"dry_run": true} shows the decisions without writing.',
)
def _guardrail(error: BaseException, where: Mapping[str, Any]) -> list[str]:
    get = vars(error).get
    currencies = get("currencies") or ()
    facts = []
    if get("rejections") is not None:
        facts.append(
            f"{get('rejections'):,} rejections of {get('decided') or 0:,} decided conversions, "
            f"rejected payout {_money(get('rejected_payout'), currencies)}; approvals' payout "
            f"{_money(get('approved_payout'), currencies)}"
        )
    top_rules, ids = get("top_rules") or (), get("conversion_ids") or ()
    if top_rules:
        facts.append("top rejecting rules: " + ", ".join(f"{r} ({n})" for r, n in top_rules))
    if ids:
        facts.append(
            "conversions it would have rejected (highest payout first): "
            + _sample(list(ids), get("rejections"))
        )
    if get("audit_path"):
        facts.append(f"every decision: {get('audit_path')}")
    facts.append("nothing was approved or rejected on the network by this run")
    return facts


@failure_kind(
    "SyncBlockedError",
    event="sync_blocked",
    title="Offer sync blocked: {task}",
    to_do="Follow the instructions under each blocked object above: check the named object "
    'in the network UI, then trigger the DAG with dry_run off and resolve_unknown ({"<key>": '
    '<id found>} or {"<key>": "absent"}) or accept_drift (["<key>"]).',
)
def _sync_blocked(error: BaseException, where: Mapping[str, Any]) -> list[str]:
    blocked = list(vars(error).get("blocked") or ())
    facts = [f"blocked objects: {_sample(blocked)}"] if blocked else []
    facts.append(f"nothing of {where.get('task_id', 'this task')} was sent to the network")
    return facts


@failure_kind(
    "ReconciliationError",
    event="reconciliation_failed",
    title="A day did not reconcile: {task}",
    to_do="Compare the named cells with the network's report for that day. A lost page or a "
    "late status change: clear the day's pull task (it re-pulls the day) and let the "
    "reconciliation run again. A difference that persists: open a ticket with the network "
    "with the comparison file beside the day's manifest.",
)
def _reconciliation(error: BaseException, where: Mapping[str, Any]) -> list[str]:
    # Its fields (day, cells, differences, ...) as they are.
    return _exception_facts(error)


# -- a waiting human review --------------------------------------------------------------------

_ROW = re.compile(r"^\|\s*`(?P<id>[^`]+)`\s*\|(?P<rest>.*)\|\s*$")


def describe_review(context: Mapping[str, Any], runbook: str) -> Message:
    """The message of a human-review request that starts waiting (a HITL task's notifier).

    :param context: the HITL task's context; ``task`` holds the rendered subject and body.
    :param runbook: base link of the runbook.
    """
    task = context.get("task")
    where, link = _where(context)
    subject = str(getattr(task, "subject", "") or "a review request")
    body = str(getattr(task, "body", "") or "")
    lines = [line.strip() for line in body.splitlines() if line.strip()]
    facts = [lines[0].replace("**", "").replace("`", "")] if lines else []
    rows = [m for m in (_ROW.match(line) for line in lines) if m]
    for row in rows[:MAX_ITEMS]:
        cells = [c.strip() for c in row["rest"].split("|")]
        facts.append(f"conversion {row['id']}: " + ", ".join(c for c in cells if c))
    if len(rows) > MAX_ITEMS:
        facts.append(f"… {len(rows) - MAX_ITEMS} more listed in the request")
    timeout = getattr(task, "response_timeout", None)
    defaults = getattr(task, "defaults", None) or []
    wait = (
        f" Unanswered after {timeout}, {' / '.join(defaults) or 'the default'} applies and the "
        "next run asks again."
        if timeout
        else ""
    )
    return Message(
        event="review_waiting",
        title=f"[affiliate-network] Review waiting: {subject}",
        happened=f"{_task_name(where)} asks a person to decide: {subject}.",
        at_stake=tuple(facts),
        to_do="Open the request in Airflow (Required actions, or the link below), read the "
        "listed conversions and choose Approve all, Reject all or Keep on hold; list ids in "
        f"keep_on_hold to leave some on hold.{wait}",
        runbook=runbook_link(runbook, "review_waiting"),
        link=link,
        where=where,
    )


# -- a late run --------------------------------------------------------------------------------


def describe_late(context: Mapping[str, Any], late_after_minutes: int, runbook: str) -> Message:
    """The message of a missed deadline (the context a deadline callback receives).

    :param context: ``{"dag_run": {...}, "deadline": {"deadline_time": ...}}``.
    :param late_after_minutes: the configured deadline after the run was queued.
    :param runbook: base link of the runbook.
    """
    run = dict(context.get("dag_run") or {})
    deadline = dict(context.get("deadline") or {})
    dag_id, run_id = run.get("dag_id", "?"), run.get("dag_run_id") or run.get("run_id", "?")
    facts = [
        f"state: {run.get('state', '?')}, run type {run.get('run_type', '?')}",
        f"queued at {run.get('queued_at', '?')}, started {run.get('start_date') or 'not yet'}",
    ]
    if run.get("data_interval_start"):
        facts.append(
            f"data interval {run.get('data_interval_start')} .. {run.get('data_interval_end')}"
        )
    link = ""
    if dag_id != "?" and run_id != "?":
        from urllib.parse import quote

        from airflow.sdk.configuration import conf

        base = conf.get("api", "base_url", fallback="http://localhost:8080/")
        link = f"{base.rstrip('/')}/dags/{dag_id}/runs/{quote(str(run_id))}"
    return Message(
        event="run_late",
        title=f"[affiliate-network] Run late: {dag_id} {run_id}",
        happened=f"{dag_id} run {run_id} had not finished {late_after_minutes} min after it "
        f"was queued (deadline {deadline.get('deadline_time', '?')}).",
        at_stake=tuple(facts),
        to_do="Open the run in Airflow: a task still queued means no free worker or pool slot; "
        "a task running long is waiting for the network (its log shows retries, rate limits or "
        "the quota wait); a human-review task is waiting for an answer. A failed run already "
        "sent its own notice.",
        runbook=runbook_link(runbook, "run_late"),
        link=link,
        where={"dag_id": dag_id, "run_id": run_id},
    )
