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
import sys
from collections.abc import Sequence

from affiliate_network.exceptions import AffiliateNetworkError
from affiliate_network.paths import default_data_base


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="affiliate-network-sync",
        description="Validate desired offer state and show what a sync would change.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    validate = sub.add_parser("validate", help="check every value against the API spec")
    validate.add_argument("file", help="desired-state YAML (e.g. include/offer_state.yaml)")
    plan = sub.add_parser("plan", help="diff the desired state against the sync ledger")
    plan.add_argument("file", help="desired-state YAML (e.g. include/offer_state.yaml)")
    plan.add_argument(
        "--ledger",
        help="ledger document (local path or URL); default <data base>/sync/ledger-<conn>.json "
        "with the data base from $AFFILIATE_NETWORK_DATA_BASE or <project>/data",
    )
    plan.add_argument("--conn-id", default="affiliate_network_default", help="names the ledger")
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

        from affiliate_network.sync.ledger import Ledger, default_ledger_path
        from affiliate_network.sync.plan import build_plan

        # The CLI runs outside Airflow: the data base comes from the env or the default only.
        ledger_path = args.ledger or default_ledger_path(args.conn_id, default_data_base())
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


if __name__ == "__main__":
    sys.exit(main())
