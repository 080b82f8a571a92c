"""Apply a plan section by section: send what changed, record each success in the ledger.

PUT objects (offer groups, offers, channels) and the offer URL bulk edit are idempotent: a
failure leaves the ledger untouched and a rerun sends the same request again.

Create-only objects (custom scrub rates, categories) are created exactly once: an intent is
written to the ledger before the POST and replaced by the id after it. When the outcome is
unknown (timeout, dropped connection, 5xx, worker death) the intent stays and the next run stops
on it (see :func:`affiliate_network.sync.plan.unresolved_message`). The hook raises
``OutcomeUnknownError`` exactly when a non-idempotent request may have been applied (read timeout,
connection dropped after sending, any 5xx); every other hook error means the server did not apply it
(a 4xx refusal, 429 retried to exhaustion, a connection never opened), so the intent is
dropped and a rerun may try again.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, Protocol

from affiliate_network.exceptions import (
    AffiliateNetworkError,
    OutcomeUnknownError,
    SyncBlockedError,
)
from affiliate_network.sync.ledger import Ledger
from affiliate_network.sync.models import DesiredObject
from affiliate_network.sync.plan import Plan, PlannedChange, unresolved_message

log = logging.getLogger(__name__)

#: Id field of the record a create returns, per create-only section.
CREATED_ID_FIELDS: dict[str, str] = {
    "scrub_rates": "network_custom_scrub_rate_setting_id",
    "categories": "network_category_id",
}


class NetworkWriter(Protocol):
    """The hook methods the sync uses (``AffiliateNetworkHook``)."""

    def update_offer_group(self, offer_group_id: int, body: dict[str, Any]) -> dict[str, Any]: ...
    def update_offer(self, offer_id: int, body: dict[str, Any]) -> dict[str, Any]: ...
    def create_custom_scrub_rate(self, body: dict[str, Any]) -> dict[str, Any]: ...
    def update_channel(self, channel_id: int, *, name: str, status: str) -> dict[str, Any]: ...
    def create_category(self, *, name: str, status: str) -> dict[str, Any]: ...
    def bulk_edit_offer_urls(
        self,
        *,
        network_offer_id: int,
        network_offer_url_ids: list[int],
        fields: list[dict[str, Any]],
    ) -> bool: ...


def check_not_blocked(plan: Plan, sections: Iterable[str]) -> None:
    """Stop before sending anything when a section has an unresolved or drifted object.

    :raises SyncBlockedError: with on-call instructions for every blocked object.
    """
    blocked = plan.blocked(sections)
    if not blocked:
        return
    parts = [f"{len(blocked)} object(s) block the sync; nothing in this task was sent."]
    for item in blocked:
        parts.append(f"- {item.key}:")
        parts += [f"    {change.render()}" for change in item.changes if item.action == "drift"]
        parts += [f"    {line}" for line in item.message.splitlines()]
    raise SyncBlockedError("\n".join(parts), blocked=[item.key for item in blocked])


def apply_sections(
    plan: Plan, sections: Iterable[str], writer: NetworkWriter, ledger: Ledger
) -> list[dict[str, Any]]:
    """Apply the plan items of ``sections``; return one small record per object acted on.

    :raises SyncBlockedError: before sending, when the sections hold blocked objects.
    """
    sections = list(sections)
    check_not_blocked(plan, sections)
    done: list[dict[str, Any]] = []
    for item in plan.for_sections(sections):
        if item.action == "unchanged":
            continue
        if item.action == "record":
            _record(item, ledger)
        elif item.obj.create_only:
            _create_once(item, writer, ledger)
        else:
            _put(item, writer, ledger)
        done.append(item.to_dict())
        log.info("%s %s: done", item.action, item.key)
    return done


def _record(item: PlannedChange, ledger: Ledger) -> None:
    """On-call resolution: write the ledger only."""
    ledger.record_applied(
        item.key,
        network_id=item.network_id,
        definition=item.obj.body(),
        hash_=item.obj.definition_hash(),
        note=item.message.split(":", 1)[0],
    )


def _put(item: PlannedChange, writer: NetworkWriter, ledger: Ledger) -> None:
    obj: Any = item.obj
    body = obj.body()
    if obj.section == "offer_groups":
        writer.update_offer_group(obj.network_id, body)
    elif obj.section == "offers":
        writer.update_offer(obj.network_id, body)
    elif obj.section == "channels":
        writer.update_channel(obj.network_id, name=body["name"], status=body["status"])
    elif obj.section == "offer_urls":
        ok = writer.bulk_edit_offer_urls(
            network_offer_id=body["network_offer_id"],
            network_offer_url_ids=body["network_offer_url_ids"],
            fields=body["fields"],
        )
        if not ok:
            # The API answered result=false: not applied; the ledger is left as it was.
            raise AffiliateNetworkError(
                f"bulk edit of {obj.describe()} answered result=false: not applied"
            )
    else:
        raise AffiliateNetworkError(f"no update call for section {obj.section!r}")
    ledger.record_applied(
        item.key, network_id=obj.network_id, definition=body, hash_=obj.definition_hash()
    )


def _create_once(item: PlannedChange, writer: NetworkWriter, ledger: Ledger) -> None:
    obj: DesiredObject = item.obj
    body = obj.body()
    # The intent is durable BEFORE the request: a crash after the POST leaves evidence.
    ledger.record_intent(item.key, definition=body, hash_=obj.definition_hash())
    try:
        if obj.section == "scrub_rates":
            record = writer.create_custom_scrub_rate(body)
        elif obj.section == "categories":
            record = writer.create_category(name=body["name"], status=body["status"])
        else:
            raise AffiliateNetworkError(f"no create call for section {obj.section!r}")
    except OutcomeUnknownError as exc:
        # It may have been created: the intent stays, the next run stops on it.
        raise OutcomeUnknownError(
            f"{exc}\nwhile creating {obj.describe()}.\n" + unresolved_message(obj, None),
            exc.status_code,
        ) from exc
    except AffiliateNetworkError:
        # A definite refusal or a request that never got through: nothing was created.
        ledger.forget(item.key)
        raise
    # Any other exception (a bug, the worker being killed) leaves the intent: unknown outcome.
    network_id = record.get(CREATED_ID_FIELDS[obj.section]) if isinstance(record, dict) else None
    if not isinstance(network_id, int):
        raise OutcomeUnknownError(
            f"the create response for {obj.describe()} carries no "
            f"{CREATED_ID_FIELDS[obj.section]}; it was probably created.\n"
            + unresolved_message(obj, None)
        )
    ledger.record_applied(
        item.key, network_id=network_id, definition=body, hash_=obj.definition_hash()
    )
