"""Operators pushing the desired offer state (``include/offer_state.yaml``) to the network.

Each operator: load and validate the desired state, plan against the ledger, log the plan, then
(unless ``dry_run``) send only what changed and record each success in the ledger. They differ
only in the sections they own:

- :class:`OfferGroupCapsSyncOperator`: offer groups (caps), ``PUT`` whole objects.
- :class:`OfferPayoutSyncOperator`: offers (payouts), ``PUT`` whole objects.
- :class:`ScrubRateSyncOperator`: custom scrub rates, created exactly once.
- :class:`OfferCatalogSyncOperator`: channels (PUT), categories (created once), offer URL status.
- :class:`OfferStateSyncOperator`: any sections (the DAG's plan task: every section, dry run).

Nothing is sent unless the deployment set :data:`ARMED_VARIABLE` (docs/offer-sync.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from affiliate_network.operators.base import AffiliateNetworkBaseOperator, as_bool

# The section names, without sync.models' pydantic models (a DAG file imports this at parse time).
from affiliate_network.sync.spec_fields import WHOLE_FIELDS as SECTIONS

if TYPE_CHECKING:
    from airflow.sdk import Context

    from affiliate_network.hooks.affiliate_network import AffiliateNetworkHook
    from affiliate_network.sync.ledger import Ledger


#: The deployment setting that lets the offer sync send to the network. A new deployment starts
#: without it: every run then plans and reports (a dry run), whatever the run asked.
ARMED_VARIABLE = "AFFILIATE_OFFER_SYNC_ARMED"
#: What an unarmed run's summary and log say to do.
TO_ARM = (
    f"set {ARMED_VARIABLE}=true on the deployment (the workers' environment) to let the offer "
    "sync send to the network (docs/offer-sync.md#arming-the-offer-sync)"
)


def offer_sync_armed(environ: Mapping[str, str] | None = None) -> bool:
    """Whether this deployment has armed the offer sync (:data:`ARMED_VARIABLE`).

    Read when a task runs, never at DAG parse time, by the reader every arming switch shares
    (:func:`~affiliate_network.settings.arming.deployment_armed`). Unset or empty is unarmed.

    :param environ: the environment to read (default: this process's).
    :raises ConfigValidationError: a value other than true/false/1/0/yes/no/on/off, naming
        the variable.
    """
    # Imported here: a DAG file imports this module at parse time, the errors module is not
    # needed then (tests/dags/test_dag_integrity.py).
    from affiliate_network.settings.arming import deployment_armed

    return deployment_armed(ARMED_VARIABLE, environ)


def resolve_state_file(state_file: str) -> Path:
    """A relative desired-state path is read from the include folder."""
    from affiliate_network.settings.paths import include_dir

    path = Path(state_file)
    return path if path.is_absolute() else include_dir() / path


class OfferStateSyncOperator(AffiliateNetworkBaseOperator):
    """Plan and apply some sections of the desired offer state.

    :param sections: YAML sections this task owns (``offer_groups``, ``offers``, ``scrub_rates``,
        ``channels``, ``categories``, ``offer_urls``).
    :param state_file: desired-state YAML; relative paths are read from the include folder.
    :param ledger_path: ledger document (local path or object-storage URL); default
        ``<data base>/sync/ledger-<conn id>.json``.
    :param affiliate_network_conn_id: network-portal connection.
    :param dry_run: only log the plan and return it; nothing is sent, the ledger is untouched.
        An unarmed deployment (:func:`offer_sync_armed`) always gets a dry run.
    :param force: keys of PUT objects to send even when unchanged (e.g. after a hand edit in the
        UI overwrote them).
    :param resolve_unknown: on-call decisions for create requests whose outcome is unknown, by
        key: the id found on the network (recorded, nothing sent) or ``"absent"`` (create it).
    :param accept_drift: keys of create-only objects changed by hand on the network to match the
        new definition: the ledger takes the new definition, nothing is sent.
    :param hook_kwargs: extra keyword arguments of the hook (retries, timeout...).
    """

    template_fields: Sequence[str] = (
        "state_file",
        "ledger_path",
        "dry_run",
        "force",
        "resolve_unknown",
        "accept_drift",
    )
    # A template field is the attribute named like the argument, so this shadows
    # BaseOperator.dry_run() (a render-only dry run nothing in Airflow calls) on purpose.
    dry_run: bool | str  # type: ignore[assignment]  # see above
    ui_color = "#e8f1fb"
    #: Sections of the subclass (``None``: given as an argument).
    owned_sections: ClassVar[tuple[str, ...] | None] = None

    def __init__(
        self,
        *,
        sections: Sequence[str] | None = None,
        state_file: str = "offer_state.yaml",
        ledger_path: str | None = None,
        affiliate_network_conn_id: str = "affiliate_network_default",
        dry_run: bool | str = False,
        force: Sequence[str] | str = (),
        resolve_unknown: Mapping[str, int | str] | str | None = None,
        accept_drift: Sequence[str] | str = (),
        hook_kwargs: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        chosen = tuple(sections) if sections is not None else self.owned_sections
        if not chosen:
            raise ValueError(f"{type(self).__name__}: give the sections to sync")
        unknown = [s for s in chosen if s not in SECTIONS]
        if unknown:
            raise ValueError(f"unknown sections {unknown}; known: {list(SECTIONS)}")
        self.sections = chosen
        self.state_file = state_file
        self.ledger_path = ledger_path
        self.affiliate_network_conn_id = affiliate_network_conn_id
        self.dry_run = dry_run
        self.force = force
        self.resolve_unknown = resolve_unknown
        self.accept_drift = accept_drift
        self.hook_kwargs = dict(hook_kwargs or {})

    # ----- execution -----------------------------------------------------------------------
    def open_ledger(self, hook: AffiliateNetworkHook) -> Ledger:
        """The connection's ledger, refusing one recorded for another network."""
        from affiliate_network.exceptions import PortalMismatchError
        from affiliate_network.sync.ledger import (
            Ledger,
            adopt_connection_ledger,
            default_ledger_path,
        )

        if hook.portal != "network":
            raise PortalMismatchError(
                f"connection {self.affiliate_network_conn_id!r} is for the {hook.portal} portal; "
                "the offer sync needs a network-portal connection. Nothing was sent."
            )
        path = self.ledger_path or adopt_connection_ledger(
            default_ledger_path(hook.network.slug), self.affiliate_network_conn_id
        )
        return Ledger.load(path, target=hook.network.canonical)

    def execute_job(self, context: Context) -> dict[str, Any]:
        """The sync, with what the run was (and its plan) recorded for the network page."""
        from affiliate_network.exceptions import SyncBlockedError
        from affiliate_network.sync.ledger import sync_run_folder

        return self.run_recorded(
            context,
            lambda: self._sync(context),
            folder=lambda dag_id, run_id: sync_run_folder(self.ledger_path, dag_id, run_id),
            outcome_of=lambda summary: ("dry_run" if summary.get("dry_run") else "wrote", None),
            stops=(SyncBlockedError,),
        )

    def _sync(self, context: Context) -> dict[str, Any]:
        from affiliate_network.sync.job import run_sync
        from affiliate_network.sync.loader import load_desired_state

        asked = as_bool(self.dry_run, "dry_run")
        armed = offer_sync_armed()  # at run time: arming takes effect without a re-parse
        if not armed:
            self.log.warning(
                "Not armed: this deployment does not set %s=true, so the offer sync only plans "
                "and reports; nothing is sent to the network%s. To arm it, %s.",
                ARMED_VARIABLE,
                "" if asked else ", whatever the run asked",
                TO_ARM,
            )
        state = load_desired_state(
            resolve_state_file(self.state_file), display_name=self.state_file
        )
        hook = self.hook
        summary = run_sync(
            state,
            self.open_ledger(hook),
            hook,
            sections=self.sections,
            dry_run=asked or not armed,
            armed=armed,
            network=hook.network.slug,
            resolve_unknown=self.resolve_unknown,
            accept_drift=self.accept_drift,
            force=self.force,
            log=self.log,
        )
        return summary if armed else {**summary, "to_arm": TO_ARM}


class OfferGroupCapsSyncOperator(OfferStateSyncOperator):
    """Push offer groups (caps, status, offers, labels, notes) as whole objects (PUT).

    Arguments as :class:`OfferStateSyncOperator`, without ``sections``.
    """

    owned_sections = ("offer_groups",)


class OfferPayoutSyncOperator(OfferStateSyncOperator):
    """Push offers (payout/revenue entries and the other request fields) as whole objects (PUT).

    Arguments as :class:`OfferStateSyncOperator`, without ``sections``.
    """

    owned_sections = ("offers",)


class ScrubRateSyncOperator(OfferStateSyncOperator):
    """Create each desired custom scrub rate exactly once.

    The ledger records an intent before each POST and the id after it. A rerun that finds an
    intent without an id stops and names the setting to check (``resolve_unknown`` continues);
    a definition changed after creation is drift and fails the task with instructions
    (``accept_drift`` records a hand-made fix); a setting is never created twice.

    Arguments as :class:`OfferStateSyncOperator`, without ``sections``.
    """

    owned_sections = ("scrub_rates",)


class OfferCatalogSyncOperator(OfferStateSyncOperator):
    """Push channels (PUT), create categories once, set offer URL status (bulk edit).

    Arguments as :class:`OfferStateSyncOperator`, without ``sections``.
    """

    owned_sections = ("channels", "categories", "offer_urls")
