"""The traffic an on-hold review decides from: every conversion of its window and look-back."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from affiliate_network.review.audit import AUDIT_FIELDS

if TYPE_CHECKING:
    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
    from affiliate_network.review.engine import RuleSet
    from affiliate_network.review.window import ReviewWindow

#: Fields and relationship members kept from each pulled conversion besides what rules read.
KEEP_FIELDS = ("conversion_id", "transaction_id", "currency_id", *AUDIT_FIELDS)
KEEP_MEMBERS = ("on_hold_snapshots", "affiliate", "offer")


def pull_review_traffic(
    hook: AffiliateNetworkHook, ruleset: RuleSet, window: ReviewWindow, page_size: int | None
) -> list[dict[str, Any]]:
    """Every conversion of the window and its look-back, whatever its on-hold state,
    projected to what rules and audit need (aggregates count all of them).

    :param hook: the network hook.
    :param ruleset: the rules (their fields decide what is kept of each record).
    :param window: the review's window (``pull_from`` .. ``pull_to``).
    :param page_size: conversion report page size (``None``: the connection's).
    :return: the projected records, in the report's order.
    """
    keep = {*(p.split(".", 1)[0] for p in ruleset.prefetch), *KEEP_FIELDS}
    members = {*ruleset.relationship_members(), *KEEP_MEMBERS}
    records: list[dict[str, Any]] = []
    for record in hook.iter_conversions(
        from_date=window.pull_from,
        to_date=window.pull_to,
        timezone_id=window.timezone_id,
        show_conversions=True,
        show_events=False,
        page_size=page_size,
    ):
        # Keep only the fields rules and audit read: memory stays bounded for big windows.
        compact = {k: record[k] for k in keep if k in record}
        rel = record.get("relationship")
        if isinstance(rel, dict):
            compact["relationship"] = {m: rel[m] for m in members if m in rel}
        records.append(compact)
    return records
