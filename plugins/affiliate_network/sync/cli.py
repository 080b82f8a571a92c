"""``affiliate-network-sync``: validate a desired-state file or show its plan, without Airflow.

Usage::

    affiliate-network-sync validate include/offer_state.yaml
    affiliate-network-sync plan include/offer_state.yaml [--ledger PATH | --conn-id ID]
                                [--detailed-exitcode]

Exit codes: 0 valid / no changes, 1 invalid or error, 2 (with ``--detailed-exitcode``) the plan
has changes, 3 the plan is blocked (unresolved or drifted create-once objects: the sync would
stop; always, with or without the flag, so a script or a CI job stops too). Nothing is ever
sent to the network from here.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from affiliate_network.exceptions import AffiliateNetworkError
from affiliate_network.settings.paths import default_data_base


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="affiliate-network-sync",
        description="Validate desired offer state and show what a sync would change.",
    )
    # Both commands read one desired-state file.
    state_file = argparse.ArgumentParser(add_help=False)
    state_file.add_argument("file", help="desired-state YAML (e.g. include/offer_state.yaml)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("validate", parents=[state_file], help="check every value against the API spec")
    plan = sub.add_parser(
        "plan", parents=[state_file], help="diff the desired state against the sync ledger"
    )
    # The ledger is named by its path or found by the connection it belongs to, not both.
    ledger = plan.add_mutually_exclusive_group()
    ledger.add_argument("--ledger", metavar="PATH", help="ledger document (local path or URL)")
    ledger.add_argument(
        "--conn-id",
        metavar="ID",
        default="affiliate_network_default",
        help="the connection whose network's ledger is read: <data base>/sync/ledger-<network>"
        ".json (the connection is read through Airflow to know its network), the data base "
        "from $AFFILIATE_NETWORK_DATA_BASE or <project>/data (default: %(default)s)",
    )
    plan.add_argument(
        "--detailed-exitcode",
        action="store_true",
        help="exit 2 when the plan would change something (a blocked plan always exits 3)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code."""
    args = _parser().parse_args(argv)
    # Imported here: argument errors and --help stay fast.
    from affiliate_network.sync.loader import load_desired_state

    try:
        state = load_desired_state(args.file)
        if args.command == "validate":
            summary = ", ".join(f"{n} {section}" for section, n in state.counts().items() if n)
            print(f"{args.file}: valid ({summary or 'no objects'})")
            return 0

        from affiliate_network.sync.ledger import Ledger
        from affiliate_network.sync.plan import build_plan

        ledger_path = args.ledger or _network_ledger(args.conn_id)
        plan = build_plan(state, Ledger.load(ledger_path))
        print(plan.render())
        counts = plan.counts()
        pending = counts["create"] + counts["update"] + counts["record"]
        blocked = counts["unresolved"] + counts["drift"]
        if blocked:
            print(f"blocked: {blocked} object(s) need a person (see above)", file=sys.stderr)
            return 3
        return 2 if args.detailed_exitcode and pending else 0
    except AffiliateNetworkError as exc:
        print(str(exc), file=sys.stderr)
        return 1


def _network_ledger(conn_id: str) -> str:
    """The ledger of the network ``conn_id`` reaches (the connection read through Airflow).

    The CLI runs outside Airflow: the data base comes from the env or the default only. A
    ledger still named by the connection (``ledger-<ID>.json``) is read where the network's does
    not exist yet (the sync task renames it on its next run; this command writes nothing).
    """
    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
    from affiliate_network.sync.ledger import default_ledger_path

    base = default_data_base()
    path = default_ledger_path(AffiliateNetworkHook(conn_id).network.slug, base)
    legacy = default_ledger_path(conn_id, base)
    if not os.path.exists(path) and os.path.exists(legacy):
        return legacy
    return path


if __name__ == "__main__":
    sys.exit(main())
