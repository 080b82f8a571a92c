"""One offer-sync run: plan the desired state against the ledger, log it, send what changed.

Runnable without Airflow (a hook and a ledger in, a JSON-serialisable summary out); the
operators in :mod:`affiliate_network.operators.offer_state_sync` decide arming and call it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from affiliate_network.helpers.tasklog import TaskLog
from affiliate_network.sync.apply import NetworkWriter, apply_sections
from affiliate_network.sync.ledger import Ledger
from affiliate_network.sync.models import DesiredState
from affiliate_network.sync.plan import build_plan, run_keys, run_resolutions


def run_sync(
    state: DesiredState,
    ledger: Ledger,
    writer: NetworkWriter,
    *,
    sections: Sequence[str],
    dry_run: bool,
    armed: bool,
    network: str,
    resolve_unknown: Mapping[str, int | str] | str | None = None,
    accept_drift: Sequence[str] | str = (),
    force: Sequence[str] | str = (),
    log: TaskLog,
) -> dict[str, Any]:
    """Plan ``sections``, log the plan, and unless ``dry_run`` apply it (ledger first).

    :param armed: whether the deployment is armed (said in the log and the summary).
    :param network: the network's key (``hook.network.slug``), for the summary.
    :param resolve_unknown: on-call decisions for creates of unknown outcome (run values).
    :param accept_drift: keys whose hand-made change the ledger takes over (run values).
    :param force: keys of PUT objects sent even when unchanged (run values).
    :returns: the run's summary: the plan's counts, ``blocked`` (dry run) or ``applied``.
    """
    plan = build_plan(
        state,
        ledger,
        resolve_unknown=run_resolutions(resolve_unknown),
        accept_drift=run_keys(accept_drift, "accept_drift"),
        force=run_keys(force, "force"),
    )
    banner = "DRY RUN: nothing is sent" if armed else "NOT ARMED, DRY RUN: nothing is sent"
    log.info("%s\n%s", banner if dry_run else "Applying", plan.render(sections))
    summary: dict[str, Any] = {
        "sections": list(sections),
        "dry_run": dry_run,
        "armed": armed,
        "ledger": str(ledger.path),
        "network": network,
        **plan.summary(sections),
    }
    if dry_run:
        blocked = plan.blocked(sections)
        for item in blocked:
            log.error("%s would block the apply:\n%s", item.key, item.message)
        return {**summary, "blocked": [item.key for item in blocked]}
    summary["applied"] = apply_sections(plan, sections, writer, ledger)
    log.info(
        "Sent %d change(s) for %s; ledger %s",
        len(summary["applied"]),
        ", ".join(sections),
        ledger.path,
    )
    return summary
