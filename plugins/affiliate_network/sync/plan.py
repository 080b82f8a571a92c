"""Plan: compare the desired state with the ledger, object by object, field by field.

The network shows no GET for offer groups, offers or scrub rates, so "what the network holds" is
what this sync last applied (the ledger). Actions:

- ``create``: a create-only object (scrub rate, category) the ledger does not hold.
- ``update``: a PUT object whose definition differs from the last applied one, or that was never
  applied through this ledger (``first_apply``: every field is sent), or a ``force``-d key.
- ``unchanged``: same definition hash as the ledger: nothing is sent.
- ``record``: on-call resolved an unknown outcome or accepted drift: the ledger is updated,
  nothing is sent.
- ``unresolved``: an intent without an id (the POST's outcome is unknown): blocks the section.
- ``drift``: a create-only object whose definition changed after creation: blocks the section.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from affiliate_network.exceptions import ConfigValidationError
from affiliate_network.sync.ledger import STATE_INTENT, Ledger
from affiliate_network.sync.models import SECTIONS, DesiredObject, DesiredState, Offer

Action = Literal["create", "update", "unchanged", "record", "unresolved", "drift"]
#: Actions that send a request.
SENDING_ACTIONS: frozenset[str] = frozenset({"create", "update"})
#: Actions that stop a section before anything is sent.
BLOCKING_ACTIONS: frozenset[str] = frozenset({"unresolved", "drift"})
#: ``resolve_unknown`` value meaning "checked: the object was NOT created, create it now".
RESOLVE_ABSENT = "absent"
_MISSING = object()
_SYMBOLS = {"create": "+", "update": "~", "unchanged": "=", "record": "*"}


@dataclass(frozen=True)
class FieldChange:
    """One changed field: ``path`` like ``payout_revenue[0].payout_amount``."""

    path: str
    before: Any
    after: Any

    def render(self) -> str:
        if self.before is _MISSING:
            return f"+ {self.path}: {_show(self.after)}"
        if self.after is _MISSING:
            return f"- {self.path}: {_show(self.before)}"
        return f"~ {self.path}: {_show(self.before)} -> {_show(self.after)}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "field": self.path,
            "before": None if self.before is _MISSING else self.before,
            "after": None if self.after is _MISSING else self.after,
        }


def _show(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else str(value).replace("'", '"')
    return text if len(text) <= 120 else text[:117] + "..."


def diff(before: Any, after: Any, path: str = "") -> list[FieldChange]:
    """Field-level differences between two JSON values (dicts recursed, lists by position)."""
    if isinstance(before, dict) and isinstance(after, dict):
        changes: list[FieldChange] = []
        for key in [*after, *(k for k in before if k not in after)]:
            sub = f"{path}.{key}" if path else str(key)
            changes += diff(before.get(key, _MISSING), after.get(key, _MISSING), sub)
        return changes
    if (
        isinstance(before, list)
        and isinstance(after, list)
        and len(before) == len(after)
        and any(isinstance(v, dict | list) for v in [*before, *after])
    ):
        changes = []
        for index, (old, new) in enumerate(zip(before, after, strict=True)):
            changes += diff(old, new, f"{path}[{index}]")
        return changes
    if before is _MISSING and isinstance(after, dict):
        return [c for key, value in after.items() for c in diff(_MISSING, value, f"{path}.{key}")]
    if before == after and type(before) is type(after):
        return []
    return [FieldChange(path, before, after)]


@dataclass(frozen=True)
class PlannedChange:
    """What the sync will do with one definition.

    :param obj: the desired definition.
    :param action: see the module docstring.
    :param changes: field-level diff against the last applied definition.
    :param network_id: the object's id on the network (known, recorded or resolved).
    :param message: why the object is blocked, or what a ``record`` does.
    :param warnings: undocumented values and other notes for the reviewer.
    """

    obj: DesiredObject
    action: Action
    changes: tuple[FieldChange, ...] = ()
    network_id: int | None = None
    first_apply: bool = False
    message: str = ""
    warnings: tuple[str, ...] = ()

    @property
    def section(self) -> str:
        return self.obj.section

    @property
    def key(self) -> str:
        return self.obj.ledger_key

    def render(self) -> list[str]:
        symbol = _SYMBOLS.get(self.action, "!")
        head = f"  {symbol} {self.action:<10} {self.obj.describe()}"
        if self.first_apply:
            head += "  (not in the ledger yet: the whole object is sent)"
        lines = [head]
        if self.action != "unchanged":
            lines += [f"        {change.render()}" for change in self.changes]
        if self.message:
            lines += [f"        {line}" for line in self.message.splitlines()]
        lines += [f"        warning: {warning}" for warning in self.warnings]
        return lines

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key, "action": self.action}
        if self.network_id is not None:
            out["network_id"] = self.network_id
        if self.action in SENDING_ACTIONS | BLOCKING_ACTIONS and not self.first_apply:
            out["fields"] = [c.path for c in self.changes]
        if self.first_apply:
            out["first_apply"] = True
        return out


@dataclass
class Plan:
    """The plan of a desired state against a ledger.

    :param source: desired-state file.
    :param ledger_path: ledger compared with.
    :param items: one planned change per definition, in apply order.
    :param orphans: ledger keys no longer in the desired state (never deleted: reported only).
    """

    source: str
    ledger_path: str
    items: list[PlannedChange] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)

    def for_sections(self, sections: Iterable[str]) -> list[PlannedChange]:
        wanted = set(sections)
        return [item for item in self.items if item.section in wanted]

    def counts(self, sections: Iterable[str] | None = None) -> dict[str, int]:
        items = self.items if sections is None else self.for_sections(sections)
        out = {action: 0 for action in _SYMBOLS} | {a: 0 for a in BLOCKING_ACTIONS}
        for item in items:
            out[item.action] += 1
        return out

    def blocked(self, sections: Iterable[str] | None = None) -> list[PlannedChange]:
        items = self.items if sections is None else self.for_sections(sections)
        return [item for item in items if item.action in BLOCKING_ACTIONS]

    def render(self, sections: Iterable[str] | None = None) -> str:
        """The readable plan (what a reviewer reads before apply)."""
        wanted = list(SECTIONS) if sections is None else [s for s in SECTIONS if s in sections]
        lines = [f"Plan for {self.source} (ledger: {self.ledger_path})"]
        for section in wanted:
            items = self.for_sections([section])
            if not items:
                continue
            lines.append(f"{section}:")
            for item in items:
                lines += item.render()
        for key in self.orphans:
            if key.split("/", 1)[0] in wanted:
                lines.append(
                    f"  ? {key}: in the ledger but no longer in the desired state "
                    "(nothing is deleted; remove or change it by hand if intended)"
                )
        c = self.counts(wanted)
        lines.append(
            f"Summary: {c['create']} to create, {c['update']} to update, {c['unchanged']} "
            f"unchanged, {c['record']} to record, {c['unresolved'] + c['drift']} blocked"
        )
        return "\n".join(lines)

    def summary(self, sections: Iterable[str] | None = None) -> dict[str, Any]:
        """Small JSON-ready summary (counts plus the objects that change or block)."""
        items = self.items if sections is None else self.for_sections(sections)
        return {
            "counts": self.counts(sections),
            "changes": [i.to_dict() for i in items if i.action != "unchanged"][:200],
            "orphans": self.orphans[:50],
        }


def run_keys(value: Sequence[str] | str | None, name: str) -> list[str]:
    """A run's ``force`` or ``accept_drift``: a list of keys, or a comma-separated string (a form
    field, a non-native template). Blank keys are dropped.

    :raises ConfigValidationError: anything else, naming ``name``.
    """
    if value is None or value == "":
        return []
    if isinstance(value, str):
        value = value.split(",")
    elif not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ConfigValidationError(
            f"{name} must be a list of keys (or a comma-separated string), got a "
            f"{type(value).__name__}"
        )
    return [key.strip() for key in value if key.strip()]


def run_resolutions(value: Mapping[str, int | str] | str | None) -> dict[str, int | str]:
    """A run's ``resolve_unknown``: ``{key: id found on the network | "absent"}``, as a mapping or
    its JSON text.

    :raises ConfigValidationError: not such a mapping, naming the key at fault.
    """
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError) as exc:  # deep nesting ends in RecursionError
            raise ConfigValidationError(
                "resolve_unknown must be a JSON object {key: id | 'absent'}: "
                f"{type(exc).__name__}: {str(exc)[:80]}"
            ) from None
    if not isinstance(value, Mapping):
        raise ConfigValidationError("resolve_unknown must be a mapping {key: id | 'absent'}")
    out: dict[str, int | str] = {}
    for key, decision in value.items():
        if isinstance(decision, str) and decision.isascii() and decision.isdigit():
            decision = int(decision)
        valid_id = isinstance(decision, int) and not isinstance(decision, bool) and decision > 0
        if not valid_id and decision != RESOLVE_ABSENT:
            raise ConfigValidationError(
                f"resolve_unknown[{key!r}] must be the id found on the network or "
                f"'absent', got {decision!r}"
            )
        out[str(key)] = decision
    return out


def build_plan(
    state: DesiredState,
    ledger: Ledger,
    *,
    resolve_unknown: Mapping[str, int | str] | None = None,
    accept_drift: Iterable[str] = (),
    force: Iterable[str] = (),
) -> Plan:
    """Compare every definition with its ledger entry.

    :param resolve_unknown: on-call decisions for intents without an id, by object key
        (``<key>`` or ``<section>/<key>``): the id found on the network (int: recorded, nothing
        sent) or ``"absent"`` (checked that it was not created: create it now).
    :param accept_drift: keys of create-only objects whose changed definition on-call has
        applied by hand: the ledger takes the new definition, nothing is sent.
    :param force: keys of PUT objects to send even if unchanged (e.g. after an edit in the UI).
    """
    resolve = {_full_key(k, state): v for k, v in (resolve_unknown or {}).items()}
    accepted = {_full_key(k, state) for k in accept_drift}
    forced = {_full_key(k, state) for k in force}
    plan = Plan(source=state.source, ledger_path=str(ledger.path))
    desired_keys = set()
    for obj in state.all_objects():
        desired_keys.add(obj.ledger_key)
        entry = ledger.get(obj.ledger_key)
        if obj.create_only:
            item = _plan_create_only(obj, entry, resolve, accepted)
        else:
            item = _plan_put(obj, entry, forced)
        plan.items.append(item)
    plan.orphans = [key for key in ledger.entry_keys() if key not in desired_keys]
    return plan


def _full_key(key: str, state: DesiredState) -> str:
    """Accept ``key`` or ``section/key``; a bare key is looked up across sections."""
    if "/" in key and key.split("/", 1)[0] in SECTIONS:
        return key
    for obj in state.all_objects():
        if obj.object_key == key:
            return obj.ledger_key
    return key


def _warnings(obj: DesiredObject) -> tuple[str, ...]:
    return tuple(obj.undocumented_values()) if isinstance(obj, Offer) else ()


def _plan_put(obj: DesiredObject, entry: dict[str, Any] | None, forced: set[str]) -> PlannedChange:
    body = obj.body()
    if entry is None or entry.get("network_id") != obj.network_id:
        return PlannedChange(
            obj,
            "update",
            tuple(diff({}, body)),
            obj.network_id,
            first_apply=True,
            warnings=_warnings(obj),
        )
    changes = tuple(diff(entry.get("definition") or {}, body))
    if entry.get("hash") == obj.definition_hash() and obj.ledger_key not in forced:
        return PlannedChange(obj, "unchanged", (), obj.network_id)
    message = "forced: sent although unchanged" if not changes else ""
    return PlannedChange(
        obj, "update", changes, obj.network_id, message=message, warnings=_warnings(obj)
    )


def _plan_create_only(
    obj: DesiredObject,
    entry: dict[str, Any] | None,
    resolve: Mapping[str, int | str],
    accepted: set[str],
) -> PlannedChange:
    body = obj.body()
    key = obj.ledger_key
    if entry is None:
        return PlannedChange(obj, "create", tuple(diff({}, body)))
    if entry.get("state") == STATE_INTENT:
        decision = resolve.get(key)
        if isinstance(decision, int) and not isinstance(decision, bool) and decision > 0:
            return PlannedChange(
                obj,
                "record",
                network_id=decision,
                message=f"resolve_unknown: record id {decision} found on the network; "
                "nothing is sent",
            )
        if decision == RESOLVE_ABSENT:
            return PlannedChange(
                obj,
                "create",
                tuple(diff({}, body)),
                message="resolve_unknown: confirmed absent on the network; created again",
            )
        return PlannedChange(
            obj, "unresolved", message=unresolved_message(obj, entry.get("intent_at"))
        )
    changes = tuple(diff(entry.get("definition") or {}, body))
    network_id = entry.get("network_id")
    if entry.get("hash") == obj.definition_hash():
        return PlannedChange(obj, "unchanged", (), network_id)
    if key in accepted:
        return PlannedChange(
            obj,
            "record",
            changes,
            network_id,
            message="accept_drift: the new definition is recorded as applied; nothing is sent",
        )
    return PlannedChange(obj, "drift", changes, network_id, message=drift_message(obj, network_id))


def unresolved_message(obj: DesiredObject, intent_at: str | None) -> str:
    """On-call instructions for an intent without an id (outcome of the POST unknown)."""
    what = _identify(obj)
    return (
        f"UNKNOWN OUTCOME: a create request for {obj.describe()} was started at "
        f"{intent_at or 'an unknown time'} but its result was never recorded (the request timed "
        "out, the connection dropped, or the worker died). It may exist on the network.\n"
        f"Check in the network UI whether {what} exists, then rerun with ONE of:\n"
        f'  resolve_unknown={{"{obj.object_key}": <id found>}}   (record it; nothing is sent)\n'
        f'  resolve_unknown={{"{obj.object_key}": "absent"}}      (it does not exist; create it)\n'
        "Nothing in this section is sent until this is resolved, so no duplicate is created."
    )


def drift_message(obj: DesiredObject, network_id: int | None) -> str:
    """On-call instructions for a create-only object whose definition changed after creation."""
    return (
        f"DRIFT: {obj.describe()} was created (id {network_id}) with another definition (diff "
        "above). The API has no update for it, so it is NOT sent again. Either:\n"
        "  - revert the desired state to the created definition; or\n"
        f"  - change setting {network_id} by hand in the network UI to match, then rerun with "
        f'accept_drift=["{obj.object_key}"]; or\n'
        "  - to replace it, deactivate it by hand and give the new definition a new key "
        "(it is created once under that key)."
    )


def _identify(obj: DesiredObject) -> str:
    body = obj.body()
    if obj.section == "scrub_rates":
        return (
            f"a custom scrub rate named {body['name']!r} for offer {body['network_offer_id']} and "
            f"affiliate {body['network_affiliate_id']}"
        )
    return f"a {obj.label} named {body.get('name')!r}"
